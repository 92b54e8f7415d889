#include "core/cluster_state.h"

#include <algorithm>
#include <atomic>

namespace hf {

Result<NodeId> ClusterState::AddNode(const NodeSpec& spec) {
  HF_RETURN_IF_ERROR(spec.Validate());
  if (by_name_.count(spec.name)) return AlreadyExists("node " + spec.name + " already exists");
  // Intern the models first so that a node with too many new models is
  // rejected before anything changes.
  std::vector<std::string> new_models;
  for (const GpuDevice& g : spec.gpus) {
    if (std::find(model_names_.begin(), model_names_.end(), g.model) == model_names_.end() &&
        std::find(new_models.begin(), new_models.end(), g.model) == new_models.end()) {
      new_models.push_back(g.model);
    }
  }
  if (model_names_.size() + new_models.size() > kMaxModels) {
    return ResourceExhausted("node " + spec.name + ": more than 64 distinct GPU models in the cluster");
  }
  model_names_.insert(model_names_.end(), new_models.begin(), new_models.end());
  model_nodes_.resize(model_names_.size());

  const NodeId n = NodeId(specs_.size());
  specs_.push_back(spec);
  by_name_.emplace(spec.name, n);
  condition_.push_back(NodeCondition::kReady);
  total_cpu_.push_back(spec.cpu_milli);
  total_mem_.push_back(spec.memory_mib);
  free_cpu_.push_back(spec.cpu_milli);
  free_mem_.push_back(spec.memory_mib);
  used_gpu_milli_.push_back(0);
  gpu_count_.push_back(int32_t(spec.gpus.size()));
  free_whole_.push_back(0);
  max_free_milli_.push_back(0);
  gpu_begin_.push_back(uint32_t(gpu_free_milli_.size()));
  model_mask_.push_back(0);
  measured_.push_back(0);
  usage_.emplace_back();
  gpu_util_.push_back(0);
  const auto inv = [](int64_t total) { return total > 0 ? 1.0 / double(total) : 0.0; };
  inv_cpu_.push_back(inv(spec.cpu_milli));
  inv_mem_.push_back(inv(spec.memory_mib));
  inv_gpu_milli_.push_back(inv(int64_t(spec.gpus.size()) * kWholeGpuMilli));
  util_cpu_.push_back(0);
  util_mem_.push_back(0);
  util_gpu_.push_back(0);
  has_.push_back(uint8_t((spec.cpu_milli > 0) | (spec.memory_mib > 0) << 1 | (!spec.gpus.empty()) << 2));
  inflight_cpu_.push_back(0);
  inflight_mem_.push_back(0);
  inflight_gpu_milli_.push_back(0);
  reports_.push_back(0);
  lowest_preemptible_.push_back(INT32_MAX);
  scheduled_preemptible_.push_back(0);
  preemptible_held_.emplace_back();
  tasks_on_.emplace_back();
  for (const GpuDevice& g : spec.gpus) {
    gpu_free_milli_.push_back(kWholeGpuMilli);
    gpu_free_mem_.push_back(g.memory_mib);
    gpu_outside_mem_.push_back(0);
    const auto it = std::find(model_names_.begin(), model_names_.end(), g.model);
    const ModelMask bit = ModelMask{1} << (it - model_names_.begin());
    gpu_model_bit_.push_back(bit);
    model_mask_[n] |= bit;
  }
  const size_t count = specs_.size();
  for (NodeBitmap* b : {&ready_, &mixed_}) b->Resize(count);
  for (auto& b : model_nodes_) b.Resize(count);
  whole_ge_.resize(kIndexedWholeGpus);
  share_ge_.resize(10);
  for (auto& b : whole_ge_) b.Resize(count);
  for (auto& b : share_ge_) b.Resize(count);
  for (MaxTree* t : {&cpu_est_, &mem_est_, &gpu_est_}) t->Resize(count);
  ready_.Set(n, true);
  for (size_t m = 0; m < model_names_.size(); ++m) {
    model_nodes_[m].Set(n, model_mask_[n] & (ModelMask{1} << m));
  }
  mixed_.Set(n, std::popcount(model_mask_[n]) > 1);
  RecomputeGpuSummary(n);
  // Drawn from one process-wide counter, so two clusters never share a
  // version and a cache keyed on it cannot confuse them.
  static std::atomic<uint64_t> next_version{1};
  nodes_version_ = next_version.fetch_add(1, std::memory_order_relaxed);
  return n;
}

NodeId ClusterState::FindNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? kNoNode : it->second;
}

