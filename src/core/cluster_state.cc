#include "core/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <optional>

namespace hf {

template <typename F>
void ClusterState::ForEachNodeArray(F&& f) {
  f(specs_);
  f(condition_);
  f(total_cpu_);
  f(total_mem_);
  f(free_cpu_);
  f(free_mem_);
  f(used_gpu_milli_);
  f(gpu_count_);
  f(free_whole_);
  f(max_free_milli_);
  f(gpu_begin_);
  f(model_mask_);
  f(measured_);
  f(usage_);
  f(gpu_util_);
  f(inv_cpu_);
  f(inv_mem_);
  f(inv_gpu_milli_);
  f(util_cpu_);
  f(util_mem_);
  f(util_gpu_);
  f(has_);
  f(inflight_cpu_);
  f(inflight_mem_);
  f(inflight_gpu_milli_);
  f(lowest_preemptible_);
  f(scheduled_preemptible_);
  f(bands_);
  f(tasks_on_);
  f(briefs_on_);
}

void ClusterState::NewNodesVersion() {
  // Drawn from one process-wide counter, so two clusters never share a
  // version and a cache keyed on it cannot confuse them.
  static std::atomic<uint64_t> next_version{1};
  nodes_version_ = next_version.fetch_add(1, std::memory_order_relaxed);
}

int ClusterState::ModelBit(const std::string& vendor, const std::string& model) const {
  for (size_t m = 0; m < model_names_.size(); ++m) {
    if (model_names_[m] == model && model_vendors_[m] == vendor) return int(m);
  }
  return -1;
}

Result<std::vector<std::pair<std::string, std::string>>> ClusterState::NewModels(
    const NodeSpec& spec) const {
  std::vector<std::pair<std::string, std::string>> new_models;
  for (const GpuDevice& g : spec.gpus) {
    std::pair<std::string, std::string> kind{g.vendor, g.model};
    if (ModelBit(g.vendor, g.model) < 0 &&
        std::find(new_models.begin(), new_models.end(), kind) == new_models.end()) {
      new_models.push_back(std::move(kind));
    }
  }
  if (model_names_.size() + new_models.size() > kMaxModels) {
    return ResourceExhausted("node " + spec.name + ": more than 64 distinct GPU models in the cluster");
  }
  return new_models;
}

Status ClusterState::InternModels(const NodeSpec& spec) {
  // Interned first, so that a node with too many new models is rejected
  // before anything changes.
  HF_ASSIGN_OR_RETURN(auto new_models, NewModels(spec));
  for (auto& [vendor, model] : new_models) {
    const bool exclusive = std::find(exclusive_vendors_.begin(), exclusive_vendors_.end(),
                                     vendor) != exclusive_vendors_.end();
    if (exclusive) exclusive_models_ |= ModelMask{1} << model_names_.size();
    model_vendors_.push_back(std::move(vendor));
    model_names_.push_back(std::move(model));
  }
  model_nodes_.resize(model_names_.size());
  for (auto& b : model_nodes_) b.Resize(specs_.size());
  model_free_milli_.resize(model_names_.size(), 0);
  return Status::Ok();
}

int64_t& ClusterState::ModelFreeOf(size_t flat) {
  return model_free_milli_[size_t(std::countr_zero(gpu_model_bit_[flat]))];
}

void ClusterState::ApplySpec(NodeId n, const NodeSpec& spec) {
  specs_[n] = spec;
  total_cpu_[n] = free_cpu_[n] = spec.cpu_milli;
  total_mem_[n] = free_mem_[n] = spec.memory_mib;
  used_gpu_milli_[n] = 0;
  const auto inv = [](int64_t total) { return total > 0 ? 1.0 / double(total) : 0.0; };
  inv_cpu_[n] = inv(spec.cpu_milli);
  inv_mem_[n] = inv(spec.memory_mib);
  inv_gpu_milli_[n] = inv(int64_t(spec.gpus.size()) * kWholeGpuMilli);
  has_[n] = uint8_t((spec.cpu_milli > 0) | (spec.memory_mib > 0) << 1 | (!spec.gpus.empty()) << 2);
  RecomputeUtilization(n);

  // The node's flat GPU range takes the new GPUs; later nodes' ranges move.
  const size_t begin = gpu_begin_[n];
  const size_t old_count = size_t(gpu_count_[n]);
  const size_t new_count = spec.gpus.size();
  for (size_t i = begin; i < begin + old_count; ++i) ModelFreeOf(i) -= gpu_free_milli_[i];
  const auto resize_range = [&](auto& v, auto fill) {
    v.erase(v.begin() + begin, v.begin() + begin + old_count);
    v.insert(v.begin() + begin, new_count, fill);
  };
  resize_range(gpu_free_milli_, kWholeGpuMilli);
  resize_range(gpu_free_mem_, int64_t{0});
  resize_range(gpu_outside_mem_, int64_t{0});
  resize_range(gpu_model_bit_, ModelMask{0});
  for (size_t m = n + 1; m < gpu_begin_.size(); ++m) {
    gpu_begin_[m] = uint32_t(gpu_begin_[m] + new_count - old_count);
  }
  gpu_count_[n] = int32_t(new_count);
  model_mask_[n] = 0;
  for (size_t i = 0; i < new_count; ++i) {
    const GpuDevice& g = spec.gpus[i];
    gpu_free_mem_[begin + i] = g.memory_mib;
    const int m = ModelBit(g.vendor, g.model);
    HF_CHECK(m >= 0);  // interned by InternModels
    const ModelMask bit = ModelMask{1} << m;
    gpu_model_bit_[begin + i] = bit;
    model_mask_[n] |= bit;
    ModelFreeOf(begin + i) += kWholeGpuMilli;
  }
  for (size_t m = 0; m < model_names_.size(); ++m) {
    model_nodes_[m].Set(n, model_mask_[n] & (ModelMask{1} << m));
  }
  mixed_.Set(n, std::popcount(model_mask_[n]) > 1);
  RecomputeGpuSummary(n);
}

Result<NodeId> ClusterState::AddNode(const NodeSpec& spec) {
  HF_RETURN_IF_ERROR(spec.Validate());
  if (by_name_.count(spec.name)) return AlreadyExists("node " + spec.name + " already exists");
  HF_RETURN_IF_ERROR(InternModels(spec));

  const NodeId n = NodeId(specs_.size());
  ForEachNodeArray([](auto& v) { v.emplace_back(); });
  by_name_.emplace(spec.name, n);
  condition_[n] = NodeCondition::kReady;
  gpu_begin_[n] = uint32_t(gpu_free_milli_.size());
  gpu_count_[n] = 0;
  lowest_preemptible_[n] = INT32_MAX;
  const size_t count = specs_.size();
  for (NodeBitmap* b : {&ready_, &mixed_}) b->Resize(count);
  for (auto& b : model_nodes_) b.Resize(count);
  whole_ge_.resize(kIndexedWholeGpus);
  share_ge_.resize(10);
  for (auto& b : whole_ge_) b.Resize(count);
  for (auto& b : share_ge_) b.Resize(count);
  for (MaxTree* t : {&cpu_est_, &mem_est_, &gpu_est_}) t->Resize(count);
  ready_.Set(n, true);
  ApplySpec(n, spec);
  ReserveTaskMaps();
  NewNodesVersion();
  return n;
}

Status ClusterState::CheckUpdate(NodeId n, const NodeSpec& spec) const {
  if (n >= specs_.size()) return NotFound("no node with id " + std::to_string(n));
  HF_RETURN_IF_ERROR(spec.Validate());
  const std::string& name = specs_[n].name;
  if (spec.name != name) {
    return InvalidArgument("node " + name + " cannot be renamed to " + spec.name);
  }
  // Everything placed here must fit the new spec before anything changes.
  int64_t cpu = 0, mem = 0;
  std::map<int32_t, std::pair<int64_t, int64_t>> per_gpu;  // index -> milli, memory
  for (TaskKey key : tasks_on_[n]) {
    const PlacedTask& p = placed_.at(key);
    cpu += p.alloc.cpu_milli;
    mem += p.alloc.memory_mib;
    for (const GpuGrant& g : p.alloc.gpus) {
      per_gpu[g.index].first += g.milli;
      per_gpu[g.index].second += g.memory_mib;
    }
    if (!p.alloc.rdma_device.empty() &&
        std::none_of(spec.rdma.begin(), spec.rdma.end(),
                     [&](const RdmaDevice& r) { return r.name == p.alloc.rdma_device; })) {
      return FailedPrecondition("node " + name + ": task " + std::to_string(key) +
                                " holds RDMA device " + p.alloc.rdma_device +
                                ", which the new spec lacks");
    }
  }
  if (cpu > spec.cpu_milli || mem > spec.memory_mib) {
    return FailedPrecondition("node " + name + ": its tasks hold " + std::to_string(cpu) +
                              " mCPU and " + std::to_string(mem) + " MiB; the new spec has " +
                              std::to_string(spec.cpu_milli) + " mCPU and " +
                              std::to_string(spec.memory_mib) + " MiB");
  }
  for (const auto& [index, held] : per_gpu) {
    const auto g = std::find_if(spec.gpus.begin(), spec.gpus.end(),
                                [index = index](const GpuDevice& d) { return d.index == index; });
    if (g == spec.gpus.end()) {
      return FailedPrecondition("node " + name + ": GPU " + std::to_string(index) +
                                " has grants and is missing from the new spec");
    }
    if (held.second > g->memory_mib) {
      return FailedPrecondition("node " + name + ": GPU " + std::to_string(index) + " has " +
                                std::to_string(held.second) + " MiB granted; the new spec gives it " +
                                std::to_string(g->memory_mib) + " MiB");
    }
  }
  return NewModels(spec).status();
}

Status ClusterState::UpdateNode(NodeId n, const NodeSpec& spec) {
  HF_RETURN_IF_ERROR(CheckUpdate(n, spec));
  HF_CHECK(InternModels(spec).ok());

  // Take the tasks off, swap the spec, put them back; then carry what was
  // measured on the GPUs that are still there.
  std::vector<PlacedTask> held;
  for (TaskKey key : tasks_on_[n]) held.push_back(placed_.at(key));
  for (const PlacedTask& p : held) HF_CHECK(Release(p.key).ok());
  std::map<int32_t, int64_t> outside;  // GPU index -> memory used outside HeteroFlow
  for (size_t i = 0; i < size_t(gpu_count_[n]); ++i) {
    outside[specs_[n].gpus[i].index] = gpu_outside_mem_[gpu_begin_[n] + i];
  }
  ApplySpec(n, spec);
  std::vector<GpuUsage>& gpus = usage_[n].gpus;
  gpus.erase(std::remove_if(gpus.begin(), gpus.end(),
                            [&](const GpuUsage& g) { return GpuSlot(n, g.index) < 0; }),
             gpus.end());
  std::sort(gpus.begin(), gpus.end(), [&](const GpuUsage& a, const GpuUsage& b) {
    return GpuSlot(n, a.index) < GpuSlot(n, b.index);
  });
  for (const PlacedTask& p : held) HF_CHECK(Restore(p).ok());
  for (size_t i = 0; i < size_t(gpu_count_[n]); ++i) {
    const auto it = outside.find(spec.gpus[i].index);
    if (it == outside.end()) continue;
    const size_t flat = gpu_begin_[n] + i;
    const int64_t kept = std::min(it->second, gpu_free_mem_[flat]);
    gpu_outside_mem_[flat] = kept;
    gpu_free_mem_[flat] -= kept;
  }
  RecomputeGpuSummary(n);
  RecomputeMeasuredGpu(n);
  UpdateEstimates(n);
  NewNodesVersion();
  return Status::Ok();
}

Status ClusterState::RemoveNode(NodeId n) {
  if (n >= specs_.size()) return NotFound("no node with id " + std::to_string(n));
  if (!tasks_on_[n].empty()) {
    return FailedPrecondition("node " + specs_[n].name + " still holds " +
                              std::to_string(tasks_on_[n].size()) + " task(s)");
  }
  const size_t begin = gpu_begin_[n];
  const size_t gpus = size_t(gpu_count_[n]);
  for (size_t i = begin; i < begin + gpus; ++i) ModelFreeOf(i) -= gpu_free_milli_[i];
  const auto erase_range = [&](auto& v) { v.erase(v.begin() + begin, v.begin() + begin + gpus); };
  erase_range(gpu_free_milli_);
  erase_range(gpu_free_mem_);
  erase_range(gpu_outside_mem_);
  erase_range(gpu_model_bit_);
  by_name_.erase(specs_[n].name);
  ForEachNodeArray([n](auto& v) { v.erase(v.begin() + n); });
  for (size_t m = n; m < specs_.size(); ++m) {
    gpu_begin_[m] = uint32_t(gpu_begin_[m] - gpus);
    by_name_[specs_[m].name] = NodeId(m);
  }
  // Ids above n move down one: in placements and in the group and name indexes.
  for (auto& [key, p] : placed_) {
    if (p.alloc.node > n) --p.alloc.node;
  }
  for (auto* index : {&group_index_, &name_index_}) {
    for (auto& [key, counts] : *index) {
      for (NodeCount& c : counts) {
        if (c.node > n) --c.node;
      }
    }
  }
  RebuildIndexes();
  NewNodesVersion();
  return Status::Ok();
}

void ClusterState::RebuildIndexes() {
  const size_t count = specs_.size();
  const auto fresh = [count](NodeBitmap& b) {
    b = NodeBitmap();
    b.Resize(count);
  };
  fresh(ready_);
  fresh(mixed_);
  for (auto& b : model_nodes_) fresh(b);
  for (auto& b : whole_ge_) fresh(b);
  for (auto& b : share_ge_) fresh(b);
  for (MaxTree* t : {&cpu_est_, &mem_est_, &gpu_est_}) {
    *t = MaxTree();
    t->Resize(count);
  }
  for (NodeId n = 0; n < count; ++n) {
    ready_.Set(n, condition_[n] == NodeCondition::kReady);
    mixed_.Set(n, std::popcount(model_mask_[n]) > 1);
    for (size_t m = 0; m < model_names_.size(); ++m) {
      model_nodes_[m].Set(n, model_mask_[n] & (ModelMask{1} << m));
    }
    RecomputeGpuSummary(n);
    UpdateEstimates(n);
  }
}

void ClusterState::AdoptMeasurements(const ClusterState& old) {
  for (NodeId n = 0; n < specs_.size(); ++n) {
    const NodeId o = old.FindNode(specs_[n].name);
    if (o == kNoNode || !old.measured_[o]) continue;
    measured_[n] = 1;
    usage_[n] = old.usage_[o];
    std::vector<GpuUsage>& gpus = usage_[n].gpus;
    gpus.erase(std::remove_if(gpus.begin(), gpus.end(),
                              [&](const GpuUsage& g) { return GpuSlot(n, g.index) < 0; }),
               gpus.end());
    for (size_t i = 0; i < size_t(gpu_count_[n]); ++i) {
      const int32_t slot = old.GpuSlot(o, specs_[n].gpus[i].index);
      if (slot < 0) continue;
      const size_t flat = gpu_begin_[n] + i;
      const int64_t kept =
          std::min(old.gpu_outside_mem_[old.gpu_begin_[o] + size_t(slot)], gpu_free_mem_[flat]);
      gpu_outside_mem_[flat] = kept;
      gpu_free_mem_[flat] -= kept;
    }
    for (TaskKey key : tasks_on_[n]) {
      const PlacedTask* before = old.FindPlaced(key);
      if (before != nullptr && before->alloc.node == o) placed_.at(key).inflight = before->inflight;
    }
    RecomputeGpuSummary(n);
    RecomputeMeasuredGpu(n);
    RecomputeInflight(n);
    UpdateEstimates(n);
  }
}

NodeId ClusterState::FindNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? kNoNode : it->second;
}

