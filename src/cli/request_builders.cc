#include "cli/request_builders.h"

#include <cctype>
#include <cmath>

namespace hf::cli {
namespace {

using nlohmann::json;

// Splits "a.b.c" into its parts; nullopt when a part is empty.
std::optional<std::vector<std::string>> KeyParts(std::string_view key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    std::string_view part = key.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty()) return std::nullopt;
    parts.emplace_back(part);
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// Whether `a` is `b` or a dotted parent of it ("x" of "x.y").
bool Covers(const std::string& a, const std::string& b) {
  return b == a || (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '.');
}

}  // namespace

Result<json> ParseConfigAssignments(const std::vector<std::string>& args) {
  if (args.empty()) return InvalidArgument("config set needs at least one KEY=VALUE");
  json out = json::object();
  std::vector<std::string> keys;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("\"" + arg + "\" is not KEY=VALUE (e.g. load_threshold=0.85)");
    }
    const std::string key = arg.substr(0, eq);
    const std::string text = arg.substr(eq + 1);
    std::optional<std::vector<std::string>> parts = KeyParts(key);
    if (!parts) return InvalidArgument("\"" + arg + "\": empty key or key part");
    if (text.empty()) return InvalidArgument("\"" + arg + "\": empty value");
    for (const std::string& other : keys) {
      if (other == key) return InvalidArgument("key " + key + " given twice");
      if (Covers(other, key) || Covers(key, other)) {
        return InvalidArgument("keys " + other + " and " + key + " overlap");
      }
    }
    keys.push_back(key);
    json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = text;
    json* node = &out;
    for (size_t i = 0; i + 1 < parts->size(); ++i) {
      json& child = (*node)[(*parts)[i]];
      if (child.is_null()) child = json::object();
      node = &child;
    }
    (*node)[parts->back()] = std::move(value);
  }
  return out;
}

Result<json> PluginPatchBody(const PluginSetArgs& args) {
  json body = json::object();
  if (args.weight) {
    if (!std::isfinite(*args.weight) || *args.weight < 0) {
      return InvalidArgument("--weight must be a number >= 0");
    }
    // Whole weights go as integers, as the server writes them.
    const double w = *args.weight;
    if (w == std::floor(w) && w < 1e15) {
      body["weight"] = static_cast<int64_t>(w);
    } else {
      body["weight"] = w;
    }
  }
  if (args.enabled) {
    if (*args.enabled != "true" && *args.enabled != "false") {
      return InvalidArgument("--enabled must be true or false, not \"" + *args.enabled + "\"");
    }
    body["enabled"] = *args.enabled == "true";
  }
  if (args.mode) body["mode"] = *args.mode;
  if (args.config) {
    json config = json::parse(*args.config, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return InvalidArgument("--config must be a JSON object, e.g. '{\"file\": \"topo.yaml\"}'");
    }
    body["config"] = std::move(config);
  }
  if (body.empty()) {
    return InvalidArgument("nothing to set: give --weight, --enabled, --mode or --config");
  }
  return body;
}

std::string TaskListTarget(const TaskFilters& f) {
  std::string query;
  auto add = [&](const char* key, const std::string& value) {
    query += query.empty() ? "?" : "&";
    query += key;
    query += '=';
    query += UrlEncode(value);
  };
  if (!f.state.empty()) add("state", f.state);
  if (!f.node.empty()) add("node", f.node);
  if (!f.group.empty()) add("group", f.group);
  if (f.priority) add("priority", std::to_string(*f.priority));
  if (f.limit) add("limit", std::to_string(*f.limit));
  if (f.after) add("after", std::to_string(*f.after));
  return "/api/v1/tasks" + query;
}

}  // namespace hf::cli
