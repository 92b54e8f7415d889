#include "framework/framework.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "core/fit.h"

namespace hf::framework {

const char* PluginStatusName(PluginStatus s) {
  switch (s) {
    case PluginStatus::kActive: return "active";
    case PluginStatus::kInactive: return "inactive";
    case PluginStatus::kError: return "error";
    case PluginStatus::kConfiguring: return "configuring";
  }
  return "unknown";
}

struct Framework::Slot {
  const PluginFactory* factory = nullptr;
  std::unique_ptr<Plugin> plugin;
  PluginSettings settings;
  PluginStatus status = PluginStatus::kInactive;
  std::string message;
  uint64_t generation = 0;  // counts ApplySettings calls (FinishReload)
};

Framework::Framework(const Registry& registry, const Clock* clock) {
  deps_.reasons = &reasons_;
  held_reason_ = reasons_.Intern("room held for a reservation", false);
  deps_.clock = clock;
  for (const PluginFactory& f : registry.entries()) {
    auto slot = std::make_unique<Slot>();
    slot->factory = &f;
    slot->plugin = f.make(deps_);
    slot->settings = f.defaults;
    if (f.required) slot->settings.enabled = true;
    slots_.push_back(std::move(slot));
  }
}

Framework::~Framework() = default;

namespace {

// Applies the keys a policy named onto settings. Types are checked again here
// because a Policy may be built in code (e.g. from an API request), not only
// by the YAML parser.
Result<PluginSettings> Merge(PluginSettings s, const std::string& plugin, const nlohmann::json& named) {
  if (!named.is_object()) return InvalidArgument("plugins." + plugin + " must be a mapping");
  for (auto& [k, v] : named.items()) {
    const std::string field = "plugins." + plugin + "." + k;
    if (k == "enabled") {
      if (!v.is_boolean()) return InvalidArgument(field + " must be true or false");
      s.enabled = v.get<bool>();
    } else if (k == "weight") {
      if (!v.is_number()) return InvalidArgument(field + " must be a number");
      s.weight = v.get<double>();
    } else if (k == "mode") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return InvalidArgument(field + " must be a non-empty string");
      }
      s.mode = v.get<std::string>();
    } else {
      s.config[k] = v;
    }
  }
  return s;
}

// The always-on threshold filter: its config is the scheduler config's
// thresholds (SetSchedulerConfig), never set on the plugin itself.
constexpr const char* kThresholdPlugin = "load_threshold";

Status NoWeight(const std::string& field, const std::string& plugin) {
  return InvalidArgument(field + ": " + plugin +
                         " only filters nodes and has no weight (weights apply to scores)");
}

}  // namespace

bool HasWeight(uint32_t points) { return points != kFilterPoint; }

size_t FeasibleNodesToFind(size_t nodes, int percentage) {
  if (percentage >= 100 || nodes <= kMinFeasibleNodesToFind) return nodes;
  if (percentage <= 0) {
    // Adaptive: every node up to kAdaptiveFullScanNodes, then
    // kAdaptivePercent of them, never fewer than kMinFeasibleNodesToFind.
    if (nodes <= kAdaptiveFullScanNodes) return nodes;
    percentage = kAdaptivePercent;
  }
  return std::max(kMinFeasibleNodesToFind, nodes * size_t(percentage) / 100);
}

Result<std::unique_ptr<Framework>> Framework::Create(const Registry& registry, const Policy& policy,
                                                     const Clock* clock) {
  std::unique_ptr<Framework> fw(new Framework(registry, clock));
  for (const auto& [name, named] : policy.plugins) {
    const auto origin = policy.origin.find(name);
    const std::string at =
        origin != policy.origin.end() ? origin->second : "plugins." + name;
    const Slot* slot = fw->FindSlot(name);
    if (!slot) return InvalidArgument(at + ": no plugin named " + name);
    if (!named.is_object()) continue;  // Merge names the type error
    if (named.contains("weight") && !HasWeight(slot->plugin->Points())) {
      return NoWeight(at, name);
    }
    if (name == kThresholdPlugin) {
      for (const auto& [key, value] : named.items()) {
        if (key == "enabled") continue;
        return InvalidArgument(at + "." + key +
                               ": the load thresholds are set under scheduler: "
                               "(scheduler.load_threshold, scheduler.gpu_load_threshold, "
                               "scheduler.memory_threshold)");
      }
    }
  }
  HF_RETURN_IF_ERROR(policy.scheduler.Validate());
  fw->scheduler_ = policy.scheduler;
  for (auto& slot : fw->slots_) {
    auto it = policy.plugins.find(slot->factory->name);
    PluginSettings s = slot->settings;
    if (it != policy.plugins.end()) {
      auto merged = Merge(slot->settings, slot->factory->name, it->second);
      if (!merged.ok()) return merged.status();
      s = *merged;
    }
    if (slot->factory->required && !s.enabled) {
      return FailedPrecondition("plugin " + slot->factory->name + " is required and cannot be disabled");
    }
    slot->settings.enabled = false;  // conflicts are checked against what is enabled so far
    if (s.enabled) HF_RETURN_IF_ERROR(fw->CheckConflicts(*slot, true));
    HF_RETURN_IF_ERROR(fw->ApplySettings(*slot, s));
  }
  HF_RETURN_IF_ERROR(fw->SetSchedulerConfig(policy.scheduler));
  fw->RebuildPointLists();
  return fw;
}

