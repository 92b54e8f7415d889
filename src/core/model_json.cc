#include "core/model_json.h"

#include "core/json_fields.h"

namespace hf {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers are this file's vocabulary

Status ParseRequests(const json& j, const std::string& path, Requests& r) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, path,
      {"cpu_milli", "memory_mib", "gpu", "gpu_milli", "gpu_memory_mib", "gpu_models", "gpu_vendors"}));
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
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, kMaxGpuModels, r.gpu_models));
    } else if (key == "gpu_vendors") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, kMaxGpuVendors, r.gpu_vendors));
    }
  }
  return Status::Ok();
}

json RequestsToJson(const Requests& r) {
  return {{"cpu_milli", r.cpu_milli},     {"memory_mib", r.memory_mib},
          {"gpu", r.gpu},                 {"gpu_milli", r.gpu_milli},
          {"gpu_memory_mib", r.gpu_memory_mib}, {"gpu_models", r.gpu_models},
          {"gpu_vendors", r.gpu_vendors}};
}

namespace {

Status ParseGpu(const json& j, const std::string& path, GpuDevice& g) {
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(
      j, path,
      {"index", "uuid", "model", "vendor", "memory_mib", "numa", "pcie_switch", "fabric_domain",
       "nvlink_domain"}));
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
    } else if (key == "fabric_domain" || key == "nvlink_domain") {
      // nvlink_domain: the name of earlier versions, still read (both given:
      // fabric_domain wins).
      if (key == "nvlink_domain" && j.contains("fabric_domain")) continue;
      HF_RETURN_IF_ERROR(ReadLocality(v, f, g.fabric_domain));
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

}  // namespace

// `prefix` is "" for a single submission and "tasks[i]" inside a batch.
namespace {

Status ParseJobMember(const json& v, const std::string& path, JobMember& m) {
  if (!v.is_object()) return InvalidArgument(path + " must be an object, got " + TypeName(v));
  HF_RETURN_IF_ERROR(
      CheckKeys(v, path, {"id", "name", "role", "rank", "world_size", "min_available"}));
  for (const auto& [key, f] : v.items()) {
    const std::string p = Field(path, key);
    if (key == "id") {
      int64_t id = 0;
      HF_RETURN_IF_ERROR(ReadInt<int64_t>(f, p, 1, std::numeric_limits<int64_t>::max(), id));
      m.id = static_cast<uint64_t>(id);
    } else if (key == "name") {
      HF_RETURN_IF_ERROR(ReadName(f, p, m.name));
    } else if (key == "role") {
      HF_RETURN_IF_ERROR(ReadName(f, p, m.role));
    } else if (key == "rank") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(f, p, 0, kMaxJobMembers - 1, m.rank));
    } else if (key == "world_size") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(f, p, 1, kMaxJobMembers, m.world_size));
    } else if (key == "min_available") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(f, p, 1, kMaxJobMembers, m.min_available));
    }
  }
  if (m.id == 0 || m.world_size == 0 || m.rank >= m.world_size || m.min_available == 0 ||
      m.min_available > m.world_size) {
    return InvalidArgument(path + " must hold id, rank < world_size and 1 <= min_available <= "
                                  "world_size");
  }
  return Status::Ok();
}

}  // namespace

json JobMemberToJson(const JobMember& m) {
  return {{"id", m.id},          {"name", m.name},
          {"role", m.role},      {"rank", m.rank},
          {"world_size", m.world_size}, {"min_available", m.min_available}};
}

