// The JSON of nodes, tasks and GPUs that several api/ classes answer with
// (docs/API.md): one shape, written once.
#ifndef HF_SERVER_API_VIEWS_H_
#define HF_SERVER_API_VIEWS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"
#include "scheduler/scheduler.h"
#include "store/store.h"

namespace hf::server::api {

// An RFC 3339 time, or null for 0 (never).
nlohmann::json TimeOrNull(int64_t ms);

// GPU memory held on one GPU: what its grants asked for, or all of it when
// a task holds the GPU whole (a whole GPU comes with all its memory, asked
// for or not).
int64_t AllocatedMemory(int64_t milli, int64_t granted_mib, int64_t total_mib);

// What an agent measured on a GPU: {"utilization", "memory_used_mib"}, null
// members when nothing was measured.
nlohmann::json GpuMeasured(const NodeUsage* usage, int32_t index);

// The node's entry in Scheduler::MeasuredUsage(), or null.
const NodeUsage* UsageOf(const std::map<std::string, NodeUsage>& usage, const std::string& node);

// A node: its inventory plus condition, what is allocated on it (per GPU),
// and what its agent last measured (`usage`: null without an agent).
nlohmann::json NodeJson(const store::NodeRecord& rec,
                        const std::vector<store::StoredAllocation>& allocs, const NodeUsage* usage);

// A task as the API shows it; `alloc`: its allocation, or null when it
// holds none.
nlohmann::json TaskJson(const store::TaskRecord& r, const store::StoredAllocation* alloc = nullptr);
// Backfill's reservation (docs/QUEUES.md): {"start", "nodes": [{"node",
// "members"}]}, for the task or job it holds room for.
nlohmann::json ReservationJson(const scheduler::Scheduler::ReservationView& r);

}  // namespace hf::server::api

#endif  // HF_SERVER_API_VIEWS_H_