Framework::Slot* Framework::FindSlot(std::string_view name) {
  for (auto& s : slots_) {
    if (s->factory->name == name) return s.get();
  }
  return nullptr;
}

const Framework::Slot* Framework::FindSlot(std::string_view name) const {
  return const_cast<Framework*>(this)->FindSlot(name);
}

Status Framework::CheckConflicts(const Slot& slot, bool enabling) const {
  if (!enabling) return Status::Ok();
  const std::string& me = slot.factory->name;
  for (const auto& other : slots_) {
    if (other.get() == &slot || !other->settings.enabled) continue;
    const std::string& them = other->factory->name;
    auto mine = slot.plugin->ConflictsWith();
    auto theirs = other->plugin->ConflictsWith();
    if (std::find(mine.begin(), mine.end(), them) != mine.end() ||
        std::find(theirs.begin(), theirs.end(), me) != theirs.end()) {
      return Conflict("cannot enable " + me + " while " + them + " is enabled: " + me + " and " +
                      them + " are mutually exclusive; disable " + them + " first");
    }
  }
  return Status::Ok();
}

Status Framework::ApplySettings(Slot& slot, const PluginSettings& s) {
  const std::string& name = slot.factory->name;
  HF_RETURN_IF_ERROR(ValidateWeight(s.weight, "plugins." + name + ".weight"));
  const auto modes = slot.plugin->Modes();
  PluginSettings settings = s;
  if (modes.empty()) {
    if (!settings.mode.empty()) return InvalidArgument("plugin " + name + " has no mode");
  } else {
    if (settings.mode.empty()) settings.mode = modes.front();
    if (std::find(modes.begin(), modes.end(), settings.mode) == modes.end()) {
      std::string list;
      for (const auto& m : modes) list += (list.empty() ? "" : " | ") + m;
      return InvalidArgument("plugins." + name + ".mode must be one of " + list + ", got \"" +
                             settings.mode + "\"");
    }
  }
  if (!settings.config.is_object()) return InvalidArgument("plugins." + name + ".config must be an object");
  const std::vector<std::string> keys = slot.plugin->ConfigKeys();
  for (const auto& [key, value] : settings.config.items()) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    std::string known;
    for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
    return InvalidArgument("plugins." + name + ": unknown config key \"" + key + "\" (" +
                           (known.empty() ? "it takes none" : "known: " + known) + ")");
  }
  const PluginStatus before = slot.status;
  ++slot.generation;
  slot.status = PluginStatus::kConfiguring;
  Status st = slot.plugin->Configure(PluginArgs{settings.mode, settings.config});
  if (st.code() == StatusCode::kInvalidArgument) {
    slot.status = before;
    return st;
  }
  slot.settings = settings;
  slot.message = st.ok() ? "" : st.message();
  if (!settings.enabled) slot.status = PluginStatus::kInactive;
  else slot.status = st.ok() ? PluginStatus::kActive : PluginStatus::kError;
  return Status::Ok();
}

void Framework::RebuildPointLists() {
  filters_.clear();
  post_filters_.clear();
  scorers_.clear();
  device_binders_.clear();
  attachment_binders_.clear();
  domain_sources_.clear();
  observers_.clear();
  for (auto& slot : slots_) {
    if (!slot->settings.enabled) continue;
    Plugin* p = slot->plugin.get();
    // In error: left out, and the scheduler goes on. Reloading: as before
    // (healthy plugins keep the sources they had until the new ones are in).
    const bool healthy = slot->status == PluginStatus::kActive ||
                         (slot->status == PluginStatus::kConfiguring && slot->message.empty());
    if (!healthy) continue;
    if (auto* f = dynamic_cast<FilterPlugin*>(p)) filters_.push_back(f);
    if (auto* f = dynamic_cast<PostFilterPlugin*>(p)) post_filters_.push_back(f);
    if (auto* d = dynamic_cast<DomainSource*>(p)) domain_sources_.push_back(d);
    if (auto* o = dynamic_cast<ArrivalObserver*>(p)) observers_.push_back(o);
    if (auto* s = dynamic_cast<ScorePlugin*>(p)) {
      scorers_.push_back({s, dynamic_cast<PreScorePlugin*>(p), slot->settings.weight, slot->factory->name});
    }
    if (auto* b = dynamic_cast<BindPlugin*>(p)) {
      (b->BindStage() == BindPlugin::Stage::kDevices ? device_binders_ : attachment_binders_).push_back(b);
    }
  }
}

