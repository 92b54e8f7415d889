#include "server/codec.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <utility>

namespace hf::server {
namespace {

using nlohmann::json;

// nlohmann quotes the offending token in its messages; a hostile body can make
// that token megabytes long, and error messages end up in logs.
constexpr size_t kMaxEchoedMessage = 200;

// Thrown from the parser callback: the only way to stop nlohmann's parser
// early, before it has built a deep or duplicate-laden document.
struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

std::string Truncate(std::string s) {
  if (s.size() > kMaxEchoedMessage) {
    s.resize(kMaxEchoedMessage);
    s += "...";
  }
  return s;
}

std::string Field(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const char* TypeName(const json& v) { return v.type_name(); }

Status RequireObject(const json& v, const std::string& path) {
  if (v.is_object()) return Status::Ok();
  return InvalidArgument(path + " must be an object, got " + TypeName(v));
}

// Refuses any key of `obj` not in `allowed`, naming it by its full path.
Status CheckKeys(const json& obj, const std::string& prefix,
                 std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) return InvalidArgument("unknown field \"" + Truncate(Field(prefix, key)) + "\"");
  }
  return Status::Ok();
}

// Reads an integer of type T in [lo, hi]. Accepts floats with an integral
// value because JavaScript clients cannot tell 2 from 2.0.
template <typename T>
Status ReadInt(const json& v, const std::string& path, T lo, T hi, T& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return InvalidArgument(path + " must be <= " + std::to_string(hi));
    }
    out = static_cast<T>(u);
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < static_cast<int64_t>(lo)) {
      return InvalidArgument(path + " must be >= " + std::to_string(lo));
    }
    if (i > static_cast<int64_t>(hi)) {
      return InvalidArgument(path + " must be <= " + std::to_string(hi));
    }
    out = static_cast<T>(i);
    return Status::Ok();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      return InvalidArgument(path + " must be an integer");
    }
    if (d < static_cast<double>(lo)) {
      return InvalidArgument(path + " must be >= " + std::to_string(lo));
    }
    // hi + 1 is exact for int32 and rounds to 2^63 for int64, so this bound
    // refuses exactly the values a cast to T could not hold.
    if (d >= static_cast<double>(hi) + 1.0) {
      return InvalidArgument(path + " must be <= " + std::to_string(hi));
    }
    out = static_cast<T>(d);
    return Status::Ok();
  }
  return InvalidArgument(path + " must be an integer, got " + TypeName(v));
}

template <typename T>
Status ReadQuantity(const json& v, const std::string& path, T& out) {
  return ReadInt<T>(v, path, 0, std::numeric_limits<T>::max(), out);
}

Status ReadLocality(const json& v, const std::string& path, int32_t& out) {
  return ReadInt<int32_t>(v, path, -1, std::numeric_limits<int32_t>::max(), out);
}

Status ReadBool(const json& v, const std::string& path, bool& out) {
  if (!v.is_boolean()) return InvalidArgument(path + " must be a boolean, got " + TypeName(v));
  out = v.get<bool>();
  return Status::Ok();
}

Status ReadString(const json& v, const std::string& path, std::string& out) {
  if (!v.is_string()) return InvalidArgument(path + " must be a string, got " + TypeName(v));
  out = v.get<std::string>();
  return Status::Ok();
}

Status ReadNonEmptyString(const json& v, const std::string& path, std::string& out) {
  HF_RETURN_IF_ERROR(ReadString(v, path, out));
  if (out.empty()) return InvalidArgument(path + " must not be empty");
  return Status::Ok();
}

Status CheckName(const std::string& name, const std::string& path) {
  if (IsValidName(name)) return Status::Ok();
  return InvalidArgument(path +
                         " must be 1 to 253 characters of a-z, 0-9, '.', '_' or '-', "
                         "starting and ending with a letter or digit");
}

Status ReadName(const json& v, const std::string& path, std::string& out) {
  HF_RETURN_IF_ERROR(ReadString(v, path, out));
  return CheckName(out, path);
}

// A list of strings; `names` applies the naming rule to each element.
Status ReadStringList(const json& v, const std::string& path, bool names,
                      std::vector<std::string>& out) {
  if (!v.is_array()) {
    return InvalidArgument(path + " must be an array of strings, got " + TypeName(v));
  }
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string s;
    if (names) {
      HF_RETURN_IF_ERROR(ReadName(v[i], Index(path, i), s));
    } else {
      HF_RETURN_IF_ERROR(ReadNonEmptyString(v[i], Index(path, i), s));
    }
    out.push_back(std::move(s));
  }
  return Status::Ok();
}

