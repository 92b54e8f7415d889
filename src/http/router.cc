#include "http/router.h"

#include <algorithm>
#include <set>
#include <utility>

namespace hf::http {

namespace {

// "/a/b" -> {"a", "b"}; "/" -> {""}. Callers guarantee a leading '/'.
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

}  // namespace

Status Router::Add(std::string method, std::string_view pattern, Handler handler) {
  if (method.empty()) return InvalidArgument("route method must not be empty");
  if (pattern.empty() || pattern[0] != '/') {
    return InvalidArgument("route pattern \"" + std::string(pattern) + "\" must start with '/'");
  }
  Route route{.method = std::move(method), .handler = std::move(handler)};
  std::set<std::string> names;
  std::vector<std::string_view> parts = SplitPath(pattern);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    // The root pattern "/" is the one place an empty segment is meaningful.
    if (part.empty() && !(parts.size() == 1)) {
      return InvalidArgument("route pattern \"" + std::string(pattern) + "\" has an empty segment");
    }
    Segment seg;
    bool has_brace = part.find_first_of("{}") != std::string_view::npos;
    if (part.size() >= 3 && part.front() == '{' && part.back() == '}' &&
        part.substr(1, part.size() - 2).find_first_of("{}") == std::string_view::npos) {
      seg.is_param = true;
      seg.text = std::string(part.substr(1, part.size() - 2));
      if (!names.insert(seg.text).second) {
        return InvalidArgument("route pattern \"" + std::string(pattern) + "\" repeats {" +
                               seg.text + "}");
      }
      route.shape += "/{}";
    } else if (has_brace) {
      return InvalidArgument("route pattern \"" + std::string(pattern) +
                             "\" has a malformed parameter segment \"" + std::string(part) + "\"");
    } else {
      seg.text = std::string(part);
      route.shape += "/" + seg.text;
    }
    route.segments.push_back(std::move(seg));
  }
  for (const Route& r : routes_) {
    if (r.method == route.method && r.shape == route.shape) {
      return AlreadyExists("route " + route.method + " " + std::string(pattern) +
                           " is already registered");
    }
  }
  routes_.push_back(std::move(route));
  return Status::Ok();
}

Response Router::Dispatch(const Request& req) const {
  std::vector<std::string_view> parts = req.path.empty() || req.path[0] != '/'
                                            ? std::vector<std::string_view>{}
                                            : SplitPath(req.path);
  // Specificity is a literal(1)/param(0) string per segment; comparing two of
  // equal length lexicographically is exactly "first literal wins".
  const std::string* best_shape = nullptr;
  std::string best_rank;
  for (const Route& r : routes_) {
    if (r.segments.size() != parts.size()) continue;
    std::string rank;
    bool match = true;
    for (size_t i = 0; i < parts.size() && match; ++i) {
      const Segment& s = r.segments[i];
      if (s.is_param) {
        match = !parts[i].empty();
        rank.push_back('0');
      } else {
        match = s.text == parts[i];
        rank.push_back('1');
      }
    }
    if (match && (best_shape == nullptr || rank > best_rank)) {
      best_shape = &r.shape;
      best_rank = std::move(rank);
    }
  }
  if (best_shape == nullptr) {
    return JsonError(404, "not_found", "no route for " + req.path);
  }
  std::set<std::string> allowed;
  for (const Route& r : routes_) {
    if (r.shape != *best_shape) continue;
    if (r.method != req.method) {
      allowed.insert(r.method);
      continue;
    }
    // A route without parameters sees the request itself: the copy (every
    // header, the body) would be most of what routing costs.
    const bool has_params = std::any_of(r.segments.begin(), r.segments.end(),
                                        [](const Segment& s) { return s.is_param; });
    if (!has_params && req.path_params.empty()) return r.handler(req);
    Request routed = req;
    routed.path_params.clear();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (r.segments[i].is_param) {
        routed.path_params.emplace(r.segments[i].text, std::string(parts[i]));
      }
    }
    return r.handler(routed);
  }
  std::string allow;
  for (const std::string& m : allowed) {
    if (!allow.empty()) allow += ", ";
    allow += m;
  }
  Response res =
      JsonError(405, "method_not_allowed",
                "method " + req.method + " is not allowed on " + req.path + "; allowed: " + allow);
  res.SetHeader("Allow", allow);
  return res;
}

Handler Router::AsHandler() const {
  return [this](const Request& req) { return Dispatch(req); };
}

}  // namespace hf::http