std::vector<PluginInfo> Framework::Plugins() const {
  std::vector<PluginInfo> out;
  for (const auto& slot : slots_) {
    out.push_back({slot->factory->name, slot->plugin->Points(), slot->factory->required,
                   slot->settings, slot->plugin->Modes(), slot->status, slot->message});
  }
  return out;
}

std::vector<std::string> Framework::PathConfigKeys(std::string_view name) const {
  const Slot* slot = FindSlot(name);
  return slot ? slot->plugin->PathConfigKeys() : std::vector<std::string>{};
}

Result<PluginInfo> Framework::GetPlugin(std::string_view name) const {
  for (auto& info : Plugins()) {
    if (info.name == name) return info;
  }
  return NotFound("unknown plugin " + std::string(name));
}

Status Framework::UpdatePlugin(std::string_view name, const PluginPatch& patch) {
  Slot* slot = FindSlot(name);
  if (!slot) return NotFound("unknown plugin " + std::string(name));
  const std::string field = "plugins." + std::string(name);
  if (patch.weight && !HasWeight(slot->plugin->Points())) {
    return NoWeight(field + ".weight", std::string(name));
  }
  if (patch.config && name == kThresholdPlugin) {
    return InvalidArgument(field +
                           ".config: the load thresholds are the scheduler config's; change "
                           "them with PUT /api/v1/scheduler/config");
  }
  PluginSettings s = slot->settings;
  if (patch.enabled) {
    if (slot->factory->required && !*patch.enabled) {
      return FailedPrecondition("plugin " + std::string(name) + " is required and cannot be disabled");
    }
    if (*patch.enabled && !s.enabled) HF_RETURN_IF_ERROR(CheckConflicts(*slot, true));
    s.enabled = *patch.enabled;
  }
  if (patch.weight) s.weight = *patch.weight;
  if (patch.mode) {
    if (patch.mode->empty()) return InvalidArgument("plugins." + std::string(name) + ".mode must not be empty");
    s.mode = *patch.mode;
  }
  if (patch.config) {
    if (!patch.config->is_object()) return InvalidArgument("config must be an object");
    for (auto& [k, v] : patch.config->items()) s.config[k] = v;
  }
  HF_RETURN_IF_ERROR(ApplySettings(*slot, s));
  RebuildPointLists();
  return Status::Ok();
}

Status Framework::RestorePlugin(std::string_view name, const PluginSettings& settings) {
  Slot* slot = FindSlot(name);
  if (!slot) return NotFound("unknown plugin " + std::string(name));
  HF_RETURN_IF_ERROR(ApplySettings(*slot, settings));
  RebuildPointLists();
  return Status::Ok();
}

Result<Framework::PendingReload> Framework::StartReload(std::string_view name) {
  Slot* slot = FindSlot(name);
  if (!slot) return NotFound("unknown plugin " + std::string(name));
  // Point lists are left as they are: a healthy plugin keeps serving what
  // it had loaded until the new sources are in.
  if (slot->settings.enabled) slot->status = PluginStatus::kConfiguring;
  return PendingReload{slot->factory->name, slot->plugin->StartReload(), slot->generation};
}

std::vector<Framework::PendingReload> Framework::StartDueReloads() {
  std::vector<PendingReload> due;
  for (auto& slot : slots_) {
    if (!slot->settings.enabled || !slot->plugin->ReloadDue()) continue;
    due.push_back(*StartReload(slot->factory->name));
  }
  return due;
}

Status Framework::FinishReload(const PendingReload& reload) {
  Slot* slot = FindSlot(reload.plugin);
  if (!slot) return NotFound("unknown plugin " + reload.plugin);
  // Settings applied meanwhile loaded their sources themselves.
  if (slot->generation != reload.generation) return Status::Ok();
  const Status st = reload.job.apply ? reload.job.apply() : Status::Ok();
  slot->message = st.ok() ? "" : st.message();
  if (!slot->settings.enabled) slot->status = PluginStatus::kInactive;
  else slot->status = st.ok() ? PluginStatus::kActive : PluginStatus::kError;
  RebuildPointLists();
  return st;
}

Status Framework::FailReload(const PendingReload& reload, Status why) {
  Slot* slot = FindSlot(reload.plugin);
  if (!slot) return NotFound("unknown plugin " + reload.plugin);
  if (slot->generation != reload.generation) return Status::Ok();
  slot->message = why.message();
  slot->status = slot->settings.enabled ? PluginStatus::kError : PluginStatus::kInactive;
  RebuildPointLists();
  return why;
}