void ClusterState::SetCondition(NodeId n, NodeCondition c) {
  condition_[n] = c;
  ready_.Set(n, c == NodeCondition::kReady);
}

LoadEstimate ClusterState::Estimate(NodeId n) const {
  if (!measured_[n]) return {};
  return {usage_[n].cpu_load + double(inflight_cpu_[n]) * inv_cpu_[n],
          usage_[n].memory_used + double(inflight_mem_[n]) * inv_mem_[n],
          gpu_util_[n] + double(inflight_gpu_milli_[n]) * inv_gpu_milli_[n]};
}

LoadEstimate ClusterState::Share(const PlacedTask& p) const {
  const NodeId n = p.alloc.node;
  int64_t gpu_milli = 0;
  for (const GpuGrant& g : p.alloc.gpus) gpu_milli += g.milli;
  return {double(p.alloc.cpu_milli) * inv_cpu_[n], double(p.alloc.memory_mib) * inv_mem_[n],
          double(gpu_milli) * inv_gpu_milli_[n]};
}

void ClusterState::UpdateEstimates(NodeId n) {
  if (!measured_[n]) return;
  const LoadEstimate e = Estimate(n);
  cpu_est_.Set(n, e.cpu);
  mem_est_.Set(n, e.memory);
  if (gpu_count_[n] > 0) gpu_est_.Set(n, e.gpu);
}