void ClusterState::SetCondition(NodeId n, NodeCondition c) {
  condition_[n] = c;
  ready_.Set(n, c == NodeCondition::kReady);
}

void ClusterState::UpdateEstimates(NodeId n) {
  if (!measured_[n]) return;
  cpu_est_.Set(n, usage_[n].cpu_load + double(inflight_cpu_[n]) * inv_cpu_[n]);
  mem_est_.Set(n, usage_[n].memory_used + double(inflight_mem_[n]) * inv_mem_[n]);
  if (gpu_count_[n] > 0) gpu_est_.Set(n, gpu_util_[n] + double(inflight_gpu_milli_[n]) * inv_gpu_milli_[n]);
}

void ClusterState::ReportUsage(NodeId n, const NodeUsage& usage) {
  usage_[n] = usage;
  measured_[n] = 1;
  double sum = 0;
  for (const GpuUsage& g : usage.gpus) sum += g.utilization;
  gpu_util_[n] = usage.gpus.empty() ? 0 : sum / double(usage.gpus.size());
  inflight_cpu_[n] = inflight_mem_[n] = inflight_gpu_milli_[n] = 0;
  ++reports_[n];
  UpdateEstimates(n);
  // GPU memory measured in use beyond what is granted belongs to processes
  // outside HeteroFlow: it is not handed out again until it is freed. While
  // a GPU's whole share is taken (one task holds it, or shares fill it) its
  // processes may use any amount of memory, so the last figure stands.
  for (const GpuUsage& g : usage.gpus) {
    const int32_t slot = GpuSlot(n, g.index);
    if (slot < 0) continue;
    const size_t flat = gpu_begin_[n] + size_t(slot);
    if (gpu_free_milli_[flat] == 0) continue;
    const int64_t capacity = specs_[n].gpus[size_t(slot)].memory_mib;
    const int64_t granted = capacity - gpu_free_mem_[flat] - gpu_outside_mem_[flat];
    const int64_t outside =
        std::clamp<int64_t>(g.memory_used_mib - granted, 0, std::max<int64_t>(0, capacity - granted));
    gpu_free_mem_[flat] += gpu_outside_mem_[flat] - outside;
    gpu_outside_mem_[flat] = outside;
  }
}

int32_t ClusterState::GpuSlot(NodeId n, int32_t gpu_index) const {
  const auto& gpus = specs_[n].gpus;
  // GPUs are nearly always listed by index 0..n-1.
  if (gpu_index >= 0 && size_t(gpu_index) < gpus.size() && gpus[gpu_index].index == gpu_index) {
    return gpu_index;
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].index == gpu_index) return int32_t(i);
  }
  return -1;
}

void ClusterState::RecomputeUtilization(NodeId n) {
  util_cpu_[n] = double(total_cpu_[n] - free_cpu_[n]) * inv_cpu_[n];
  util_mem_[n] = double(total_mem_[n] - free_mem_[n]) * inv_mem_[n];
  util_gpu_[n] = double(used_gpu_milli_[n]) * inv_gpu_milli_[n];
}

void ClusterState::RecomputeGpuSummary(NodeId n) {
  int32_t whole = 0, max_free = 0;
  for (int32_t f : gpu_free_milli(n)) {
    whole += (f == kWholeGpuMilli);
    max_free = std::max(max_free, f);
  }
  free_whole_[n] = whole;
  max_free_milli_[n] = max_free;
  for (int k = 1; k <= kIndexedWholeGpus; ++k) whole_ge_[k - 1].Set(n, whole >= k);
  for (int b = 1; b <= 10; ++b) share_ge_[b - 1].Set(n, max_free >= b * 100);
}

ClusterState::ModelMask ClusterState::MaskOf(const std::vector<std::string>& models) const {
  if (models.empty()) return kAnyModel;
  ModelMask mask = 0;
  for (const std::string& m : models) {
    auto it = std::find(model_names_.begin(), model_names_.end(), m);
    if (it != model_names_.end()) mask |= ModelMask{1} << (it - model_names_.begin());
  }
  return mask;
}

