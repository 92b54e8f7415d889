#include "core/model.h"

#include <algorithm>
#include <set>

namespace hf {

const char* NodeConditionName(NodeCondition c) {
  switch (c) {
    case NodeCondition::kReady: return "Ready";
    case NodeCondition::kNotReady: return "NotReady";
    case NodeCondition::kDraining: return "Draining";
  }
  return "Unknown";
}

const char* TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kPending: return "pending";
    case TaskState::kScheduled: return "scheduled";
    case TaskState::kRunning: return "running";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::optional<TaskState> ParseTaskState(const std::string& s) {
  for (TaskState t : {TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
                      TaskState::kSucceeded, TaskState::kFailed, TaskState::kCancelled}) {
    if (s == TaskStateName(t)) return t;
  }
  return std::nullopt;
}

const char* GroupPlacementName(GroupPlacement p) {
  return p == GroupPlacement::kSpread ? "spread" : "pack";
}

std::optional<GroupPlacement> ParseGroupPlacement(const std::string& s) {
  for (GroupPlacement p : {GroupPlacement::kPack, GroupPlacement::kSpread}) {
    if (s == GroupPlacementName(p)) return p;
  }
  return std::nullopt;
}

Status NodeSpec::Validate() const {
  if (name.empty()) return InvalidArgument("node name must not be empty");
  if (cpu_milli < 0) return InvalidArgument("node " + name + ": cpu_milli must be >= 0");
  if (memory_mib < 0) return InvalidArgument("node " + name + ": memory_mib must be >= 0");
  std::set<int32_t> seen;
  for (const GpuDevice& g : gpus) {
    if (g.index < 0) return InvalidArgument("node " + name + ": GPU index must be >= 0");
    if (!seen.insert(g.index).second) {
      return InvalidArgument("node " + name + ": duplicate GPU index " + std::to_string(g.index));
    }
    if (g.memory_mib < 0) {
      return InvalidArgument("node " + name + ": GPU " + std::to_string(g.index) +
                             " memory_mib must be >= 0");
    }
    if (!g.vendor.empty() && !IsVendorName(g.vendor)) {
      return InvalidArgument("node " + name + ": GPU " + std::to_string(g.index) +
                             " vendor must be a vendor name (1 to 32 of a-z, 0-9 and -), got '" +
                             g.vendor.substr(0, 40) + "'");
    }
  }
  std::set<std::string> nics;
  for (const RdmaDevice& r : rdma) {
    if (r.name.empty()) return InvalidArgument("node " + name + ": RDMA device without a name");
    if (!nics.insert(r.name).second) {
      return InvalidArgument("node " + name + ": duplicate RDMA device " + r.name);
    }
  }
  return Status::Ok();
}

Status Requests::Validate() const {
  if (cpu_milli < 0) return InvalidArgument("requests.cpu_milli must be >= 0");
  if (memory_mib < 0) return InvalidArgument("requests.memory_mib must be >= 0");
  if (gpu < 0) return InvalidArgument("requests.gpu must be >= 0");
  if (gpu_memory_mib < 0) return InvalidArgument("requests.gpu_memory_mib must be >= 0");
  if (gpu > 0 && (gpu_milli < 1 || gpu_milli > kWholeGpuMilli)) {
    return InvalidArgument("requests.gpu_milli must be in 1..1000 when requests.gpu > 0");
  }
  for (size_t i = 0; i < gpu_vendors.size(); ++i) {
    if (!IsVendorName(gpu_vendors[i])) {
      return InvalidArgument("requests.gpu_vendors[" + std::to_string(i) +
                             "] must be a vendor name (1 to 32 of a-z, 0-9 and -), such as nvidia, "
                             "amd, huawei or habana");
    }
  }
  return Status::Ok();
}

bool IsVendorName(std::string_view s) {
  if (s.empty() || s.size() > 32 || s.front() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace hf