Result<Task> TaskFromJson(const json& j, const std::string& prefix) {
  if (!j.is_object()) {
    return InvalidArgument((prefix.empty() ? std::string("task") : prefix) +
                           " must be an object, got " + TypeName(j));
  }
  HF_RETURN_IF_ERROR(CheckKeys(j, prefix,
                               {"name", "group", "group_placement", "priority", "kind", "requests",
                                "rdma_required", "depends_on", "preemptible",
                                "requeue_on_node_loss", "command", "env", "secret_env",
                                "time_limit_s", "queue", "job"}));
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
    } else if (key == "group_placement") {
      std::string placement;
      HF_RETURN_IF_ERROR(ReadString(v, f, placement));
      std::optional<GroupPlacement> p = ParseGroupPlacement(placement);
      if (!p) return InvalidArgument(f + " must be \"pack\" or \"spread\"");
      t.group_placement = *p;
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
      HF_RETURN_IF_ERROR(ReadStringList(v, f, true, kMaxDependsOn, t.depends_on));
    } else if (key == "preemptible") {
      HF_RETURN_IF_ERROR(ReadBool(v, f, t.preemptible));
    } else if (key == "requeue_on_node_loss") {
      HF_RETURN_IF_ERROR(ReadBool(v, f, t.requeue_on_node_loss));
    } else if (key == "command") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, kMaxCommandArgs, t.command));
    } else if (key == "env") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, f, kMaxEnv, t.env));
    } else if (key == "secret_env") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, f, kMaxEnv, t.secret_env));
    } else if (key == "time_limit_s") {
      HF_RETURN_IF_ERROR(ReadInt<int64_t>(v, f, 0, kMaxTimeLimitS, t.time_limit_s));
    } else if (key == "queue") {
      HF_RETURN_IF_ERROR(ReadName(v, f, t.queue));
    } else if (key == "job") {
      if (!v.is_null()) HF_RETURN_IF_ERROR(ParseJobMember(v, f, t.job));
    }
  }
  for (const auto& [name, value] : t.secret_env) {
    if (t.env.count(name)) {
      return InvalidArgument(Field(prefix, "secret_env") + "." + Truncate(name) +
                             " is also in env: give a variable once");
    }
  }
  HF_RETURN_IF_ERROR(Prefixed(t.requests.Validate(), prefix));
  return t;
}

const char* TaskKindName(TaskKind kind) { return kind == TaskKind::kInference ? "inference" : "batch"; }

json TaskToJson(const Task& t) {
  json j = {{"name", t.name},
          {"group", t.group},
          {"group_placement", GroupPlacementName(t.group_placement)},
          {"priority", t.priority},
          {"kind", TaskKindName(t.kind)},
          {"requests", RequestsToJson(t.requests)},
          {"rdma_required", t.rdma_required},
          {"depends_on", t.depends_on},
          {"preemptible", t.preemptible},
          {"requeue_on_node_loss", t.requeue_on_node_loss},
          {"command", t.command},
          {"env", t.env},
          {"secret_env", t.secret_env},
          {"queue", t.queue}};
  if (t.time_limit_s > 0) j["time_limit_s"] = t.time_limit_s;
  if (t.job.id != 0) j["job"] = JobMemberToJson(t.job);
  return j;
}

json TaskViewJson(const Task& t) {
  json j = TaskToJson(t);
  json names = json::array();
  for (const auto& [name, value] : t.secret_env) names.push_back(name);
  j["secret_env"] = std::move(names);
  return j;
}

Result<NodeSpec> NodeSpecFromJson(const json& j) {
  if (!j.is_object())
    return InvalidArgument(std::string("node must be an object, got ") + TypeName(j));
  HF_RETURN_IF_ERROR(
      CheckKeys(j, "", {"name", "labels", "cpu_milli", "memory_mib", "gpus", "rdma", "topology"}));
  if (!j.contains("name")) return InvalidArgument("name is required");
  NodeSpec n;
  for (const auto& [key, v] : j.items()) {
    if (key == "name") {
      HF_RETURN_IF_ERROR(ReadName(v, key, n.name));
    } else if (key == "labels") {
      HF_RETURN_IF_ERROR(ReadStringMap(v, key, kMaxLabels, n.labels));
    } else if (key == "cpu_milli") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, key, n.cpu_milli));
    } else if (key == "memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, key, n.memory_mib));
    } else if (key == "gpus") {
      if (!v.is_array())
        return InvalidArgument("gpus must be an array, got " + std::string(TypeName(v)));
      HF_RETURN_IF_ERROR(CheckCount(v.size(), "gpus", kMaxGpusPerNode));
      for (size_t i = 0; i < v.size(); ++i) {
        GpuDevice g;
        HF_RETURN_IF_ERROR(ParseGpu(v[i], Index("gpus", i), g));
        n.gpus.push_back(std::move(g));
      }
    } else if (key == "rdma") {
      if (!v.is_array())
        return InvalidArgument("rdma must be an array, got " + std::string(TypeName(v)));
      HF_RETURN_IF_ERROR(CheckCount(v.size(), "rdma", kMaxNicsPerNode));
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
                    {"fabric_domain", g.fabric_domain}});
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

}  // namespace hf