Status ReadStringMap(const json& v, const std::string& path,
                     std::map<std::string, std::string>& out) {
  if (!v.is_object()) {
    return InvalidArgument(path + " must be an object of strings, got " + TypeName(v));
  }
  out.clear();
  for (const auto& [key, value] : v.items()) {
    if (key.empty()) return InvalidArgument(path + " must not have an empty key");
    std::string s;
    HF_RETURN_IF_ERROR(ReadString(value, Field(path, Truncate(key)), s));
    out.emplace(key, std::move(s));
  }
  return Status::Ok();
}

// Prefixes an error from a validator that does not know the element path
// (Requests::Validate says "requests.gpu_milli ...").
Status Prefixed(Status s, const std::string& prefix) {
  if (s.ok() || prefix.empty()) return s;
  return Status(s.code(), prefix + "." + s.message());
}

Status ParseRequests(const json& j, const std::string& path, Requests& r) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, path, {"cpu_milli", "memory_mib", "gpu", "gpu_milli", "gpu_memory_mib", "gpu_models"}));
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "cpu_milli") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, r.cpu_milli));
    } else if (key == "memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, r.memory_mib));
    } else if (key == "gpu") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, r.gpu));
    } else if (key == "gpu_milli") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, r.gpu_milli));
    } else if (key == "gpu_memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, r.gpu_memory_mib));
    } else if (key == "gpu_models") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, r.gpu_models));
    }
  }
  return Status::Ok();
}

// `prefix` is "" for a single submission and "tasks[i]" inside a batch.
Result<Task> ParseTaskAt(const json& j, const std::string& prefix) {
  if (!j.is_object()) {
    return InvalidArgument((prefix.empty() ? std::string("task") : prefix) +
                           " must be an object, got " + TypeName(j));
  }
  HF_RETURN_IF_ERROR(CheckKeys(j, prefix,
                               {"name", "group", "priority", "kind", "requests", "rdma_required",
                                "depends_on", "preemptible", "command", "env"}));
  Task t;
  if (!j.contains("name")) return InvalidArgument(Field(prefix, "name") + " is required");
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(prefix, key);
    if (key == "name") {
      HF_RETURN_IF_ERROR(ReadName(v, f, t.name));
    } else if (key == "group") {
      HF_RETURN_IF_ERROR(ReadString(v, f, t.group));
      // An empty group means "not part of a distributed job".
      if (!t.group.empty()) HF_RETURN_IF_ERROR(CheckName(t.group, f));
    } else if (key == "priority") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, f, std::numeric_limits<int32_t>::min(),
                                          std::numeric_limits<int32_t>::max(), t.priority));
    } else if (key == "kind") {
      std::string kind;
      HF_RETURN_IF_ERROR(ReadString(v, f, kind));
      if (kind == "batch") {
        t.kind = TaskKind::kBatch;
      } else if (kind == "inference") {
        t.kind = TaskKind::kInference;
      } else {
        return InvalidArgument(f + " must be \"batch\" or \"inference\"");
      }
    } else if (key == "requests") {
      HF_RETURN_IF_ERROR(ParseRequests(v, f, t.requests));
    } else if (key == "rdma_required") {
      HF_RETURN_IF_ERROR(ReadBool(v, f, t.rdma_required));
    } else if (key == "depends_on") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, true, t.depends_on));
    } else if (key == "preemptible") {
      HF_RETURN_IF_ERROR(ReadBool(v, f, t.preemptible));
    } else if (key == "command") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, t.command));
    } else if (key == "env") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, f, t.env));
    }
  }
  HF_RETURN_IF_ERROR(Prefixed(t.requests.Validate(), prefix));
  return t;
}

Status ParseGpu(const json& j, const std::string& path, GpuDevice& g) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, path,
      {"index", "uuid", "model", "vendor", "memory_mib", "numa", "pcie_switch", "nvlink_domain"}));
  if (!j.contains("index")) return InvalidArgument(Field(path, "index") + " is required");
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "index") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, g.index));
    } else if (key == "uuid") {
      HF_RETURN_IF_ERROR(ReadString(v, f, g.uuid));
    } else if (key == "model") {
      HF_RETURN_IF_ERROR(ReadString(v, f, g.model));
    } else if (key == "vendor") {
      HF_RETURN_IF_ERROR(ReadString(v, f, g.vendor));
    } else if (key == "memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, g.memory_mib));
    } else if (key == "numa") {
      HF_RETURN_IF_ERROR(ReadLocality(v, f, g.numa));
    } else if (key == "pcie_switch") {
      HF_RETURN_IF_ERROR(ReadLocality(v, f, g.pcie_switch));
    } else if (key == "nvlink_domain") {
      HF_RETURN_IF_ERROR(ReadLocality(v, f, g.nvlink_domain));
    }
  }
  return Status::Ok();
}

