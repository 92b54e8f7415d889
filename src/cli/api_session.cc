#include "cli/api_session.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

namespace hf::cli {

using http::HttpClient;
using http::HttpResponse;
using http::ParseServerUrl;
using http::ServerUrl;

using nlohmann::json;

std::string ApiErrorText(int status, std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    const std::string code =
        e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "error";
    const std::string message =
        e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
    return "error: " + std::to_string(status) + " " + code +
           (message.empty() ? "" : ": " + message);
  }
  std::string text(body.substr(0, 200));
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "error: HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text);
}

Result<ApiSession> ApiSession::Open(const GlobalFlags& flags) {
  Result<OutputFormat> format = ParseOutputFormat(flags.output);
  if (!format.ok()) return format.status();
  if (!std::isfinite(flags.timeout_s) || flags.timeout_s <= 0) {
    return InvalidArgument("--timeout must be a positive number of seconds");
  }
  ConfigInputs in{.flag_server = flags.server, .flag_token = flags.token, .env = ProcessEnv()};
  Result<ClientSettings> settings = ResolveSettings(in);
  if (!settings.ok()) return settings.status();
  // One URL, or the replicas' (docs/HA.md), comma-separated.
  Result<std::vector<ServerUrl>> urls = http::ParseServerUrls(settings->server);
  if (!urls.ok()) {
    return InvalidArgument(urls.status().message() + " (from " + settings->server_source + ")");
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  HttpClient http(std::move(*urls), settings->token, timeout);
  return ApiSession(std::move(*settings), std::move(http), *format);
}

std::optional<json> ApiSession::Call(std::string_view method, std::string_view target,
                                     const json* body, int* status) {
  std::optional<std::string> text = CallText(method, target, body, status);
  if (!text) return std::nullopt;
  if (text->empty()) return json(nullptr);
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "error: the server's answer to %s %s is not JSON\n",
                 std::string(method).c_str(), std::string(target).c_str());
    return std::nullopt;
  }
  return j;
}

std::optional<bool> ApiSession::Exists(std::string_view target) {
  Result<HttpResponse> r = http_.Send("GET", target, std::string());
  if (r.ok() && r->status == 404) return false;
  if (r.ok() && r->status >= 200 && r->status <= 299) return true;
  ReportFailure(r);
  return std::nullopt;
}

std::optional<std::string> ApiSession::CallText(std::string_view method, std::string_view target,
                                                const json* body, int* status) {
  Result<HttpResponse> r = http_.Send(method, target, body ? body->dump() : std::string());
  if (!r.ok() || r->status < 200 || r->status > 299) {
    ReportFailure(r);
    return std::nullopt;
  }
  if (status) *status = r->status;
  return std::move(r->body);
}

void ApiSession::ReportFailure(const Result<HttpResponse>& r) const {
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    const std::string from = settings_.server_source == "default"
                                 ? "is the default"
                                 : "came from " + settings_.server_source;
    std::fprintf(stderr,
                 "hint: the server URL %s; set it with --server, HETEROFLOW_SERVER or "
                 "server: in the config file\n",
                 from.c_str());
    return;
  }
  std::fprintf(stderr, "%s\n", ApiErrorText(r->status, r->body).c_str());
  if (r->status == 401) {
    if (settings_.token.empty()) {
      std::fprintf(stderr,
                   "hint: no token given; use --token, HETEROFLOW_TOKEN or token: in the "
                   "config file\n");
    } else {
      std::fprintf(stderr, "hint: the token came from %s\n", settings_.token_source.c_str());
    }
  }
}

}  // namespace hf::cli
