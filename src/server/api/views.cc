#include "server/api/views.h"

#include "core/model_json.h"
#include "core/time.h"
#include "server/codec.h"

namespace hf::server::api {
namespace {

using nlohmann::json;

json StoredAllocationJson(const store::StoredAllocation& a) {
  json gpus = json::array();
  for (const GpuGrant& g : a.gpus) {
    gpus.push_back({{"index", g.index}, {"milli", g.milli}, {"memory_mib", g.memory_mib}});
  }
  return {{"node", a.node},
          {"cpu_milli", a.cpu_milli},
          {"memory_mib", a.memory_mib},
          {"gpus", std::move(gpus)},
          {"rdma_device", a.rdma_device.empty() ? json(nullptr) : json(a.rdma_device)}};
}

}  // namespace

json TimeOrNull(int64_t ms) { return ms ? json(FormatTimeMs(ms)) : json(nullptr); }

int64_t AllocatedMemory(int64_t milli, int64_t granted_mib, int64_t total_mib) {
  return milli >= kWholeGpuMilli ? total_mib : granted_mib;
}

json GpuMeasured(const NodeUsage* usage, int32_t index) {
  if (usage) {
    for (const GpuUsage& g : usage->gpus) {
      if (g.index == index)
        return {{"utilization", g.utilization}, {"memory_used_mib", g.memory_used_mib}};
    }
  }
  return {{"utilization", nullptr}, {"memory_used_mib", nullptr}};
}

const NodeUsage* UsageOf(const std::map<std::string, NodeUsage>& usage, const std::string& node) {
  auto it = usage.find(node);
  return it == usage.end() ? nullptr : &it->second;
}

json NodeJson(const store::NodeRecord& rec, const std::vector<store::StoredAllocation>& allocs,
              const NodeUsage* usage) {
  json j = NodeSpecToJson(rec.spec);
  j["condition"] = NodeConditionName(rec.condition);
  j["address"] = rec.address.empty() ? json(nullptr) : json(rec.address);
  int64_t cpu = 0, mem = 0, gpu_milli = 0;
  std::map<int32_t, std::pair<int64_t, int64_t>> per_gpu;  // index -> milli, memory
  json tasks = json::array();
  for (const store::StoredAllocation& a : allocs) {
    cpu += a.cpu_milli;
    mem += a.memory_mib;
    for (const GpuGrant& g : a.gpus) {
      gpu_milli += g.milli;
      per_gpu[g.index].first += g.milli;
      per_gpu[g.index].second += g.memory_mib;
    }
    tasks.push_back(a.task);
  }
  for (json& g : j["gpus"]) {
    const auto it = per_gpu.find(g["index"].get<int32_t>());
    const int64_t milli = it == per_gpu.end() ? 0 : it->second.first;
    g["allocated_milli"] = milli;
    g["allocated_memory_mib"] = AllocatedMemory(milli, it == per_gpu.end() ? 0 : it->second.second,
                                                g["memory_mib"].get<int64_t>());
    g.update(GpuMeasured(usage, g["index"].get<int32_t>()));
  }
  j["usage"] = usage ? json{{"cpu_load", usage->cpu_load},
                            {"memory_used", usage->memory_used},
                            {"reported_at", TimeOrNull(usage->reported_at_ms)}}
                     : json(nullptr);
  j["allocated"] = {{"cpu_milli", cpu}, {"memory_mib", mem}, {"gpu_milli", gpu_milli}};
  j["tasks"] = std::move(tasks);
  j["created_at"] = TimeOrNull(rec.created_at_ms);
  j["updated_at"] = TimeOrNull(rec.updated_at_ms);
  return j;
}

json TaskJson(const store::TaskRecord& r, const store::StoredAllocation* alloc) {
  json j = TaskViewJson(r.task);
  j["id"] = r.task.key;
  j["state"] = TaskStateName(r.state);
  j["node"] = r.node.empty() ? json(nullptr) : json(r.node);
  j["pending_reason"] = r.pending_reason;
  j["allocation"] = alloc ? StoredAllocationJson(*alloc) : json(nullptr);
  j["created_at"] = TimeOrNull(r.created_at_ms);
  j["updated_at"] = TimeOrNull(r.updated_at_ms);
  return j;
}

json ReservationJson(const scheduler::Scheduler::ReservationView& r) {
  json nodes = json::array();
  for (const auto& [node, members] : r.nodes)
    nodes.push_back({{"node", node}, {"members", members}});
  return {{"start", FormatTimeMs(r.start_ms)}, {"nodes", std::move(nodes)}};
}

}  // namespace hf::server::api
