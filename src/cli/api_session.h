// One client command's link to the API: the resolved server and token
// (client_config.h), the HTTP client, the output format, and the one place
// where API errors become the message on stderr.
//
// Threading: one session per command, used from one thread.
#ifndef HF_CLI_API_SESSION_H_
#define HF_CLI_API_SESSION_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "cli/client_config.h"
#include "cli/output.h"
#include "core/status.h"
#include "http/client.h"

namespace hf::cli {

// The options every client command takes.
struct GlobalFlags {
  std::string server;
  std::string token;
  std::string output = "table";
  double timeout_s = 30;
};

// "error: 409 conflict: enabling spread ..." from an API error answer; for a
// body that is not the API's error shape, "error: HTTP 502: <start of body>".
std::string ApiErrorText(int status, std::string_view body);

class ApiSession {
 public:
  // Resolves the server and token and parses the URL and output format.
  // Errors are InvalidArgument (a usage error: bad config file, bad URL).
  static Result<ApiSession> Open(const GlobalFlags& flags);

  // Sends the request; on a 2xx answer returns its JSON (null for an empty
  // body) and, when `status` is given, the HTTP status. Otherwise prints the
  // error to stderr (with a hint about where the server or token came from
  // for connection failures and 401) and returns nullopt: exit code 1.
  std::optional<nlohmann::json> Call(std::string_view method, std::string_view target,
                                     const nlohmann::json* body = nullptr, int* status = nullptr);

  // The same for an answer that is not JSON (task logs): its body.
  std::optional<std::string> CallText(std::string_view method, std::string_view target,
                                      const nlohmann::json* body = nullptr, int* status = nullptr);

  // GET `target`: true on 2xx, false on 404 (nothing printed); otherwise
  // prints the error as Call does and returns nullopt. `apply` uses it to
  // choose between creating and replacing.
  std::optional<bool> Exists(std::string_view target);

  OutputFormat format() const { return format_; }

 private:
  // Prints a failed request (no answer, or a non-2xx one) to stderr, with
  // the hints described at Call.
  void ReportFailure(const Result<http::HttpResponse>& r) const;

  ApiSession(ClientSettings settings, http::HttpClient http, OutputFormat format)
      : settings_(std::move(settings)), http_(std::move(http)), format_(format) {}

  ClientSettings settings_;
  http::HttpClient http_;
  OutputFormat format_;
};

}  // namespace hf::cli

#endif  // HF_CLI_API_SESSION_H_