void ClusterState::RecomputeMeasuredGpu(NodeId n) {
  double sum = 0;
  for (const GpuUsage& g : usage_[n].gpus) sum += g.utilization;
  gpu_util_[n] = gpu_count_[n] > 0 ? sum / double(gpu_count_[n]) : 0;
}

void ClusterState::RecomputeInflight(NodeId n) {
  int64_t cpu = 0, mem = 0, gpu = 0;
  for (TaskKey key : tasks_on_[n]) {
    const PlacedTask& p = placed_.at(key);
    if (!p.inflight) continue;
    cpu += p.alloc.cpu_milli;
    mem += p.alloc.memory_mib;
    for (const GpuGrant& g : p.alloc.gpus) gpu += g.milli;
  }
  inflight_cpu_[n] = cpu;
  inflight_mem_[n] = mem;
  inflight_gpu_milli_[n] = gpu;
}

Status ClusterState::ReportUsage(NodeId n, const NodeUsage& usage) {
  // Checked first: a refused report changes nothing.
  std::vector<int32_t> slots;
  slots.reserve(usage.gpus.size());
  for (size_t i = 0; i < usage.gpus.size(); ++i) {
    const int32_t index = usage.gpus[i].index;
    const std::string field = "usage.gpus[" + std::to_string(i) + "].index";
    const int32_t slot = GpuSlot(n, index);
    if (slot < 0) {
      return InvalidArgument(field + ": node " + specs_[n].name + " has no GPU " +
                             std::to_string(index));
    }
    if (std::find(slots.begin(), slots.end(), slot) != slots.end()) {
      return InvalidArgument(field + ": GPU " + std::to_string(index) + " is reported twice");
    }
    slots.push_back(slot);
  }
  NodeUsage& kept = usage_[n];
  kept.cpu_load = usage.cpu_load;
  kept.memory_used = usage.memory_used;
  kept.reported_at_ms = usage.reported_at_ms;
  kept.running_tasks.reset();
  for (const GpuUsage& g : usage.gpus) {
    auto it = std::find_if(kept.gpus.begin(), kept.gpus.end(),
                           [&](const GpuUsage& k) { return k.index == g.index; });
    if (it != kept.gpus.end()) {
      *it = g;
    } else {
      kept.gpus.push_back(g);
    }
  }
  std::sort(kept.gpus.begin(), kept.gpus.end(), [&](const GpuUsage& a, const GpuUsage& b) {
    return GpuSlot(n, a.index) < GpuSlot(n, b.index);
  });
  measured_[n] = 1;
  RecomputeMeasuredGpu(n);

  // A task's in-flight part goes once the measurement holds its process.
  std::vector<uint64_t> running;
  if (usage.running_tasks) {
    running = *usage.running_tasks;
    std::sort(running.begin(), running.end());
  }
  for (TaskKey key : tasks_on_[n]) {
    PlacedTask& p = placed_.at(key);
    if (!p.inflight || p.state != TaskState::kRunning) continue;
    if (usage.running_tasks && !std::binary_search(running.begin(), running.end(), key)) continue;
    p.inflight = false;
  }
  RecomputeInflight(n);
  UpdateEstimates(n);
  // GPU memory measured in use beyond what is granted belongs to processes
  // outside HeteroFlow: it is not handed out again until it is freed. While
  // a GPU's whole share is taken (one task holds it, or shares fill it) its
  // processes may use any amount of memory, so the last figure stands.
  for (const GpuUsage& g : usage.gpus) {
    const size_t slot = size_t(GpuSlot(n, g.index));
    const size_t flat = gpu_begin_[n] + slot;
    if (gpu_free_milli_[flat] == 0) continue;
    const int64_t capacity = specs_[n].gpus[slot].memory_mib;
    const int64_t granted = capacity - gpu_free_mem_[flat] - gpu_outside_mem_[flat];
    const int64_t outside =
        std::clamp<int64_t>(g.memory_used_mib - granted, 0, std::max<int64_t>(0, capacity - granted));
    gpu_free_mem_[flat] += gpu_outside_mem_[flat] - outside;
    gpu_outside_mem_[flat] = outside;
  }
  return Status::Ok();
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
  for (size_t m = 0; m < model_names_.size(); ++m) {
    if (std::find(models.begin(), models.end(), model_names_[m]) != models.end()) {
      mask |= ModelMask{1} << m;
    }
  }
  return mask;
}