Status ClusterState::Bind(const Task& task, const Allocation& alloc, TaskState state,
                          int64_t now_ms) {
  if (placed_.count(task.key)) {
    return AlreadyExists("task " + task.name + " already holds resources");
  }
  if (alloc.node >= specs_.size()) return NotFound("bind: no node with id " + std::to_string(alloc.node));
  if (state != TaskState::kScheduled && state != TaskState::kRunning) {
    return InvalidArgument("bind: a placed task is scheduled or running");
  }
  const NodeId n = alloc.node;
  const std::string& node_name = specs_[n].name;
  if (alloc.cpu_milli < 0 || alloc.memory_mib < 0) return InvalidArgument("bind: negative request");
  if (alloc.cpu_milli > free_cpu_[n]) return ResourceExhausted("bind: insufficient CPU on " + node_name);
  if (alloc.memory_mib > free_mem_[n]) {
    return ResourceExhausted("bind: insufficient memory on " + node_name);
  }
  const ModelMask allowed = MaskOf(task.requests.gpu_models);
  std::vector<int32_t> slots;
  slots.reserve(alloc.gpus.size());
  for (const GpuGrant& g : alloc.gpus) {
    const int32_t slot = GpuSlot(n, g.index);
    const std::string gpu_name = node_name + " GPU " + std::to_string(g.index);
    if (slot < 0) return NotFound("bind: no " + gpu_name);
    if (std::find(slots.begin(), slots.end(), slot) != slots.end()) {
      return InvalidArgument("bind: " + gpu_name + " granted twice");
    }
    if (g.milli < 1 || g.milli > kWholeGpuMilli) {
      return InvalidArgument("bind: share on " + gpu_name + " must be in 1..1000");
    }
    if (g.memory_mib < 0) return InvalidArgument("bind: negative GPU memory on " + gpu_name);
    const size_t flat = gpu_begin_[n] + slot;
    if (!(gpu_model_bit_[flat] & allowed)) return InvalidArgument("bind: model of " + gpu_name + " not allowed");
    if (g.milli > gpu_free_milli_[flat]) return ResourceExhausted("bind: " + gpu_name + " share exhausted");
    if (g.memory_mib > gpu_free_mem_[flat]) return ResourceExhausted("bind: " + gpu_name + " memory exhausted");
    slots.push_back(slot);
  }
  if (!alloc.rdma_device.empty()) {
    const auto& nics = specs_[n].rdma;
    if (std::none_of(nics.begin(), nics.end(),
                     [&](const RdmaDevice& r) { return r.name == alloc.rdma_device; })) {
      return NotFound("bind: no RDMA device " + alloc.rdma_device + " on " + node_name);
    }
  }

  // Everything fits: apply.
  free_cpu_[n] -= alloc.cpu_milli;
  free_mem_[n] -= alloc.memory_mib;
  int64_t gpu_milli = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const size_t flat = gpu_begin_[n] + slots[i];
    gpu_free_milli_[flat] -= alloc.gpus[i].milli;
    gpu_free_mem_[flat] -= alloc.gpus[i].memory_mib;
    gpu_milli += alloc.gpus[i].milli;
  }
  used_gpu_milli_[n] += gpu_milli;
  RecomputeUtilization(n);
  inflight_cpu_[n] += alloc.cpu_milli;
  inflight_mem_[n] += alloc.memory_mib;
  inflight_gpu_milli_[n] += gpu_milli;
  UpdateEstimates(n);
  if (!slots.empty()) RecomputeGpuSummary(n);
  tasks_on_[n].push_back(task.key);

  PlacedTask p;
  p.key = task.key;
  p.name = task.name;
  p.group = task.group;
  p.priority = task.priority;
  p.preemptible = task.preemptible;
  p.rdma = task.rdma_required;
  p.state = state;
  p.started_at_ms = state == TaskState::kRunning ? now_ms : 0;
  p.alloc = alloc;
  p.bound_at_report = reports_[n];
  if (p.preemptible) {
    lowest_preemptible_[n] = std::min(lowest_preemptible_[n], p.priority);
    scheduled_preemptible_[n] += p.state == TaskState::kScheduled;
    Held& h = preemptible_held_[n];
    h.cpu_milli += alloc.cpu_milli;
    h.memory_mib += alloc.memory_mib;
    h.gpu_milli += gpu_milli;
  }
  if (!p.group.empty()) AddToIndex(group_index_, p.group, n, +1, p.rdma);
  if (!p.name.empty()) AddToIndex(name_index_, p.name, n, +1, p.rdma);
  placed_.emplace(task.key, std::move(p));
  return Status::Ok();
}