Status ParseRdma(const json& j, const std::string& path, RdmaDevice& r) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(j, path, {"name", "numa", "pcie_switch"}));
  if (!j.contains("name")) return InvalidArgument(Field(path, "name") + " is required");
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "name") {
      HF_RETURN_IF_ERROR(ReadNonEmptyString(v, f, r.name));
    } else if (key == "numa") {
      HF_RETURN_IF_ERROR(ReadLocality(v, f, r.numa));
    } else if (key == "pcie_switch") {
      HF_RETURN_IF_ERROR(ReadLocality(v, f, r.pcie_switch));
    }
  }
  return Status::Ok();
}

Status ParseTopology(const json& j, const std::string& path, TopologyPosition& t) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(j, path, {"zone", "switch", "rack"}));
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "zone") {
      HF_RETURN_IF_ERROR(ReadString(v, f, t.zone));
    } else if (key == "switch") {
      HF_RETURN_IF_ERROR(ReadString(v, f, t.switch_name));
    } else if (key == "rack") {
      HF_RETURN_IF_ERROR(ReadString(v, f, t.rack));
    }
  }
  return Status::Ok();
}

// Weights are doubles in the framework; written as integers when whole so the
// response reads as the vision shows it (`"weight": 1`).
json WeightJson(double w) {
  if (std::isfinite(w) && w == std::floor(w) && std::fabs(w) < 9.0e15) {
    return static_cast<int64_t>(w);
  }
  return w;
}

Status ReadWeight(const json& v, const std::string& path, double& out) {
  if (!v.is_number()) return InvalidArgument(path + " must be a number, got " + TypeName(v));
  out = v.get<double>();
  return framework::ValidateWeight(out, path);
}

Status ReadThreshold(const json& v, const std::string& path, std::optional<double>& out) {
  if (!v.is_number()) return InvalidArgument(path + " must be a number, got " + TypeName(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0 || d > 1) {
    return InvalidArgument(path + " must be a number in (0, 1]");
  }
  out = d;
  return Status::Ok();
}

std::string PrimaryPoint(uint32_t points) {
  if (points & framework::kScorePoint) return "Score";
  for (uint32_t bit : {framework::kFilterPoint, framework::kPostFilterPoint,
                       framework::kPreScorePoint, framework::kBindPoint}) {
    if (points & bit) return framework::ExtensionPointNames(bit);
  }
  return "";
}

}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return alnum(name.front()) && alnum(name.back());
}

Result<json> ParseJsonBody(std::string_view body, int max_depth) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgument("request body is empty; expected a JSON object");
  }
  // One set of keys per open object, to refuse duplicates.
  std::vector<std::set<std::string>> open_objects;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        // `depth` counts the containers around this one: 0 for the top level.
        if (depth >= max_depth) throw TooDeep{};
        open_objects.emplace_back();
        break;
      case json::parse_event_t::array_start:
        if (depth >= max_depth) throw TooDeep{};
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          throw DuplicateKey{parsed.get<std::string>()};
        }
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(body.begin(), body.end(), callback);
  } catch (const TooDeep&) {
    return InvalidArgument("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  } catch (const DuplicateKey& d) {
    return InvalidArgument("duplicate key \"" + Truncate(d.key) + "\" in JSON object");
  } catch (const json::parse_error& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; users need
    // only the part after it.
    std::string what = e.what();
    size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgument("malformed JSON at byte " + std::to_string(e.byte) + ": " +
                           Truncate(what));
  } catch (const json::exception& e) {
    // Numbers out of double range (1e400) land here.
    std::string what = e.what();
    size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgument("malformed JSON: " + Truncate(what));
  }
  if (!doc.is_object()) {
    return InvalidArgument(std::string("request body must be a JSON object, got ") + TypeName(doc));
  }
  return doc;
}

Result<Task> ParseTaskSubmission(const json& j) { return ParseTaskAt(j, ""); }

