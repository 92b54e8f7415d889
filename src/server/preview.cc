#include "server/preview.h"

#include <memory>
#include <utility>

#include "core/model_json.h"

namespace hf::server {

using scheduler::ClusterSnapshot;

namespace {

using nlohmann::json;

// Keys of preview tasks that came with the request: far above any row id, so
// they never collide with tasks already placed in the cluster copy.
constexpr TaskKey kPreviewKeyBase = TaskKey{1} << 62;

Status Prefixed(const Status& s, const std::string& prefix) {
  return s.ok() ? s : Status(s.code(), prefix + ": " + s.message());
}

Result<std::unique_ptr<framework::Framework>> CandidateFramework(
    const PreviewRequest& req, const framework::Policy& policy, const framework::Registry& registry,
    const Clock* clock) {
  HF_ASSIGN_OR_RETURN(auto fw, framework::Framework::Create(registry, policy, clock));
  // Disabling first, so a switch between exclusive plugins never conflicts.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [name, patch] : req.plugins) {
      const bool disables = patch.enabled && !*patch.enabled;
      if (disables != (pass == 0)) continue;
      HF_RETURN_IF_ERROR(Prefixed(fw->UpdatePlugin(name, patch), "plugins." + name));
    }
  }
  if (req.scheduler) {
    HF_RETURN_IF_ERROR(
        Prefixed(fw->SetSchedulerConfig(req.scheduler->ApplyTo(fw->scheduler_config())), "scheduler"));
    if (req.scheduler->score_weights) {
      // The message names "score_weights.NAME": a field of the scheduler block.
      Status st = fw->SetScoreWeights(*req.scheduler->score_weights);
      if (!st.ok()) return Status(st.code(), "scheduler." + st.message());
    }
  }
  return fw;
}

json PolicyToJson(const framework::Policy& p) {
  json plugins = json::object();
  for (const auto& [name, settings] : p.plugins) plugins[name] = settings;
  return {{"plugins", plugins}, {"scheduler", p.scheduler.ToJson()}};
}

json PlacementJson(const framework::Decision& d, const ClusterState& c) {
  json out = {{"node", nullptr}, {"gpus", json::array()}, {"score", nullptr},
              {"reason", d.reason}, {"victims", d.victims}};
  if (d.scheduled) {
    out["node"] = c.spec(d.alloc.node).name;
    for (const GpuGrant& g : d.alloc.gpus) {
      out["gpus"].push_back({{"index", g.index}, {"milli", g.milli}, {"memory_mib", g.memory_mib}});
    }
    out["score"] = d.score;
  }
  return out;
}

json VerdictJson(const framework::NodeVerdict& v, const framework::Explanation& e) {
  json scores = json::object();
  if (v.feasible) {
    for (size_t i = 0; i < e.score_plugins.size(); ++i) {
      scores[e.score_plugins[i]] = {{"raw", v.raw[i]}, {"weighted", v.weighted[i]}};
    }
  }
  json out = {{"feasible", v.feasible}, {"reason", v.reason}, {"scores", std::move(scores)}};
  if (v.feasible) out["total"] = v.total;
  return out;
}

// Per node, the verdicts of both policies side by side.
json NodeBreakdown(const framework::Decision& cur, const framework::Decision& cand,
                   const ClusterState& c) {
  std::map<NodeId, json> rows;
  auto add = [&](const framework::Decision& d, const char* side) {
    if (!d.explanation) return;
    for (const framework::NodeVerdict& v : d.explanation->nodes) {
      json& row = rows[v.node];
      row["node"] = c.spec(v.node).name;
      row[side] = VerdictJson(v, *d.explanation);
    }
  };
  add(cur, "current");
  add(cand, "candidate");
  json out = json::array();
  for (auto& [id, row] : rows) out.push_back(std::move(row));
  return out;
}

json Summary(const ClusterState& c, const framework::Policy& policy, int scheduled, int unschedulable) {
  int64_t used = 0, total = 0, fragmented = 0, free_milli = 0;
  for (NodeId n = 0; n < c.node_count(); ++n) {
    used += c.used_gpu_milli(n);
    total += c.total_gpu_milli(n);
    for (int32_t f : c.gpu_free_milli(n)) {
      free_milli += f;
      if (f > 0 && f < kWholeGpuMilli) fragmented += f;
    }
  }
  return {{"policy", PolicyToJson(policy)},
          {"scheduled", scheduled},
          {"unschedulable", unschedulable},
          {"gpu_allocation", total ? double(used) / double(total) : 0.0},
          {"gpu_fragmentation", free_milli ? double(fragmented) / double(free_milli) : 0.0}};
}

// An error from a parser that named the field relative to `path`: "weight
// must be a number" becomes "plugins.binpack.weight must be a number", and
// 'unknown field "x"' becomes 'unknown field "plugins.binpack.x"'.
Status AtPath(const Status& s, const std::string& path) {
  if (s.ok()) return s;
  const std::string unknown = "unknown field \"";
  if (s.message().rfind(unknown, 0) == 0) {
    return Status(s.code(), unknown + path + "." + s.message().substr(unknown.size()));
  }
  return Status(s.code(), path + "." + s.message());
}

}  // namespace