Status Framework::ReloadPlugin(std::string_view name) {
  HF_ASSIGN_OR_RETURN(PendingReload reload, StartReload(name));
  if (reload.job.load) reload.job.load();
  return FinishReload(reload);
}

Status Framework::SetSchedulerConfig(const SchedulerConfig& config) {
  HF_RETURN_IF_ERROR(config.Validate());
  // The thresholds are the config of the always-on threshold filter.
  for (auto& slot : slots_) {
    if (slot->factory->name != "load_threshold") continue;
    PluginSettings s = slot->settings;
    s.config = config.ToJson();
    // The framework's and the fit check's, not the filter's.
    s.config.erase("percentage_of_nodes_to_score");
    s.config.erase("exclusive_gpu_vendors");
    HF_RETURN_IF_ERROR(ApplySettings(*slot, s));
  }
  scheduler_ = config;
  RebuildPointLists();
  return Status::Ok();
}

Status Framework::SetScoreWeights(const std::map<std::string, double>& weights) {
  // Checked in full before any change, so a bad entry changes nothing.
  for (const auto& [name, w] : weights) {
    const std::string field = "score_weights." + name;
    const Slot* slot = FindSlot(name);
    if (!slot) return InvalidArgument(field + ": no plugin named " + name);
    if (!(slot->plugin->Points() & kScorePoint)) {
      return InvalidArgument(field + ": plugin " + name + " does not score");
    }
    HF_RETURN_IF_ERROR(ValidateWeight(w, field));
  }
  for (const auto& [name, w] : weights) {
    Slot* slot = FindSlot(name);
    PluginSettings s = slot->settings;
    s.weight = w;
    HF_CHECK(ApplySettings(*slot, s).ok());
  }
  RebuildPointLists();
  return Status::Ok();
}

Policy Framework::CurrentPolicy() const {
  Policy p;
  p.scheduler = scheduler_;
  for (const auto& slot : slots_) {
    nlohmann::json named = slot->settings.config;
    named["enabled"] = slot->settings.enabled;
    if (HasWeight(slot->plugin->Points())) named["weight"] = slot->settings.weight;
    if (!slot->settings.mode.empty()) named["mode"] = slot->settings.mode;
    if (slot->factory->name == "load_threshold") named = {{"enabled", true}};
    p.plugins[slot->factory->name] = named;
  }
  return p;
}

Framework::Settings Framework::SaveSettings() const {
  Settings saved;
  saved.scheduler = scheduler_;
  for (const auto& slot : slots_) saved.plugins.emplace_back(slot->factory->name, slot->settings);
  return saved;
}

void Framework::RestoreSettings(const Settings& saved) {
  for (const auto& [name, settings] : saved.plugins) {
    Slot* slot = FindSlot(name);
    if (slot == nullptr || slot->settings == settings) continue;
    HF_CHECK(ApplySettings(*slot, settings).ok());
  }
  scheduler_ = saved.scheduler;
  RebuildPointLists();
}

void Framework::ApplyExclusiveVendors(ClusterState& cluster) const {
  if (cluster.exclusive_vendors() != scheduler_.exclusive_gpu_vendors) {
    cluster.SetExclusiveVendors(scheduler_.exclusive_gpu_vendors);
  }
}

std::string Framework::Summarize(const Rejections& rejections, size_t node_count,
                                 const Requests& req) const {
  std::vector<std::pair<uint32_t, std::string>> counts;  // one entry per distinct text
  for (size_t r = 0; r < rejections.reason_slots(); ++r) {
    const uint32_t c = rejections.count(ReasonId(r));
    if (c == 0) continue;
    const std::string& text = reasons_.text(ReasonId(r));
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& e) { return e.second == text; });
    if (it == counts.end()) counts.emplace_back(c, text);
    else it->first += c;
  }
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  std::string out = "0/" + std::to_string(node_count) + " nodes available";
  // What the task takes, when a node's models were refused: the reasons
  // name what the nodes have.
  const bool mismatch = std::any_of(counts.begin(), counts.end(), [](const auto& c) {
    return c.second.rfind("GPU model mismatch", 0) == 0;
  });
  if (mismatch && (!req.gpu_vendors.empty() || !req.gpu_models.empty())) {
    const auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const std::string& x : v) s += (s.empty() ? "" : "|") + x;
      return s;
    };
    std::string wants;
    if (!req.gpu_vendors.empty()) wants = "GPU vendor " + list(req.gpu_vendors);
    if (!req.gpu_models.empty()) {
      wants += (wants.empty() ? "GPU model " : ", model ") + list(req.gpu_models);
    }
    out += " for " + wants;
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    out += (i == 0 ? ": " : ", ") + std::to_string(counts[i].first) + " " + counts[i].second;
  }
  return out;
}

