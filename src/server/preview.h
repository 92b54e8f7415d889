// The scheduler preview (POST /api/v1/scheduler/preview): what a candidate
// policy change would do, before it is applied. See docs/API.md.
//
// Both the current and the candidate policy run on their own copy of the live
// cluster, each with a fresh Framework, so the preview changes nothing live
// and is not disturbed by the scheduling loop. The candidate is built with the
// same calls as PUT /plugins and PUT /scheduler/config, so it is refused with
// the same errors (Conflict for binpack with spread, NotFound for an unknown
// plugin, InvalidArgument for a bad threshold). Patches that disable plugins
// are applied first, so {"binpack":{"enabled":false},"spread":{"enabled":true}}
// is a valid switch whatever the key order.
#ifndef HF_SERVER_PREVIEW_H_
#define HF_SERVER_PREVIEW_H_

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "framework/framework.h"
#include "framework/registry.h"
#include "scheduler/scheduler.h"
#include "server/codec.h"

namespace hf::server {

inline constexpr size_t kMaxPreviewTasks = 1000;
// Tasks that get per-node breakdowns; the rest only their placements.
inline constexpr size_t kMaxExplainedTasks = 50;

struct PreviewRequest {
  std::map<std::string, framework::PluginPatch> plugins;
  std::optional<SchedulerConfigPatch> scheduler;
  std::optional<std::vector<Task>> tasks;  // default: the workload below
  // Without `tasks`: "pending" places the waiting tasks on the cluster as it
  // is; "cluster" places every task (placed ones and waiting ones, by
  // priority then age) on an empty copy of the cluster, which shows how the
  // whole cluster would be laid out under each policy.
  std::string workload = "pending";
  bool explain = true;
};

// {"plugins"?, "scheduler"?, "tasks"? | "workload"?, "explain"?}; strict like every parser
// of the API, errors naming the field ("plugins.binpack.weight",
// "tasks[2].requests.gpu").
Result<PreviewRequest> ParsePreviewRequest(const nlohmann::json& j);

// Runs the preview on `snap` (taken with Scheduler::Snapshot).
Result<nlohmann::json> RunPreview(const PreviewRequest& req, const scheduler::ClusterSnapshot& snap,
                                  const framework::Registry& registry, const Clock* clock);

}  // namespace hf::server

#endif  // HF_SERVER_PREVIEW_H_