ClusterState::ModelMask ClusterState::VendorMask(const std::vector<std::string>& vendors) const {
  if (vendors.empty()) return kAnyModel;
  ModelMask mask = 0;
  for (size_t m = 0; m < model_vendors_.size(); ++m) {
    if (std::find(vendors.begin(), vendors.end(), model_vendors_[m]) != vendors.end()) {
      mask |= ModelMask{1} << m;
    }
  }
  return mask;
}

void ClusterState::SetExclusiveVendors(std::vector<std::string> vendors) {
  exclusive_vendors_ = std::move(vendors);
  exclusive_models_ = 0;
  for (size_t m = 0; m < model_vendors_.size(); ++m) {
    if (std::find(exclusive_vendors_.begin(), exclusive_vendors_.end(), model_vendors_[m]) !=
        exclusive_vendors_.end()) {
      exclusive_models_ |= ModelMask{1} << m;
    }
  }
}

Status ClusterState::Bind(const Task& task, const Allocation& alloc, TaskState state,
                          int64_t now_ms) {
  if (state != TaskState::kScheduled && state != TaskState::kRunning) {
    return InvalidArgument("bind: a placed task is scheduled or running");
  }
  PlacedTask p;
  p.key = task.key;
  p.name = task.name;
  p.group = task.group;
  p.job = task.job.id;
  p.queue = InternQueue(task.queue);
  p.priority = task.priority;
  p.preemptible = task.preemptible;
  p.rdma = task.rdma_required;
  p.state = state;
  p.started_at_ms = state == TaskState::kRunning ? now_ms : 0;
  p.alloc = alloc;
  p.inflight = true;
  return Place(std::move(p), AcceptedModels(task.requests));
}