void Framework::PickDefaultGpus(const Task& task, const ClusterState& cluster,
                                Allocation& alloc) const {
  const Requests& req = task.requests;
  const GpuFreeView free{cluster.gpu_free_milli(alloc.node), cluster.gpu_free_memory(alloc.node),
                         cluster.gpu_model_bits(alloc.node)};
  const auto allowed = cluster.AllowedModels(req);
  const auto& gpus = cluster.spec(alloc.node).gpus;
  for (size_t slot = 0; slot < gpus.size() && alloc.gpus.size() < size_t(req.gpu); ++slot) {
    if (GpuSlotFits(free, slot, req, allowed)) {
      alloc.gpus.push_back({gpus[slot].index, req.gpu_milli, req.gpu_memory_mib});
    }
  }
}

bool Framework::BindAndCommit(const Task& task, ClusterState& cluster, NodeId node,
                              CycleState& state, const ScheduleOptions& options, Decision& d) {
  Allocation alloc;
  alloc.node = node;
  alloc.cpu_milli = task.requests.cpu_milli;
  alloc.memory_mib = task.requests.memory_mib;
  const auto fail = [&](const std::string& why) {
    d.scheduled = false;
    d.reason = "bind on " + cluster.spec(node).name + " failed: " + why;
    return false;
  };
  const auto bind = [&](BindPlugin* b) {
    if (!options.timings) return b->Bind(task, cluster, alloc, state);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = b->Bind(task, cluster, alloc, state);
    options.timings->push_back(
        {b->Name(), "Bind", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    return st;
  };
  for (BindPlugin* b : device_binders_) {
    Status st = bind(b);
    if (!st.ok()) return fail(std::string(b->Name()) + ": " + st.message());
  }
  if (task.requests.gpu > 0 && alloc.gpus.empty()) PickDefaultGpus(task, cluster, alloc);
  if (alloc.gpus.size() != size_t(std::max(task.requests.gpu, 0))) {
    return fail("could not choose " + std::to_string(task.requests.gpu) + " GPU(s)");
  }
  for (BindPlugin* b : attachment_binders_) {
    Status st = bind(b);
    if (!st.ok()) return fail(std::string(b->Name()) + ": " + st.message());
  }
  Status st = cluster.Bind(task, alloc, options.bind_state, deps_.clock ? deps_.clock->NowMs() : 0);
  if (!st.ok()) return fail(st.message());
  d.scheduled = true;
  d.alloc = std::move(alloc);
  return true;
}

bool Framework::CommitPreemption(const Task& task, ClusterState& cluster,
                                 const PreemptionPlan& plan, CycleState& state,
                                 const ScheduleOptions& options, Decision& d) {
  const std::string why = d.reason;
  std::vector<PlacedTask> evicted;
  for (TaskKey v : plan.victims) {
    const PlacedTask* p = cluster.FindPlaced(v);
    if (!p || p->alloc.node != plan.node) continue;
    evicted.push_back(*p);
    HF_CHECK(cluster.Release(v).ok());
  }
  // A gang goes whole: the victims' job mates leave with them, or, when a
  // mate may not be preempted, nobody does.
  bool whole = true;
  for (size_t i = 0; i < evicted.size() && whole; ++i) {
    if (evicted[i].job == 0) continue;
    for (TaskKey mate : cluster.PlacedMembers(evicted[i].job)) {
      const PlacedTask* p = cluster.FindPlaced(mate);
      if (!p->preemptible) {
        whole = false;
        break;
      }
      evicted.push_back(*p);
      HF_CHECK(cluster.Release(mate).ok());
    }
  }
  if (whole && BindAndCommit(task, cluster, plan.node, state, options, d)) {
    for (const auto& e : evicted) d.victims.push_back(e.key);
    d.evicted = std::move(evicted);
    return true;
  }
  // The plan did not hold (a bug in a plugin): put the victims back as they were.
  for (auto e = evicted.rbegin(); e != evicted.rend(); ++e) HF_CHECK(cluster.Restore(*e).ok());
  d.reason = why;
  return false;
}

GangOptions GangOptions::For(const JobSpec& spec) {
  GangOptions g;
  g.one_gpu_model = spec.one_gpu_model;
  g.domain = spec.pack == "none"     ? Domain::kNone
             : spec.pack == "switch" ? Domain::kSwitch
                                     : Domain::kRack;
  return g;
}

GangDecision Framework::ScheduleGang(std::span<const Task* const> members, size_t need,
                                    ClusterState& cluster, CycleState& state,
                                    const ScheduleOptions& options, const GangOptions& gang) {
  ApplyExclusiveVendors(cluster);
  GangDecision g;
  bool asks_gpus = false;
  int64_t whole_gpus = 0;  // the gang's whole-GPU demand, for the domain trials
  for (const Task* m : members) {
    asks_gpus |= m->requests.gpu > 0;
    if (m->requests.gpu_milli == kWholeGpuMilli) whole_gpus += m->requests.gpu;
  }
  const bool one_model = gang.one_gpu_model && asks_gpus;
  Task restricted;  // a member with its GPU models narrowed to one
  std::string tried;  // the model the last trial restricted members to
  // One trial: the members in order on `o`'s nodes. `model`: every member's
  // GPUs of that model; empty with one_model: of the first placed member's.
  // On failure the cluster is as it was and `failure` says why.
  const auto attempt = [&](const ScheduleOptions& o, std::string model, size_t want,
                           std::string& failure) -> bool {
    g.members.clear();
    size_t placed = 0;
    failure.clear();
    for (const Task* m : members) {
      const Task* t = m;
      if (!model.empty() && m->requests.gpu > 0) {
        const auto& allowed = m->requests.gpu_models;
        if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), model) == allowed.end()) {
          Decision d;
          d.reason = "it does not take GPU model " + model;
          if (failure.empty()) failure = m->name + ": " + d.reason;
          g.members.push_back(std::move(d));
          continue;
        }
        restricted = *m;
        restricted.requests.gpu_models = {model};
        t = &restricted;
      }
      Decision d = Schedule(*t, cluster, state, o);
      if (d.scheduled) {
        ++placed;
        if (one_model && model.empty() && m->requests.gpu > 0 && !d.alloc.gpus.empty()) {
          model = cluster.GpuModelOf(d.alloc);
        }
      } else if (failure.empty()) {
        failure = m->name + ": " + d.reason;
      }
      g.members.push_back(std::move(d));
    }
    tried = model;
    if (placed >= want) return true;
    // Undo, newest first: the members, then the victims they displaced.
    for (size_t i = g.members.size(); i-- > 0;) {
      if (g.members[i].scheduled) HF_CHECK(cluster.Release(members[i]->key).ok());
    }
    for (size_t i = g.members.size(); i-- > 0;) {
      const std::vector<PlacedTask>& ev = g.members[i].evicted;
      for (auto e = ev.rbegin(); e != ev.rend(); ++e) HF_CHECK(cluster.Restore(*e).ok());
    }
    failure = "gang " + std::to_string(placed) + "/" + std::to_string(need) + " placeable" +
              (one_model && !model.empty() && cluster.model_count() > 1
                   ? " on one GPU model (" + model + ")"
                   : "") +
              ": " +
              failure;
    return false;
  };
  // A trial on every node: the policy's model for the first member, then,
  // with one_model, each other model the cluster has.
  const auto everywhere = [&](const ScheduleOptions& o, std::string& failure) -> bool {
    if (one_model && !gang.gpu_model.empty()) return attempt(o, gang.gpu_model, need, failure);
    if (attempt(o, "", need, failure)) return true;
    if (!one_model) return false;
    const std::string first_failure = failure;
    const std::string first_model = tried;
    for (size_t bit = 0; bit < cluster.model_count(); ++bit) {
      if (cluster.model_name(bit) == first_model) continue;  // just failed
      std::string ignored;
      if (attempt(o, cluster.model_name(bit), need, ignored)) return true;
    }
    failure = first_failure;
    return false;
  };

  ScheduleOptions quiet = options;
  quiet.preempt = false;
  bool done = false;
  if (gang.domain != GangOptions::Domain::kNone && whole_gpus > 0 && members.size() > 1) {
    done = TryDomains(whole_gpus, cluster, state, gang, [&](std::span<const NodeId> nodes) {
      ScheduleOptions o = quiet;
      o.candidates = nodes;
      std::string ignored;
      return attempt(o, one_model ? gang.gpu_model : std::string(), members.size(), ignored);
    });
  }
  std::string failure;
  if (!done) done = everywhere(quiet, failure);
  if (!done && options.preempt && !post_filters_.empty()) {
    std::string ignored;
    done = everywhere(options, ignored);
  }
  g.scheduled = done;
  if (!done) {
    g.reason = failure;
    for (Decision& d : g.members) {
      d.scheduled = false;
      d.victims.clear();
      d.evicted.clear();
      d.reason = g.reason;
    }
  }
  return g;
}

