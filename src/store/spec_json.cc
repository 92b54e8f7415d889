#include "store/spec_json.h"

#include <string>

namespace hf::store {
namespace {

using nlohmann::json;

// Reads j[key] into out when present; a present value of the wrong type is
// an error naming `path`. nlohmann's own messages do not name the field.
template <typename T>
Status Read(const json& j, const char* key, const std::string& path, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    return InvalidArgument(path + key + ": wrong type (" + it->type_name() + ")");
  }
  return Status::Ok();
}

Status RequireObject(const json& j, const std::string& what) {
  if (!j.is_object()) return InvalidArgument(what + " must be a JSON object");
  return Status::Ok();
}

}  // namespace

const char* TaskKindName(TaskKind kind) {
  return kind == TaskKind::kInference ? "inference" : "batch";
}

json NodeSpecToJson(const NodeSpec& s) {
  json gpus = json::array();
  for (const GpuDevice& g : s.gpus) {
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
  for (const RdmaDevice& r : s.rdma) {
    rdma.push_back({{"name", r.name}, {"numa", r.numa}, {"pcie_switch", r.pcie_switch}});
  }
  return {
      {"name", s.name},
      {"labels", s.labels},
      {"cpu_milli", s.cpu_milli},
      {"memory_mib", s.memory_mib},
      {"gpus", gpus},
      {"rdma", rdma},
      {"topology",
       {{"zone", s.topology.zone}, {"switch", s.topology.switch_name}, {"rack", s.topology.rack}}}};
}

Result<NodeSpec> NodeSpecFromJson(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "node"));
  NodeSpec s;
  HF_RETURN_IF_ERROR(Read(j, "name", "", s.name));
  HF_RETURN_IF_ERROR(Read(j, "labels", "", s.labels));
  HF_RETURN_IF_ERROR(Read(j, "cpu_milli", "", s.cpu_milli));
  HF_RETURN_IF_ERROR(Read(j, "memory_mib", "", s.memory_mib));
  if (auto it = j.find("gpus"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("gpus must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& gj = (*it)[i];
      std::string path = "gpus[" + std::to_string(i) + "].";
      HF_RETURN_IF_ERROR(RequireObject(gj, "gpus[" + std::to_string(i) + "]"));
      GpuDevice g;
      HF_RETURN_IF_ERROR(Read(gj, "index", path, g.index));
      HF_RETURN_IF_ERROR(Read(gj, "uuid", path, g.uuid));
      HF_RETURN_IF_ERROR(Read(gj, "model", path, g.model));
      HF_RETURN_IF_ERROR(Read(gj, "vendor", path, g.vendor));
      HF_RETURN_IF_ERROR(Read(gj, "memory_mib", path, g.memory_mib));
      HF_RETURN_IF_ERROR(Read(gj, "numa", path, g.numa));
      HF_RETURN_IF_ERROR(Read(gj, "pcie_switch", path, g.pcie_switch));
      HF_RETURN_IF_ERROR(Read(gj, "nvlink_domain", path, g.nvlink_domain));
      s.gpus.push_back(std::move(g));
    }
  }
  if (auto it = j.find("rdma"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("rdma must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& rj = (*it)[i];
      std::string path = "rdma[" + std::to_string(i) + "].";
      HF_RETURN_IF_ERROR(RequireObject(rj, "rdma[" + std::to_string(i) + "]"));
      RdmaDevice r;
      HF_RETURN_IF_ERROR(Read(rj, "name", path, r.name));
      HF_RETURN_IF_ERROR(Read(rj, "numa", path, r.numa));
      HF_RETURN_IF_ERROR(Read(rj, "pcie_switch", path, r.pcie_switch));
      s.rdma.push_back(std::move(r));
    }
  }
  if (auto it = j.find("topology"); it != j.end() && !it->is_null()) {
    HF_RETURN_IF_ERROR(RequireObject(*it, "topology"));
    HF_RETURN_IF_ERROR(Read(*it, "zone", "topology.", s.topology.zone));
    HF_RETURN_IF_ERROR(Read(*it, "switch", "topology.", s.topology.switch_name));
    HF_RETURN_IF_ERROR(Read(*it, "rack", "topology.", s.topology.rack));
  }
  return s;
}

json TaskToJson(const Task& t) {
  const Requests& r = t.requests;
  return {{"name", t.name},
          {"group", t.group},
          {"priority", t.priority},
          {"kind", TaskKindName(t.kind)},
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

Result<Task> TaskFromJson(const json& j) {
  HF_RETURN_IF_ERROR(RequireObject(j, "task"));
  Task t;
  HF_RETURN_IF_ERROR(Read(j, "name", "", t.name));
  HF_RETURN_IF_ERROR(Read(j, "group", "", t.group));
  HF_RETURN_IF_ERROR(Read(j, "priority", "", t.priority));
  std::string kind = TaskKindName(t.kind);
  HF_RETURN_IF_ERROR(Read(j, "kind", "", kind));
  if (kind == "batch") {
    t.kind = TaskKind::kBatch;
  } else if (kind == "inference") {
    t.kind = TaskKind::kInference;
  } else {
    return InvalidArgument("kind must be \"batch\" or \"inference\", not \"" + kind + "\"");
  }
  if (auto it = j.find("requests"); it != j.end() && !it->is_null()) {
    HF_RETURN_IF_ERROR(RequireObject(*it, "requests"));
    Requests& r = t.requests;
    HF_RETURN_IF_ERROR(Read(*it, "cpu_milli", "requests.", r.cpu_milli));
    HF_RETURN_IF_ERROR(Read(*it, "memory_mib", "requests.", r.memory_mib));
    HF_RETURN_IF_ERROR(Read(*it, "gpu", "requests.", r.gpu));
    HF_RETURN_IF_ERROR(Read(*it, "gpu_milli", "requests.", r.gpu_milli));
    HF_RETURN_IF_ERROR(Read(*it, "gpu_memory_mib", "requests.", r.gpu_memory_mib));
    HF_RETURN_IF_ERROR(Read(*it, "gpu_models", "requests.", r.gpu_models));
  }
  HF_RETURN_IF_ERROR(Read(j, "rdma_required", "", t.rdma_required));
  HF_RETURN_IF_ERROR(Read(j, "depends_on", "", t.depends_on));
  HF_RETURN_IF_ERROR(Read(j, "preemptible", "", t.preemptible));
  HF_RETURN_IF_ERROR(Read(j, "command", "", t.command));
  HF_RETURN_IF_ERROR(Read(j, "env", "", t.env));
  return t;
}

}  // namespace hf::store