Result<PreviewRequest> ParsePreviewRequest(const json& j) {
  if (!j.is_object()) return InvalidArgument("preview request must be an object");
  PreviewRequest req;
  for (const auto& [key, value] : j.items()) {
    if (key == "plugins") {
      if (!value.is_object()) return InvalidArgument("plugins must be an object");
      for (const auto& [name, patch] : value.items()) {
        Result<framework::PluginPatch> p = ParsePluginPatch(patch);
        if (!p.ok()) return AtPath(p.status(), "plugins." + name);
        req.plugins[name] = std::move(p).value();
      }
    } else if (key == "scheduler") {
      Result<SchedulerConfigPatch> p = ParseSchedulerConfigPatch(value);
      if (!p.ok()) return AtPath(p.status(), "scheduler");
      req.scheduler = std::move(p).value();
    } else if (key == "tasks") {
      if (!value.is_array()) return InvalidArgument("tasks must be an array");
      if (value.size() > kMaxPreviewTasks) {
        return InvalidArgument("tasks: at most " + std::to_string(kMaxPreviewTasks) + " tasks");
      }
      std::vector<Task> tasks;
      for (size_t i = 0; i < value.size(); ++i) {
        HF_ASSIGN_OR_RETURN(Task t, TaskFromJson(value[i], "tasks[" + std::to_string(i) + "]"));
        t.key = kPreviewKeyBase + i;
        tasks.push_back(std::move(t));
      }
      req.tasks = std::move(tasks);
    } else if (key == "workload") {
      if (value != "pending" && value != "cluster") {
        return InvalidArgument("workload must be \"pending\" or \"cluster\"");
      }
      req.workload = value.get<std::string>();
    } else if (key == "explain") {
      if (!value.is_boolean()) return InvalidArgument("explain must be a boolean");
      req.explain = value.get<bool>();
    } else {
      return InvalidArgument("unknown field \"" + key + "\"");
    }
  }
  if (req.tasks && j.contains("workload")) {
    return InvalidArgument("give either tasks or workload, not both");
  }
  return req;
}

Result<json> RunPreview(const PreviewRequest& req, const ClusterSnapshot& snap,
                        const framework::Registry& registry, const Clock* clock) {
  HF_ASSIGN_OR_RETURN(auto current, framework::Framework::Create(registry, snap.policy, clock));
  HF_ASSIGN_OR_RETURN(auto candidate, CandidateFramework(req, snap.policy, registry, clock));
  ClusterState base = snap.cluster;
  std::vector<Task> everything;
  if (!req.tasks && req.workload == "cluster") {
    for (const Task& t : snap.placed) HF_RETURN_IF_ERROR(base.Release(t.key));
    everything = snap.placed;
    everything.insert(everything.end(), snap.pending.begin(), snap.pending.end());
    std::stable_sort(everything.begin(), everything.end(), [](const Task& a, const Task& b) {
      return a.priority != b.priority ? a.priority > b.priority : a.key < b.key;
    });
  }
  const std::vector<Task>& all = req.tasks                      ? *req.tasks
                                 : req.workload == "cluster" ? everything
                                                             : snap.pending;
  const size_t count = std::min(all.size(), kMaxPreviewTasks);
  ClusterState cur_cluster = base;
  ClusterState cand_cluster = base;
  json tasks = json::array();
  int cur_ok = 0, cand_ok = 0, moved = 0;
  for (size_t i = 0; i < count; ++i) {
    const Task& t = all[i];
    framework::ScheduleOptions opt;
    opt.explain = req.explain && i < kMaxExplainedTasks;
    framework::Decision a = current->Schedule(t, cur_cluster, opt);
    framework::Decision b = candidate->Schedule(t, cand_cluster, opt);
    cur_ok += a.scheduled;
    cand_ok += b.scheduled;
    json row = {{"name", t.name}, {"priority", t.priority},
                {"current", PlacementJson(a, cur_cluster)},
                {"candidate", PlacementJson(b, cand_cluster)}};
    if (!req.tasks) row["id"] = t.key;
    const bool same = row["current"]["node"] == row["candidate"]["node"] &&
                      row["current"]["gpus"] == row["candidate"]["gpus"];
    moved += !same;
    row["moved"] = !same;
    if (opt.explain) row["nodes"] = NodeBreakdown(a, b, cur_cluster);
    tasks.push_back(std::move(row));
  }
  return json{{"current", Summary(cur_cluster, current->CurrentPolicy(), cur_ok, int(count) - cur_ok)},
              {"candidate", Summary(cand_cluster, candidate->CurrentPolicy(), cand_ok, int(count) - cand_ok)},
              {"moved", moved},
              {"truncated", all.size() > count},
              {"tasks", std::move(tasks)}};
}

}  // namespace hf::server