bool Framework::TryDomains(int64_t whole_gpus, const ClusterState& cluster,
                           CycleState& state, const GangOptions& gang,
                           const std::function<bool(std::span<const NodeId>)>& trial) {
  NodeDomains domains;
  bool known = false;
  for (DomainSource* d : domain_sources_) {
    if (d->Domains(cluster, state, domains)) {
      known = true;
      break;
    }
  }
  if (!known) return false;
  const size_t n = cluster.node_count();
  std::vector<NodeId> nodes;
  for (const std::vector<uint32_t>* level : {&domains.rack, &domains.sw}) {
    if (level == &domains.rack && gang.domain == GangOptions::Domain::kSwitch) continue;
    if (level->size() != n) continue;
    // Free whole GPUs per domain, on schedulable nodes.
    std::unordered_map<uint32_t, int64_t> free;
    for (NodeId i = 0; i < n; ++i) {
      const uint32_t id = (*level)[i];
      if (id == NodeDomains::kNoDomain || !cluster.schedulable(i)) continue;
      free[id] += cluster.free_whole_gpus(i);
    }
    std::vector<std::pair<int64_t, uint32_t>> fits;  // (free, domain), best fit first
    for (const auto& [id, f] : free) {
      if (f >= whole_gpus) fits.emplace_back(f, id);
    }
    // One domain holding every node says nothing a trial on every node does not.
    if (fits.size() == 1 && free.size() == 1) continue;
    std::sort(fits.begin(), fits.end());
    if (fits.size() > GangOptions::kMaxDomainTrials) fits.resize(GangOptions::kMaxDomainTrials);
    for (const auto& [f, id] : fits) {
      nodes.clear();
      for (NodeId i = 0; i < n; ++i) {
        if ((*level)[i] == id) nodes.push_back(i);
      }
      if (trial(nodes)) return true;
    }
  }
  return false;
}