Status ClusterState::Place(PlacedTask p, ModelMask allowed) {
  if (placed_.count(p.key)) {
    return AlreadyExists("task " + p.name + " already holds resources");
  }
  const Allocation& alloc = p.alloc;
  if (alloc.node >= specs_.size()) return NotFound("bind: no node with id " + std::to_string(alloc.node));
  const NodeId n = alloc.node;
  const std::string& node_name = specs_[n].name;
  if (alloc.cpu_milli < 0 || alloc.memory_mib < 0) return InvalidArgument("bind: negative request");
  if (alloc.cpu_milli > free_cpu_[n]) return ResourceExhausted("bind: insufficient CPU on " + node_name);
  if (alloc.memory_mib > free_mem_[n]) {
    return ResourceExhausted("bind: insufficient memory on " + node_name);
  }
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
    ModelFreeOf(flat) -= alloc.gpus[i].milli;
    gpu_free_mem_[flat] -= alloc.gpus[i].memory_mib;
    gpu_milli += alloc.gpus[i].milli;
  }
  used_gpu_milli_[n] += gpu_milli;
  RecomputeUtilization(n);
  if (p.inflight) {
    inflight_cpu_[n] += alloc.cpu_milli;
    inflight_mem_[n] += alloc.memory_mib;
    inflight_gpu_milli_[n] += gpu_milli;
    UpdateEstimates(n);
  }
  if (!slots.empty()) RecomputeGpuSummary(n);
  tasks_on_[n].push_back(p.key);
  briefs_on_[n].push_back({.key = p.key,
                           .job = p.job,
                           .cpu_milli = alloc.cpu_milli,
                           .memory_mib = alloc.memory_mib,
                           .started_at_ms = p.started_at_ms,
                           .priority = p.priority,
                           .state = p.state,
                           .preemptible = p.preemptible});
  for (size_t i = 0; i < slots.size(); ++i) {
    PlacedBrief& b = briefs_on_[n].back();
    if (i == 0) {
      b.grant_milli = alloc.gpus[0].milli;
      b.grant_memory_mib = int32_t(std::min<int64_t>(alloc.gpus[0].memory_mib, INT32_MAX));
    }
    b.gpus_in_mask = b.gpus_in_mask && slots[i] < 64 && alloc.gpus[i].milli == b.grant_milli &&
                     alloc.gpus[i].memory_mib == b.grant_memory_mib;
    if (slots[i] < 64) b.gpu_mask |= uint64_t{1} << slots[i];
  }

  if (p.preemptible) {
    lowest_preemptible_[n] = std::min(lowest_preemptible_[n], p.priority);
    scheduled_preemptible_[n] += p.state == TaskState::kScheduled;
    auto& bands = bands_[n];
    auto b = std::lower_bound(bands.begin(), bands.end(), p.priority,
                              [](const PreemptibleBand& e, int32_t prio) { return e.priority < prio; });
    if (b == bands.end() || b->priority != p.priority) b = bands.insert(b, {.priority = p.priority});
    ++b->tasks;
    b->held.cpu_milli += alloc.cpu_milli;
    b->held.memory_mib += alloc.memory_mib;
    b->held.gpu_milli += gpu_milli;
    Largest& l = b->largest;
    l.cpu_milli = std::max(l.cpu_milli, alloc.cpu_milli);
    l.memory_mib = std::max(l.memory_mib, alloc.memory_mib);
    l.gpu_milli = std::max(l.gpu_milli, gpu_milli);
    l.gpus = std::max(l.gpus, int32_t(alloc.gpus.size()));
    CountPreemptible(p, +1);
  }
  if (!p.group.empty()) AddToIndex(group_index_, p.group, n, +1, p.rdma);
  if (!p.name.empty()) AddToIndex(name_index_, p.name, n, +1, p.rdma);
  const TaskKey key = p.key;
  if (p.job != 0) job_placed_[p.job].push_back(key);
  CountQueueUsage(p, +1);
  placed_.emplace(key, std::move(p));
  return Status::Ok();
}

