#include "core/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <regex>

namespace hf {
namespace {

using nlohmann::json;

bool IsNullText(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> BoolText(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

// A plain scalar's value under the core schema (see the header).
json TypedScalar(const std::string& s) {
  if (IsNullText(s)) return nullptr;
  if (std::optional<bool> b = BoolText(s)) return *b;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  const char* end = s.data() + s.size();
  if (std::regex_match(s, kInt)) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(begin, end, v);
    if (ec == std::errc() && p == end) return v;
    // Too large for int64: fall through to a float, which the API's integer
    // fields refuse with the field named.
  }
  if (std::regex_match(s, kFloat)) {
    double d = 0;
    auto [p, ec] = std::from_chars(begin, end, d);
    if (p == end && (ec == std::errc() || ec == std::errc::result_out_of_range)) return d;
  }
  static const std::regex kInf(R"([-+]?\.(inf|Inf|INF))");
  if (std::regex_match(s, kInf)) {
    return s[0] == '-' ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return s;
}

// Whether a reader (ours, or a YAML 1.1 one such as PyYAML) would take this
// plain text for something other than a string.
bool NeedsQuotes(const std::string& s) {
  if (!TypedScalar(s).is_string()) return true;
  static const std::regex kYaml11Bool("y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF");
  return std::regex_match(s, kYaml11Bool);
}

void Emit(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key;
        if (NeedsQuotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const json& e : v) Emit(out, e);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case json::value_t::boolean:
      out << (v.get<bool>() ? "true" : "false");
      return;
    case json::value_t::number_float:
      // nlohmann writes the shortest text that reads back as the same double
      // (0.85, not yaml-cpp's 0.84999999999999998).
      out << v.dump();
      return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      out << v.dump();
      return;
    default:
      out << YAML::Null;
      return;
  }
}

}  // namespace

bool IsStringField(std::string_view p) {
  static constexpr std::string_view kExact[] = {
      // A task submission.
      "name", "group", "kind", "depends_on[]", "command[]", "requests.gpu_models[]",
      "requests.gpu_vendors[]",
      // A node inventory.
      "gpus[].uuid", "gpus[].model", "gpus[].vendor", "rdma[].name", "topology.zone",
      "topology.switch", "topology.rack",
      // A model deployment or an endpoint (its other string fields are above).
      "model", "health_path"};
  for (std::string_view e : kExact) {
    if (p == e) return true;
  }
  // Maps of strings whose keys are the user's.
  return p.substr(0, 4) == "env." || p.substr(0, 7) == "labels.";
}

Result<json> YamlToJson(const YAML::Node& node, const std::string& pattern, int first_line) {
  auto at = [&](const YAML::Node& n) {
    return "line " + std::to_string(first_line + n.Mark().line + 1);
  };
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return InvalidArgument(at(kv.first) + ": keys must be strings");
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) {
          return InvalidArgument(at(kv.first) + ": key \"" + key + "\" given twice");
        }
        Result<json> value =
            YamlToJson(kv.second, pattern.empty() ? key : pattern + "." + key, first_line);
        if (!value.ok()) return value.status();
        out[key] = std::move(*value);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& e : node) {
        Result<json> value = YamlToJson(e, pattern + "[]", first_line);
        if (!value.ok()) return value.status();
        out.push_back(std::move(*value));
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      // yaml-cpp tags plain scalars "?" and quoted ones "!".
      if (node.Tag() != "?") return json(s);
      if (IsStringField(pattern) && !IsNullText(s)) return json(s);
      return TypedScalar(s);
    }
    default:
      return json(nullptr);
  }
}

std::string JsonToYaml(const json& value) {
  YAML::Emitter out;
  Emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace hf