Result<std::vector<Task>> ParseTaskBatch(const json& j) {
  if (!j.is_object()) {
    return InvalidArgument(std::string("batch must be an object, got ") + TypeName(j));
  }
  HF_RETURN_IF_ERROR(CheckKeys(j, "", {"tasks"}));
  auto it = j.find("tasks");
  if (it == j.end()) return InvalidArgument("tasks is required");
  if (!it->is_array()) {
    return InvalidArgument(std::string("tasks must be an array, got ") + TypeName(*it));
  }
  if (it->empty()) return InvalidArgument("tasks must not be empty");
  if (it->size() > kMaxTaskBatch) {
    return InvalidArgument("tasks holds " + std::to_string(it->size()) + " tasks; at most " +
                           std::to_string(kMaxTaskBatch) + " per batch");
  }
  std::vector<Task> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    Result<Task> t = ParseTaskAt((*it)[i], Index("tasks", i));
    if (!t.ok()) return t.status();
    out.push_back(std::move(t).value());
  }
  return out;
}

json TaskToJson(const Task& t) {
  const Requests& r = t.requests;
  return {{"name", t.name},
          {"group", t.group},
          {"priority", t.priority},
          {"kind", t.kind == TaskKind::kInference ? "inference" : "batch"},
          {"requests",
           {{"cpu_milli", r.cpu_milli},
            {"memory_mib", r.memory_mib},
            {"gpu", r.gpu},
            {"gpu_milli", r.gpu_milli},
            {"gpu_memory_mib", r.gpu_memory_mib},
            {"gpu_models", r.gpu_models}}},
          {"rdma_required", t.rdma_required},
          {"depends_on", t.depends_on},
          {"preemptible", t.preemptible},
          {"command", t.command},
          {"env", t.env}};
}

Result<NodeSpec> ParseNodeSpec(const json& j) {
  if (!j.is_object())
    return InvalidArgument(std::string("node must be an object, got ") + TypeName(j));
  if (j.contains("usage_file")) {
    return InvalidArgument(
        "usage_file is only allowed for nodes declared in a file, not over the API");
  }
  HF_RETURN_IF_ERROR(
      CheckKeys(j, "", {"name", "labels", "cpu_milli", "memory_mib", "gpus", "rdma", "topology"}));
  if (!j.contains("name")) return InvalidArgument("name is required");
  NodeSpec n;
  for (const auto& [key, v] : j.items()) {
    if (key == "name") {
      HF_RETURN_IF_ERROR(ReadName(v, key, n.name));
    } else if (key == "labels") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, key, n.labels));
    } else if (key == "cpu_milli") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, key, n.cpu_milli));
    } else if (key == "memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, key, n.memory_mib));
    } else if (key == "gpus") {
      if (!v.is_array())
        return InvalidArgument("gpus must be an array, got " + std::string(TypeName(v)));
      for (size_t i = 0; i < v.size(); ++i) {
        GpuDevice g;
        HF_RETURN_IF_ERROR(ParseGpu(v[i], Index("gpus", i), g));
        n.gpus.push_back(std::move(g));
      }
    } else if (key == "rdma") {
      if (!v.is_array())
        return InvalidArgument("rdma must be an array, got " + std::string(TypeName(v)));
      for (size_t i = 0; i < v.size(); ++i) {
        RdmaDevice r;
        HF_RETURN_IF_ERROR(ParseRdma(v[i], Index("rdma", i), r));
        n.rdma.push_back(std::move(r));
      }
    } else if (key == "topology") {
      HF_RETURN_IF_ERROR(ParseTopology(v, key, n.topology));
    }
  }
  HF_RETURN_IF_ERROR(n.Validate());
  return n;
}

json NodeSpecToJson(const NodeSpec& n) {
  json gpus = json::array();
  for (const GpuDevice& g : n.gpus) {
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"vendor", g.vendor},
                    {"memory_mib", g.memory_mib},
                    {"numa", g.numa},
                    {"pcie_switch", g.pcie_switch},
                    {"nvlink_domain", g.nvlink_domain}});
  }
  json rdma = json::array();
  for (const RdmaDevice& r : n.rdma) {
    rdma.push_back({{"name", r.name}, {"numa", r.numa}, {"pcie_switch", r.pcie_switch}});
  }
  return {
      {"name", n.name},
      {"labels", n.labels},
      {"cpu_milli", n.cpu_milli},
      {"memory_mib", n.memory_mib},
      {"gpus", std::move(gpus)},
      {"rdma", std::move(rdma)},
      {"topology",
       {{"zone", n.topology.zone}, {"switch", n.topology.switch_name}, {"rack", n.topology.rack}}}};
}