Status ClusterState::Release(TaskKey key) {
  auto it = placed_.find(key);
  if (it == placed_.end()) return NotFound("task " + std::to_string(key) + " holds no resources");
  const PlacedTask& p = it->second;
  const NodeId n = p.alloc.node;
  free_cpu_[n] += p.alloc.cpu_milli;
  free_mem_[n] += p.alloc.memory_mib;
  int64_t gpu_milli = 0;
  for (const GpuGrant& g : p.alloc.gpus) {
    const size_t flat = gpu_begin_[n] + GpuSlot(n, g.index);
    gpu_free_milli_[flat] += g.milli;
    ModelFreeOf(flat) += g.milli;
    gpu_free_mem_[flat] += g.memory_mib;
    used_gpu_milli_[n] -= g.milli;
    gpu_milli += g.milli;
    HF_CHECK(gpu_free_milli_[flat] <= kWholeGpuMilli);
  }
  HF_CHECK(free_cpu_[n] <= total_cpu_[n] && free_mem_[n] <= total_mem_[n]);
  if (p.inflight) {
    // Not measured yet: it leaves the in-flight estimate with its resources.
    inflight_cpu_[n] -= p.alloc.cpu_milli;
    inflight_mem_[n] -= p.alloc.memory_mib;
    inflight_gpu_milli_[n] -= gpu_milli;
    HF_CHECK(inflight_cpu_[n] >= 0 && inflight_mem_[n] >= 0 && inflight_gpu_milli_[n] >= 0);
    UpdateEstimates(n);
  }
  if (!p.alloc.gpus.empty()) RecomputeGpuSummary(n);
  RecomputeUtilization(n);
  auto& on = tasks_on_[n];
  const auto at = std::find(on.begin(), on.end(), key);
  briefs_on_[n].erase(briefs_on_[n].begin() + (at - on.begin()));
  on.erase(at);
  if (!p.group.empty()) AddToIndex(group_index_, p.group, n, -1, p.rdma);
  if (!p.name.empty()) AddToIndex(name_index_, p.name, n, -1, p.rdma);
  std::optional<int32_t> relargest;  // a band whose largest to work out again
  if (p.preemptible) {
    scheduled_preemptible_[n] -= p.state == TaskState::kScheduled;
    auto& bands = bands_[n];
    auto b = std::find_if(bands.begin(), bands.end(),
                          [&](const PreemptibleBand& e) { return e.priority == p.priority; });
    HF_CHECK(b != bands.end());
    if (--b->tasks == 0) {
      bands.erase(b);
      if (p.priority == lowest_preemptible_[n]) {
        lowest_preemptible_[n] = bands.empty() ? INT32_MAX : bands.front().priority;
      }
    } else {
      b->held.cpu_milli -= p.alloc.cpu_milli;
      b->held.memory_mib -= p.alloc.memory_mib;
      b->held.gpu_milli -= gpu_milli;
      const Largest& l = b->largest;
      // The band's largest may have been this task's: worked out again
      // below, once it is gone.
      if (p.alloc.cpu_milli == l.cpu_milli || p.alloc.memory_mib == l.memory_mib ||
          gpu_milli == l.gpu_milli || int32_t(p.alloc.gpus.size()) == l.gpus) {
        relargest = p.priority;
      }
    }
    CountPreemptible(p, -1);
  }
  if (p.job != 0) {
    auto members = job_placed_.find(p.job);
    auto& keys = members->second;
    keys.erase(std::find(keys.begin(), keys.end(), key));
    if (keys.empty()) job_placed_.erase(members);
  }
  CountQueueUsage(p, -1);
  placed_.erase(it);
  if (relargest) {
    for (PreemptibleBand& b : bands_[n]) {
      if (b.priority == *relargest) RecomputeLargest(n, b);
    }
  }
  return Status::Ok();
}

