#include "server/route_table.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/status.h"

namespace hf::server {

using http::JsonResponse;
using http::Request;
using http::Response;
using nlohmann::json;

void RouteTable::Note(Doc doc, Runs runs) {
  if (runs == Runs::kInline) {
    HF_CHECK(doc.path.find('{') == std::string::npos);
    inline_[doc.path].insert(doc.method);
  }
  docs_.push_back(std::move(doc));
}

void RouteTable::Add(const char* method, const char* path, Action action, const char* summary,
                     Handler fn, const char* body, Runs runs) {
  Note({method, path, summary, true, body}, runs);
  HF_CHECK(router_
               .Add(method, path,
                    [this, action, fn = std::move(fn)](const Request& req) {
                      Caller caller;
                      Response denied;
                      if (!auth_.Authorize(req, action, caller, denied)) return denied;
                      return fn(req, caller);
                    })
               .ok());
}

void RouteTable::AddPublic(const char* method, const char* path, const char* summary,
                           http::Handler fn, Runs runs) {
  Note({method, path, summary, false, ""}, runs);
  HF_CHECK(router_.Add(method, path, std::move(fn)).ok());
}

bool RouteTable::RunsInline(const Request& req) const {
  const auto it = inline_.find(req.path);
  return it != inline_.end() && it->second.count(req.method) != 0;
}

Response RouteTable::OpenApi() const {
  json paths = json::object();
  for (const Doc& r : docs_) {
    // OpenAPI writes parameters as {name}, as the router does.
    json op = {{"summary", r.summary},
               {"responses",
                {{"200", {{"description", "success (201 for creations)"}}},
                 {"400", {{"description", "invalid input; the message names the field"}}},
                 {"401", {{"description", "missing, invalid, expired or revoked token"}}},
                 {"403", {{"description", "the token's role may not do this"}}},
                 {"404", {{"description", "no such object"}}}}}};
    if (!r.authenticated) op["security"] = json::array();
    json params = json::array();
    size_t pos = 0;
    while ((pos = r.path.find('{', pos)) != std::string::npos) {
      const size_t close = r.path.find('}', pos);
      params.push_back({{"name", r.path.substr(pos + 1, close - pos - 1)},
                        {"in", "path"},
                        {"required", true},
                        {"schema", {{"type", "string"}}}});
      pos = close;
    }
    if (!params.empty()) op["parameters"] = std::move(params);
    if (!r.body.empty()) {
      op["requestBody"] = {{"required", true},
                           {"description", r.body + " (see docs/API.md)"},
                           {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}};
    }
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[r.path][method] = std::move(op);
  }
  json doc = {
      {"openapi", "3.0.3"},
      {"info", {{"title", "HeteroFlow API"}, {"version", "0.1.0"}}},
      {"components", {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
      {"security", json::array({{{"bearer", json::array()}}})},
      {"paths", std::move(paths)}};
  return JsonResponse(200, doc);
}

}  // namespace hf::server
