#include "server/route_table.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
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
  Note({method, path, summary, Credential::kToken, body}, runs);
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
  Note({method, path, summary, Credential::kNone, ""}, runs);
  HF_CHECK(router_.Add(method, path, std::move(fn)).ok());
}

void RouteTable::DescribeGateway(const char* method, const char* path, const char* summary,
                                 const char* body) {
  docs_.push_back({method, path, summary, Credential::kEndpointKey, body});
}

bool RouteTable::RunsInline(const Request& req) const {
  const auto it = inline_.find(req.path);
  return it != inline_.end() && it->second.count(req.method) != 0;
}

namespace {

// An operation's id from its method (lower case) and path: the method, then
// each path segment capitalised (a parameter as By<Name>), the API's /api/v1
// prefix left out: get /api/v1/tasks/{id}/events -> getTasksByIdEvents.
std::string OperationId(const std::string& method, std::string_view path) {
  std::string id = method;
  constexpr std::string_view kApi = "/api/v1/";
  if (path.starts_with(kApi)) path.remove_prefix(kApi.size() - 1);
  bool upper = true;
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '{') {
      id += "By";
      upper = true;
    } else if (std::isalnum(static_cast<unsigned char>(c))) {
      id += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    } else {
      upper = true;  // '/', '}', '-', '_', '.'
    }
  }
  return id;
}

}  // namespace

Response RouteTable::OpenApi() const {
  json paths = json::object();
  std::set<std::string> ids;
  for (const Doc& r : docs_) {
    // OpenAPI writes parameters as {name}, as the router does.
    json responses = {{"200", {{"description", "success (201 for creations)"}}},
                      {"400", {{"description", "invalid input; the message names the field"}}},
                      {"401", {{"description", "missing, invalid, expired or revoked token"}}},
                      {"403", {{"description", "the token's role may not do this"}}},
                      {"404", {{"description", "no such object"}}}};
    if (r.credential == Credential::kEndpointKey) {
      responses = {{"200", {{"description", "the replica's answer, relayed as it arrives"}}},
                   {"400", {{"description", "body not a JSON object, or no model"}}},
                   {"401", {{"description", "missing or wrong key for the endpoint"}}},
                   {"404", {{"description", "no such endpoint"}}},
                   {"503", {{"description", "no ready replica"}}}};
    }
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string id = OperationId(method, r.path);
    HF_CHECK(ids.insert(id).second);  // two routes may not share an operationId
    json op = {{"operationId", std::move(id)}, {"summary", r.summary}, {"responses", std::move(responses)}};
    if (r.credential == Credential::kNone) op["security"] = json::array();
    // A key for a keyed endpoint, nothing for a public one.
    if (r.credential == Credential::kEndpointKey) {
      op["security"] = json::array({{{"endpointKey", json::array()}}, json::object()});
    }
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
    paths[r.path][method] = std::move(op);
  }
  json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "HeteroFlow API"},
        {"version", "0.1.0"},
        {"description", "The REST API of the HeteroFlow scheduler and its inference gateway (docs/API.md)."},
        {"license", {{"name", "Apache-2.0"}, {"url", "https://www.apache.org/licenses/LICENSE-2.0"}}}}},
      // The document describes the server that serves it.
      {"servers", json::array({{{"url", "/"}, {"description", "this server"}}})},
      {"components",
       {{"securitySchemes",
         {{"bearer", {{"type", "http"}, {"scheme", "bearer"}, {"description", "an API token (hf_...)"}}},
          {"endpointKey",
           {{"type", "http"}, {"scheme", "bearer"}, {"description", "an inference endpoint's key (hfk_...)"}}}}}}},
      {"security", json::array({{{"bearer", json::array()}}})},
      {"paths", std::move(paths)}};
  return JsonResponse(200, doc);
}

}  // namespace hf::server