Status ClusterState::Restore(const PlacedTask& placed) { return Place(placed, kAnyModel); }

Status ClusterState::MarkRunning(TaskKey key, int64_t now_ms) {
  auto it = placed_.find(key);
  if (it == placed_.end()) return NotFound("task " + std::to_string(key) + " is not placed");
  PlacedTask& p = it->second;
  if (p.preemptible && p.state == TaskState::kScheduled) {
    --scheduled_preemptible_[p.alloc.node];
    --scheduled_preemptible_total_;
  }
  p.state = TaskState::kRunning;
  p.started_at_ms = now_ms;
  const auto& on = tasks_on_[p.alloc.node];
  PlacedBrief& b = briefs_on_[p.alloc.node][std::find(on.begin(), on.end(), key) - on.begin()];
  b.state = p.state;
  b.started_at_ms = now_ms;
  return Status::Ok();
}

uint32_t ClusterState::QueueId(std::string_view name) const {
  auto it = queue_ids_.find(std::string(name));
  return it == queue_ids_.end() ? kNoQueue : it->second;
}

uint32_t ClusterState::InternQueue(std::string_view name) {
  auto [it, added] = queue_ids_.try_emplace(std::string(name), uint32_t(queue_names_.size()));
  if (added) {
    queue_names_.emplace_back(name);
    queue_usage_.emplace_back();
  }
  return it->second;
}

