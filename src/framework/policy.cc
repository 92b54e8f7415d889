#include "framework/policy.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace hf::framework {
namespace {

// Converts a YAML node to JSON, keeping scalars' natural types.
nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : node) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& v : node) j.push_back(ToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: keep as string
      bool b;
      if (YAML::convert<bool>::decode(node, b)) return b;
      long long i;
      if (YAML::convert<long long>::decode(node, i)) return i;
      double d;
      if (YAML::convert<double>::decode(node, d)) return d;
      return s;
    }
    default:
      return nullptr;
  }
}

Status ThresholdOk(double v, const char* field) {
  if (!(v > 0.0 && v <= 1.0)) {
    return InvalidArgument(std::string(field) + " must be in (0, 1], got " + std::to_string(v));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateWeight(double w, const std::string& field) {
  if (!std::isfinite(w) || w < 0) return InvalidArgument(field + " must be a finite number >= 0");
  return Status::Ok();
}

Status SchedulerConfig::Validate() const {
  HF_RETURN_IF_ERROR(ThresholdOk(load_threshold, "load_threshold"));
  HF_RETURN_IF_ERROR(ThresholdOk(gpu_load_threshold, "gpu_load_threshold"));
  HF_RETURN_IF_ERROR(ThresholdOk(memory_threshold, "memory_threshold"));
  if (percentage_of_nodes_to_score < 0 || percentage_of_nodes_to_score > 100) {
    return InvalidArgument("percentage_of_nodes_to_score must be an integer in [0, 100], got " +
                           std::to_string(percentage_of_nodes_to_score));
  }
  return ValidateVendorList(exclusive_gpu_vendors, "exclusive_gpu_vendors");
}

Status ValidateVendorList(const std::vector<std::string>& vendors, const std::string& field) {
  if (vendors.size() > SchedulerConfig::kMaxExclusiveVendors) {
    return InvalidArgument(field + " has more than " +
                           std::to_string(SchedulerConfig::kMaxExclusiveVendors) + " vendors");
  }
  for (size_t i = 0; i < vendors.size(); ++i) {
    if (!IsVendorName(vendors[i])) {
      return InvalidArgument(field + "[" + std::to_string(i) +
                             "] must be a vendor name (1 to 32 of a-z, 0-9 and -), such as huawei");
    }
  }
  return Status::Ok();
}

nlohmann::json SchedulerConfig::ToJson() const {
  return {{"load_threshold", load_threshold},
          {"gpu_load_threshold", gpu_load_threshold},
          {"memory_threshold", memory_threshold},
          {"percentage_of_nodes_to_score", percentage_of_nodes_to_score},
          {"exclusive_gpu_vendors", exclusive_gpu_vendors}};
}

namespace {

// The parse proper; yaml-cpp throws when a node is read as what it is not
// (a mapping used as a key, say), which ParsePolicyYaml turns into an error.
Result<Policy> ParsePolicyRoot(const YAML::Node& root, const std::string& source) {
  Policy policy;
  if (!root || root.IsNull()) return policy;
  if (!root.IsMap()) return InvalidArgument(source + ": expected a mapping with a plugins: block");
  const auto where = [&](const YAML::Node& n) {
    return source + ":" + std::to_string(n.Mark().line + 1);
  };
  // A weight given under scheduler.score_weights: merged into the plugin's
  // entry once both blocks are read, so that their order does not matter.
  struct ScoreWeight {
    nlohmann::json value;
    std::string at;  // "FILE:LINE: scheduler.score_weights.NAME"
  };
  std::map<std::string, ScoreWeight> score_weights;
  std::map<std::string, std::string> weight_at;  // plugin -> "FILE:LINE: plugins.NAME.weight"
  for (const auto& top : root) {
    const std::string key = top.first.as<std::string>();
    if (key != "plugins" && key != "scheduler") {
      // Server configs carry other blocks (nodes:, listen:, ...); the policy ignores them.
      continue;
    }
    if (!top.second.IsMap()) return InvalidArgument(where(top.second) + ": " + key + " must be a mapping");
    if (key == "plugins") {
      for (const auto& p : top.second) {
        const std::string name = p.first.as<std::string>();
        if (!p.second.IsMap()) {
          return InvalidArgument(where(p.second) + ": plugins." + name + " must be a mapping");
        }
        nlohmann::json named = nlohmann::json::object();
        for (const auto& kv : p.second) {
          const std::string k = kv.first.as<std::string>();
          const std::string field = "plugins." + name + "." + k;
          nlohmann::json v = ToJson(kv.second);
          if (k == "enabled") {
            if (!v.is_boolean()) return InvalidArgument(where(kv.second) + ": " + field + " must be true or false");
          } else if (k == "weight") {
            if (!v.is_number()) return InvalidArgument(where(kv.second) + ": " + field + " must be a number");
            Status st = ValidateWeight(v.get<double>(), field);
            if (!st.ok()) return InvalidArgument(where(kv.second) + ": " + st.message());
            weight_at[name] = where(kv.second) + ": " + field;
          } else if (k == "mode") {
            if (!v.is_string()) return InvalidArgument(where(kv.second) + ": " + field + " must be a string");
          }
          named[k] = v;
        }
        policy.plugins[name] = named;
        policy.origin[name] = where(p.first) + ": plugins." + name;
      }
    } else {
      for (const auto& kv : top.second) {
        const std::string k = kv.first.as<std::string>();
        const std::string field = "scheduler." + k;
        nlohmann::json v = ToJson(kv.second);
        double* target = k == "load_threshold"       ? &policy.scheduler.load_threshold
                         : k == "gpu_load_threshold" ? &policy.scheduler.gpu_load_threshold
                         : k == "memory_threshold"   ? &policy.scheduler.memory_threshold
                                                     : nullptr;
        if (target) {
          if (!v.is_number()) return InvalidArgument(where(kv.second) + ": " + field + " must be a number");
          *target = v.get<double>();
        } else if (k == "percentage_of_nodes_to_score") {
          if (!v.is_number_integer()) {
            return InvalidArgument(where(kv.second) + ": " + field + " must be an integer");
          }
          const int64_t pct = v.get<int64_t>();
          policy.scheduler.percentage_of_nodes_to_score = int(std::clamp<int64_t>(pct, -1, 101));
        } else if (k == "exclusive_gpu_vendors") {
          if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) {
                return e.is_string();
              })) {
            return InvalidArgument(where(kv.second) + ": " + field + " must be a list of vendor names");
          }
          policy.scheduler.exclusive_gpu_vendors = v.get<std::vector<std::string>>();
        } else if (k == "score_weights") {
          if (!kv.second.IsMap()) return InvalidArgument(where(kv.second) + ": " + field + " must be a mapping");
          for (const auto& w : kv.second) {
            const std::string plugin = w.first.as<std::string>();
            const std::string wfield = field + "." + plugin;
            const nlohmann::json value = ToJson(w.second);
            if (!value.is_number()) {
              return InvalidArgument(where(w.second) + ": " + wfield + " must be a number");
            }
            Status st = ValidateWeight(value.get<double>(), wfield);
            if (!st.ok()) return InvalidArgument(where(w.second) + ": " + st.message());
            score_weights[plugin] = {value, where(w.second) + ": " + wfield};
          }
        } else {
          return InvalidArgument(where(kv.first) + ": unknown key " + field);
        }
      }
      Status st = policy.scheduler.Validate();
      if (!st.ok()) return InvalidArgument(source + ": scheduler." + st.message());
    }
  }
  // One source of truth: a score weight is the plugin's weight.
  for (auto& [plugin, w] : score_weights) {
    nlohmann::json& named = policy.plugins[plugin];
    if (named.is_null()) {
      named = nlohmann::json::object();
      policy.origin[plugin] = w.at;
    }
    if (named.contains("weight") && named["weight"].get<double>() != w.value.get<double>()) {
      return InvalidArgument(w.at + " = " + w.value.dump() + " and " + weight_at[plugin] + " = " +
                             named["weight"].dump() + " give one weight two values; keep one");
    }
    named["weight"] = w.value;
  }
  return policy;
}

}  // namespace

Result<Policy> ParsePolicyYaml(const std::string& text, const std::string& source) {
  try {
    return ParsePolicyRoot(YAML::Load(text), source);
  } catch (const YAML::BadConversion& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) +
                           ": expected a plain value (a name, number or string), found a mapping "
                           "or a list");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Result<Policy> LoadPolicyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open policy file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParsePolicyYaml(ss.str(), path);
}

Result<nlohmann::json> LoadConfigBlock(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    YAML::Node root = YAML::Load(ss.str());
    if (!root.IsMap() || !root[key]) return nlohmann::json(nullptr);
    return ToJson(root[key]);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": " + e.what());
  }
}

}  // namespace hf::framework