Decision Framework::Schedule(const Task& task, ClusterState& cluster, const ScheduleOptions& options) {
  return Schedule(task, cluster, own_state_, options);
}

Decision Framework::Schedule(const Task& task, ClusterState& cluster, CycleState& st,
                             const ScheduleOptions& options) {
  ApplyExclusiveVendors(cluster);
  for (ArrivalObserver* o : observers_) o->Observe(task);
  Decision d;
  const size_t n = cluster.node_count();
  // Runs fn, timing it when the caller asked for timings.
  const auto timed = [&](std::string_view plugin, const char* point, auto&& fn) {
    if (!options.timings) return fn();
    const auto t0 = std::chrono::steady_clock::now();
    struct Record {
      const ScheduleOptions& o;
      std::string_view plugin;
      const char* point;
      std::chrono::steady_clock::time_point t0;
      ~Record() {
        o.timings->push_back(
            {plugin, point, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
      }
    } record{options, plugin, point, t0};
    return fn();
  };
  // Every filter, in order, on st.nodes_.
  const auto filter_nodes = [&] {
    if (!options.excluded.empty()) {
      std::erase_if(st.nodes_, [&](NodeId id) {
        if (!std::binary_search(options.excluded.begin(), options.excluded.end(), id)) return false;
        st.rejections_.Reject(id, held_reason_);
        return true;
      });
    }
    for (FilterPlugin* f : filters_) {
      if (st.nodes_.empty()) break;
      timed(f->Name(), "Filter", [&] { f->Filter(task, cluster, st.nodes_, st.rejections_); });
    }
  };
  const auto run_filters = [&](bool recording) {
    if (options.candidates.empty()) {
      st.nodes_.resize(n);
      std::iota(st.nodes_.begin(), st.nodes_.end(), NodeId{0});
    } else {
      st.nodes_.assign(options.candidates.begin(), options.candidates.end());
    }
    st.rejections_.Reset(n, reasons_.size(), recording);
    filter_nodes();
  };
  // Sampling (SchedulerConfig::percentage_of_nodes_to_score): the nodes are
  // filtered in growing runs of consecutive ids from where the last sampled
  // pass stopped, wrapping around, until `want` are feasible; the first
  // `want` found (in ascending id once put in order) are scored. False when
  // no node passed: every node was filtered, as an unsampled pass would.
  const auto sample_filters = [&](size_t want) {
    st.rejections_.Reset(n, reasons_.size(), /*recording=*/false);
    st.sample_.clear();
    const size_t start = st.next_start_ < n ? st.next_start_ : 0;
    size_t scanned = 0, run = std::max<size_t>(2 * want, 256), wrap_at = 0;
    while (scanned < n && st.sample_.size() < want) {
      const size_t pos = (start + scanned) % n;
      const size_t len = std::min({run, n - scanned, n - pos});
      if (pos == 0 && scanned > 0) wrap_at = st.sample_.size();
      st.nodes_.resize(len);
      std::iota(st.nodes_.begin(), st.nodes_.end(), NodeId(pos));
      filter_nodes();
      st.sample_.insert(st.sample_.end(), st.nodes_.begin(), st.nodes_.end());
      scanned += len;
      run *= 2;
    }
    if (st.sample_.size() > want) {
      st.sample_.resize(want);
      if (wrap_at > want) wrap_at = 0;
    }
    // The next pass starts after the last node kept.
    st.next_start_ = st.sample_.empty() ? (start + scanned) % n : (size_t(st.sample_.back()) + 1) % n;
    // Ascending ids, so that ties go to the lowest id as in a full pass.
    std::rotate(st.sample_.begin(), st.sample_.begin() + ptrdiff_t(wrap_at), st.sample_.end());
    st.nodes_.swap(st.sample_);
    return !st.nodes_.empty();
  };
  // Reasons are worked out only when someone will read them (see Rejections).
  const size_t want = options.explain || !options.candidates.empty()
                          ? n
                          : FeasibleNodesToFind(n, scheduler_.percentage_of_nodes_to_score);
  if (want < n) {
    if (!sample_filters(want)) run_filters(true);
  } else {
    run_filters(options.explain);
    if (st.nodes_.empty() && !options.explain) run_filters(true);
  }

  Explanation* ex = nullptr;
  if (options.explain) {
    d.explanation.emplace();
    ex = &*d.explanation;
    for (const auto& s : scorers_) ex->score_plugins.push_back(s.name);
    ex->nodes.resize(n);
    for (NodeId i = 0; i < n; ++i) ex->nodes[i].node = i;
    for (NodeId r : st.rejections_.rejected()) ex->nodes[r].reason = reasons_.text(st.rejections_.reason(r));
  }

  if (st.nodes_.empty()) {
    d.reason = Summarize(st.rejections_, n, task.requests);
    // Every active filter judges a node with victims taken out.
    struct Probe final : FilterProbe {
      const std::vector<FilterPlugin*>& filters;
      explicit Probe(const std::vector<FilterPlugin*>& f) : filters(f) {}
      bool Passes(const Task& t, const ClusterState& c, const NodeWithout& w) const override {
        return std::all_of(filters.begin(), filters.end(),
                           [&](FilterPlugin* f) { return f->PassesWithout(t, c, w); });
      }
    } probe(filters_);
    for (PostFilterPlugin* pf : post_filters_) {
      if (!options.preempt) break;
      PreemptionPlan plan = timed(pf->Name(), "PostFilter",
                                  [&] { return pf->PostFilter(task, cluster, st.rejections_, probe, options.eviction); });
      if (plan.node != kNoNode && CommitPreemption(task, cluster, plan, st, options, d)) break;
    }
    return d;
  }

  d.feasible_nodes = st.nodes_.size();
  size_t best = 0;
  if (st.nodes_.size() > 1 || ex) {
    st.total_.resize(st.nodes_.size());
    bool first = true;  // the first contributing scorer writes totals instead of adding
    if (ex) {
      for (NodeId node : st.nodes_) {
        ex->nodes[node].feasible = true;
        ex->nodes[node].raw.assign(scorers_.size(), 0.0);
        ex->nodes[node].weighted.assign(scorers_.size(), 0.0);
      }
    }
    for (size_t si = 0; si < scorers_.size(); ++si) {
      const Scorer& s = scorers_[si];
      if (s.weight == 0 && !ex) continue;
      if (s.pre && !timed(s.name, "PreScore", [&] { return s.pre->PreScore(task, cluster, st.nodes_, st); })) {
        continue;
      }
      st.scores_.resize(st.nodes_.size());  // Score writes every entry
      timed(s.name, "Score", [&] {
        s.score->Score(task, cluster, st.nodes_, st.scores_, st);
        s.score->NormalizeScores(st.scores_);
      });
      const double w = s.weight;
      if (first) {
        for (size_t i = 0; i < st.nodes_.size(); ++i) st.total_[i] = w * std::clamp(st.scores_[i], 0.0, 100.0);
      } else {
        for (size_t i = 0; i < st.nodes_.size(); ++i) st.total_[i] += w * std::clamp(st.scores_[i], 0.0, 100.0);
      }
      first = false;
      if (ex) {
        for (size_t i = 0; i < st.nodes_.size(); ++i) {
          const double v = std::clamp(st.scores_[i], 0.0, 100.0);
          ex->nodes[st.nodes_[i]].raw[si] = v;
          ex->nodes[st.nodes_[i]].weighted[si] = w * v;
        }
      }
    }
    if (first) std::fill(st.total_.begin(), st.total_.end(), 0.0);  // nobody scored: all tie
    // Strictly greater: ties go to the earliest node in stable order.
    for (size_t i = 1; i < st.nodes_.size(); ++i) {
      if (st.total_[i] > st.total_[best]) best = i;
    }
    d.score = st.total_[best];
    if (ex) {
      for (size_t i = 0; i < st.nodes_.size(); ++i) ex->nodes[st.nodes_[i]].total = st.total_[i];
    }
  }
  BindAndCommit(task, cluster, st.nodes_[best], st, options, d);
  return d;
}

}  // namespace hf::framework