QueueUsage ClusterState::UsageOf(const PlacedTask& p) const {
  QueueUsage u;
  u.cpu_milli = p.alloc.cpu_milli;
  u.memory_mib = p.alloc.memory_mib;
  const NodeId n = p.alloc.node;
  for (const GpuGrant& g : p.alloc.gpus) {
    const ModelMask bit = gpu_model_bit_[gpu_begin_[n] + size_t(GpuSlot(n, g.index))];
    u.gpu_milli[size_t(std::countr_zero(bit))] += g.milli;
  }
  return u;
}

void ClusterState::CountQueueUsage(const PlacedTask& p, int sign) {
  QueueUsage& q = queue_usage_.at(p.queue);
  q.cpu_milli += sign * p.alloc.cpu_milli;
  q.memory_mib += sign * p.alloc.memory_mib;
  const NodeId n = p.alloc.node;
  for (const GpuGrant& g : p.alloc.gpus) {
    const ModelMask bit = gpu_model_bit_[gpu_begin_[n] + size_t(GpuSlot(n, g.index))];
    q.gpu_milli[size_t(std::countr_zero(bit))] += sign * g.milli;
  }
}

void ClusterState::ReserveTaskMaps() {
  const size_t want = specs_.size() * kReservedTasksPerNode;
  if (want <= reserved_tasks_) return;
  reserved_tasks_ = std::max(want, 2 * reserved_tasks_);
  placed_.reserve(reserved_tasks_);
  name_index_.reserve(reserved_tasks_);
  group_index_.reserve(reserved_tasks_);
}

void ClusterState::RecomputeLargest(NodeId n, PreemptibleBand& band) {
  Largest l;
  for (TaskKey k : tasks_on_[n]) {
    const PlacedTask& p = placed_.at(k);
    if (!p.preemptible || p.priority != band.priority) continue;
    int64_t gpu_milli = 0;
    for (const GpuGrant& g : p.alloc.gpus) gpu_milli += g.milli;
    l.cpu_milli = std::max(l.cpu_milli, p.alloc.cpu_milli);
    l.memory_mib = std::max(l.memory_mib, p.alloc.memory_mib);
    l.gpu_milli = std::max(l.gpu_milli, gpu_milli);
    l.gpus = std::max(l.gpus, int32_t(p.alloc.gpus.size()));
  }
  band.largest = l;
}

void ClusterState::CountPreemptible(const PlacedTask& p, int sign) {
  scheduled_preemptible_total_ += sign * (p.state == TaskState::kScheduled);
  auto& v = preemptible_by_priority_;
  auto it = std::lower_bound(v.begin(), v.end(), p.priority,
                             [](const auto& e, int32_t prio) { return e.first < prio; });
  if (it == v.end() || it->first != p.priority) it = v.insert(it, {p.priority, 0});
  it->second += sign;
  HF_CHECK(it->second >= 0);
  if (it->second == 0) v.erase(it);
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

std::vector<TaskKey> ClusterState::PlacedMembers(uint64_t job) const {
  auto it = job_placed_.find(job);
  if (job == 0 || it == job_placed_.end()) return {};
  std::vector<TaskKey> out = it->second;
  std::sort(out.begin(), out.end());
  return out;
}

size_t ClusterState::PlacedMemberCount(uint64_t job) const {
  auto it = job_placed_.find(job);
  return job == 0 || it == job_placed_.end() ? 0 : it->second.size();
}

}  // namespace hf