Status ClusterState::Release(TaskKey key) {
  auto it = placed_.find(key);
  if (it == placed_.end()) return NotFound("task " + std::to_string(key) + " holds no resources");
  const PlacedTask& p = it->second;
  const NodeId n = p.alloc.node;
  free_cpu_[n] += p.alloc.cpu_milli;
  free_mem_[n] += p.alloc.memory_mib;
  for (const GpuGrant& g : p.alloc.gpus) {
    const size_t flat = gpu_begin_[n] + GpuSlot(n, g.index);
    gpu_free_milli_[flat] += g.milli;
    gpu_free_mem_[flat] += g.memory_mib;
    used_gpu_milli_[n] -= g.milli;
    HF_CHECK(gpu_free_milli_[flat] <= kWholeGpuMilli);
  }
  HF_CHECK(free_cpu_[n] <= total_cpu_[n] && free_mem_[n] <= total_mem_[n]);
  if (p.bound_at_report == reports_[n]) {
    // Not measured yet: it leaves the in-flight estimate with its resources.
    int64_t gpu_milli = 0;
    for (const GpuGrant& g : p.alloc.gpus) gpu_milli += g.milli;
    inflight_cpu_[n] = std::max<int64_t>(0, inflight_cpu_[n] - p.alloc.cpu_milli);
    inflight_mem_[n] = std::max<int64_t>(0, inflight_mem_[n] - p.alloc.memory_mib);
    inflight_gpu_milli_[n] = std::max<int64_t>(0, inflight_gpu_milli_[n] - gpu_milli);
    UpdateEstimates(n);
  }
  if (!p.alloc.gpus.empty()) RecomputeGpuSummary(n);
  RecomputeUtilization(n);
  auto& on = tasks_on_[n];
  on.erase(std::find(on.begin(), on.end(), key));
  if (!p.group.empty()) AddToIndex(group_index_, p.group, n, -1, p.rdma);
  if (!p.name.empty()) AddToIndex(name_index_, p.name, n, -1, p.rdma);
  const bool was_lowest = p.preemptible && p.priority == lowest_preemptible_[n];
  if (p.preemptible) {
    scheduled_preemptible_[n] -= p.state == TaskState::kScheduled;
    Held& h = preemptible_held_[n];
    h.cpu_milli -= p.alloc.cpu_milli;
    h.memory_mib -= p.alloc.memory_mib;
    for (const GpuGrant& g : p.alloc.gpus) h.gpu_milli -= g.milli;
  }
  placed_.erase(it);
  if (was_lowest) RecomputeLowestPreemptible(n);
  return Status::Ok();
}

Status ClusterState::Restore(const PlacedTask& placed) {
  Task t;
  t.key = placed.key;
  t.name = placed.name;
  t.group = placed.group;
  t.priority = placed.priority;
  t.preemptible = placed.preemptible;
  t.rdma_required = placed.rdma;
  return Bind(t, placed.alloc, placed.state, placed.started_at_ms);
}

Status ClusterState::MarkRunning(TaskKey key, int64_t now_ms) {
  auto it = placed_.find(key);
  if (it == placed_.end()) return NotFound("task " + std::to_string(key) + " is not placed");
  PlacedTask& p = it->second;
  if (p.preemptible && p.state == TaskState::kScheduled) --scheduled_preemptible_[p.alloc.node];
  p.state = TaskState::kRunning;
  p.started_at_ms = now_ms;
  return Status::Ok();
}

void ClusterState::RecomputeLowestPreemptible(NodeId n) {
  int32_t lowest = INT32_MAX;
  for (TaskKey k : tasks_on_[n]) {
    const PlacedTask& p = placed_.at(k);
    if (p.preemptible) lowest = std::min(lowest, p.priority);
  }
  lowest_preemptible_[n] = lowest;
}

const PlacedTask* ClusterState::FindPlaced(TaskKey key) const {
  auto it = placed_.find(key);
  return it == placed_.end() ? nullptr : &it->second;
}

void ClusterState::AddToIndex(std::unordered_map<std::string, std::vector<NodeCount>>& index,
                              const std::string& key, NodeId n, int32_t delta, bool rdma) {
  auto& v = index[key];
  auto it = std::find_if(v.begin(), v.end(), [n](const NodeCount& c) { return c.node == n; });
  if (it == v.end()) it = v.insert(v.end(), NodeCount{n, 0, 0});
  it->count += delta;
  if (rdma) it->rdma_count += delta;
  if (it->count == 0) v.erase(it);
  if (v.empty()) index.erase(key);
}

std::span<const NodeCount> ClusterState::GroupNodes(std::string_view group) const {
  auto it = group_index_.find(std::string(group));
  if (it == group_index_.end()) return {};
  return it->second;
}

std::span<const NodeCount> ClusterState::NameNodes(std::string_view name) const {
  auto it = name_index_.find(std::string(name));
  if (it == name_index_.end()) return {};
  return it->second;
}

}  // namespace hf