json AllocationToJson(const Allocation& a, std::string_view node_name) {
  json gpus = json::array();
  for (const GpuGrant& g : a.gpus) {
    gpus.push_back({{"index", g.index}, {"milli", g.milli}, {"memory_mib", g.memory_mib}});
  }
  return {{"node", std::string(node_name)},
          {"cpu_milli", a.cpu_milli},
          {"memory_mib", a.memory_mib},
          {"gpus", std::move(gpus)},
          {"rdma_device", a.rdma_device}};
}

json PluginInfoToJson(const framework::PluginInfo& p) {
  json out = {{"name", p.name},
              {"type", PrimaryPoint(p.points)},
              {"enabled", p.settings.enabled},
              {"weight", WeightJson(p.settings.weight)},
              {"status", framework::PluginStatusName(p.status)},
              {"config", p.settings.config.is_object() ? p.settings.config : json::object()},
              {"extension_points", framework::ExtensionPointNames(p.points)},
              {"required", p.required}};
  if (!p.modes.empty()) {
    out["mode"] = p.settings.mode;
    out["modes"] = p.modes;
  }
  if (!p.message.empty()) out["message"] = p.message;
  return out;
}

Result<framework::PluginPatch> ParsePluginPatch(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "plugin update"));
  HF_RETURN_IF_ERROR(CheckKeys(j, "", {"enabled", "weight", "mode", "config"}));
  framework::PluginPatch patch;
  for (const auto& [key, v] : j.items()) {
    if (key == "enabled") {
      bool b = false;
      HF_RETURN_IF_ERROR(ReadBool(v, key, b));
      patch.enabled = b;
    } else if (key == "weight") {
      double w = 0;
      HF_RETURN_IF_ERROR(ReadWeight(v, key, w));
      patch.weight = w;
    } else if (key == "mode") {
      std::string m;
      HF_RETURN_IF_ERROR(ReadString(v, key, m));
      patch.mode = std::move(m);
    } else if (key == "config") {
      HF_RETURN_IF_ERROR(RequireObject(v, key));
      patch.config = v;
    }
  }
  return patch;
}

framework::SchedulerConfig SchedulerConfigPatch::ApplyTo(framework::SchedulerConfig base) const {
  if (load_threshold) base.load_threshold = *load_threshold;
  if (gpu_load_threshold) base.gpu_load_threshold = *gpu_load_threshold;
  if (memory_threshold) base.memory_threshold = *memory_threshold;
  return base;
}

json SchedulerConfigToJson(const framework::SchedulerConfig& c,
                           const std::map<std::string, double>& score_weights) {
  json weights = json::object();
  for (const auto& [name, w] : score_weights) weights[name] = WeightJson(w);
  return {{"load_threshold", c.load_threshold},
          {"gpu_load_threshold", c.gpu_load_threshold},
          {"memory_threshold", c.memory_threshold},
          {"score_weights", std::move(weights)}};
}

Result<SchedulerConfigPatch> ParseSchedulerConfigPatch(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "scheduler config update"));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, "", {"load_threshold", "gpu_load_threshold", "memory_threshold", "score_weights"}));
  SchedulerConfigPatch patch;
  for (const auto& [key, v] : j.items()) {
    if (key == "load_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.load_threshold));
    } else if (key == "gpu_load_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.gpu_load_threshold));
    } else if (key == "memory_threshold") {
      HF_RETURN_IF_ERROR(ReadThreshold(v, key, patch.memory_threshold));
    } else if (key == "score_weights") {
      HF_RETURN_IF_ERROR(RequireObject(v, key));
      std::map<std::string, double> weights;
      for (const auto& [plugin, w] : v.items()) {
        double d = 0;
        HF_RETURN_IF_ERROR(ReadWeight(w, Field(key, Truncate(plugin)), d));
        weights[plugin] = d;
      }
      patch.score_weights = std::move(weights);
    }
  }
  return patch;
}

std::string StatusCodeToApiCode(StatusCode code) { return StatusCodeName(code); }

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 422;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

json ErrorBody(const Status& s) {
  return {{"error", {{"code", StatusCodeToApiCode(s.code())}, {"message", s.message()}}}};
}

}  // namespace hf::server
