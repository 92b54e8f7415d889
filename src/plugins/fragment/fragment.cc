#include "plugins/fragment/fragment.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "core/fit.h"
#include "core/json_fields.h"

namespace hf::plugins {

using nlohmann::json;

namespace {

Status ReadShape(const json& j, const std::string& path, Fragment::Shape& s) {
  using namespace json_fields;  // NOLINT: the field readers
  HF_RETURN_IF_ERROR(RequireObject(j, path));
  HF_RETURN_IF_ERROR(CheckKeys(j, path, {"gpu", "gpu_milli", "cpu_milli", "memory_mib", "gpu_models",
                                         "gpu_vendors", "weight"}));
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "gpu") {
      HF_RETURN_IF_ERROR(ReadInt(v, f, 1, 1024, s.gpus));
    } else if (key == "gpu_milli") {
      HF_RETURN_IF_ERROR(ReadInt(v, f, 1, kWholeGpuMilli, s.milli));
    } else if (key == "cpu_milli") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, s.cpu_milli));
    } else if (key == "memory_mib") {
      HF_RETURN_IF_ERROR(ReadQuantity(v, f, s.memory_mib));
    } else if (key == "gpu_models") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, kMaxGpuModels, s.gpu_models));
    } else if (key == "gpu_vendors") {
      HF_RETURN_IF_ERROR(ReadStringList(v, f, false, kMaxGpuVendors, s.gpu_vendors));
      for (size_t i = 0; i < s.gpu_vendors.size(); ++i) {
        if (!IsVendorName(s.gpu_vendors[i])) {
          return InvalidArgument(f + "[" + std::to_string(i) + "] must be a vendor name");
        }
      }
    } else if (key == "weight") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
        return InvalidArgument(f + " must be a number > 0");
      }
      s.weight = v.get<double>();
    }
  }
  if (s.weight <= 0) return InvalidArgument(Field(path, "weight") + " is required");
  return Status::Ok();
}

}  // namespace

Status Fragment::Configure(const framework::PluginArgs& args) {
  std::vector<Shape> shapes;
  double half_life = 2000;
  if (const auto it = args.config.find("workload"); it != args.config.end()) {
    if (!it->is_array() || it->size() > kMaxShapes) {
      return InvalidArgument("plugins.fragment.workload must be a list of at most " +
                             std::to_string(kMaxShapes) + " task shapes");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      Shape s;
      HF_RETURN_IF_ERROR(ReadShape((*it)[i], "plugins.fragment.workload[" + std::to_string(i) + "]", s));
      shapes.push_back(std::move(s));
    }
  }
  double resolution = kDefaultResolution;
  if (const auto it = args.config.find("resolution"); it != args.config.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 1e-3 ||
        it->get<double>() > 1000) {
      return InvalidArgument("plugins.fragment.resolution must be a number of milli-GPUs in [0.001, 1000]");
    }
    resolution = it->get<double>();
  }
  double scarcity = kDefaultScarcity;
  if (const auto it = args.config.find("scarcity"); it != args.config.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 ||
        it->get<double>() > 1000) {
      return InvalidArgument("plugins.fragment.scarcity must be a number in [0, 1000] (0: off)");
    }
    scarcity = it->get<double>();
  }
  if (const auto it = args.config.find("half_life"); it != args.config.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 1 ||
        it->get<double>() > 1e9) {
      return InvalidArgument("plugins.fragment.half_life must be a number of arrivals in [1, 1e9]");
    }
    half_life = it->get<double>();
  }
  configured_ = std::move(shapes);
  half_life_ = half_life;
  resolution_ = resolution;
  scarcity_ = scarcity;
  prepared_refresh_ = ~uint64_t{0};
  return Status::Ok();
}

void Fragment::Observe(const Task& task) {
  if (!configured_.empty() || task.requests.gpu == 0) return;
  if (!seen_.insert(task.key).second) return;  // a retry of a pending task
  if (seen_.size() > 1'000'000) seen_.clear();  // bounded; a rare double count is harmless
  const Requests& r = task.requests;
  Shape s{.gpus = r.gpu, .milli = r.gpu_milli, .cpu_milli = r.cpu_milli, .memory_mib = r.memory_mib,
          .gpu_models = r.gpu_models, .gpu_vendors = r.gpu_vendors};
  // Exponential decay: each arrival weighs 2^(1/half_life) times the one
  // before; the weights are rescaled before they overflow.
  learned_[s.key()] += gain_;
  gain_ *= std::exp2(1.0 / half_life_);
  if (gain_ > 1e100) {
    for (auto& [key, w] : learned_) w /= gain_;
    std::erase_if(learned_, [](const auto& e) { return e.second == 0; });  // faded to nothing
    gain_ = 1;
  }
  ++arrivals_;
  // Bounded: past 4 x kMaxShapes shapes, the rarest go.
  if (learned_.size() > 4 * kMaxShapes) {
    std::vector<double> weights;
    for (const auto& [key, w] : learned_) weights.push_back(w);
    std::nth_element(weights.begin(), weights.begin() + ptrdiff_t(2 * kMaxShapes), weights.end(),
                     std::greater<>());
    const double keep = weights[2 * kMaxShapes];
    std::erase_if(learned_, [keep](const auto& e) { return e.second < keep; });
  }
}

std::vector<Fragment::Shape> Fragment::Workload() const {
  if (!configured_.empty()) return configured_;
  std::vector<Shape> out;
  for (const auto& [key, w] : learned_) {
    Shape s;
    std::tie(s.gpus, s.milli, s.cpu_milli, s.memory_mib, s.gpu_models, s.gpu_vendors) = key;
    s.weight = w;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const Shape& a, const Shape& b) { return a.weight > b.weight; });
  if (out.size() > kMaxShapes) out.resize(kMaxShapes);
  return out;
}

void Fragment::Prepare(const ClusterState& cluster) const {
  // The learned workload is looked at again as the arrivals double (1, 2,
  // 4, ...) up to kRefresh, then every kRefresh, not at each one, and taken
  // only when it moved: a new workload empties the memo, and a stationary
  // one barely moves (total variation under kDrift).
  const uint64_t refresh = !configured_.empty()   ? 0
                           : arrivals_ < kRefresh ? uint64_t(std::bit_width(arrivals_))
                                                  : kRefresh + arrivals_ / kRefresh;
  // Shares are refused the exclusive vendors' models (AllowedModels): a
  // change of those is a change of every shape's models.
  const bool same_cluster = prepared_version_ == cluster.nodes_version() &&
                            prepared_exclusive_ == cluster.exclusive_vendors();
  if (same_cluster && prepared_refresh_ == refresh) return;
  std::vector<Shape> next = Workload();
  if (same_cluster && configured_.empty() && !active_.empty()) {
    const auto shares = [](const std::vector<Shape>& w) {
      std::map<Shape::Key, double> out;
      double total = 0;
      for (const Shape& s : w) total += s.weight;
      for (const Shape& s : w) out[s.key()] += total > 0 ? s.weight / total : 0;
      return out;
    };
    std::map<Shape::Key, double> a = shares(active_), b = shares(next);
    double moved = 0;
    for (const auto& [key, w] : a) moved += std::abs(w - (b.contains(key) ? b.at(key) : 0));
    for (const auto& [key, w] : b) moved += a.contains(key) ? 0 : w;
    prepared_refresh_ = refresh;
    if (moved / 2 < kDrift) return;
  }
  active_ = std::move(next);
  prepared_version_ = cluster.nodes_version();
  prepared_exclusive_ = cluster.exclusive_vendors();
  prepared_refresh_ = refresh;
  shapes_.clear();
  cpu_steps_.clear();
  memory_steps_.clear();
  memo_.clear();
  deltas_.clear();
  double total = 0;
  for (const Shape& s : active_) total += s.weight;
  for (const Shape& s : active_) {
    Requests r;
    r.gpu = s.gpus;
    r.gpu_milli = s.milli;
    r.gpu_models = s.gpu_models;
    r.gpu_vendors = s.gpu_vendors;
    const double share = total > 0 ? s.weight / total : 0;
    shapes_.push_back({s.gpus, s.milli, s.cpu_milli, s.memory_mib, cluster.AllowedModels(r), share});
    cpu_steps_.push_back(s.cpu_milli);
    memory_steps_.push_back(s.memory_mib);
  }
  // Shapes that differ only in CPU and memory share their GPU part's count
  // of usable GPUs: grouped, it is worked out once per group.
  std::stable_sort(shapes_.begin(), shapes_.end(), [](const Resolved& x, const Resolved& y) {
    return std::tie(x.gpus, x.milli, x.models) < std::tie(y.gpus, y.milli, y.models);
  });
  groups_.clear();
  for (size_t i = 0; i < shapes_.size(); ++i) {
    if (i == 0 || std::tie(shapes_[i].gpus, shapes_[i].milli, shapes_[i].models) !=
                      std::tie(shapes_[i - 1].gpus, shapes_[i - 1].milli, shapes_[i - 1].models)) {
      groups_.push_back(i);
    }
  }
  groups_.push_back(shapes_.size());
  for (auto* steps : {&cpu_steps_, &memory_steps_}) {
    std::sort(steps->begin(), steps->end());
    steps->erase(std::unique(steps->begin(), steps->end()), steps->end());
  }
  // The model-limited shapes' demand, by the set of models they accept
  // among those the cluster has.
  ClusterState::ModelMask present = 0;
  const ClusterState::Arrays a = cluster.arrays();
  for (NodeId n = 0; n < NodeId(cluster.node_count()); ++n) present |= a.model_mask[n];
  std::map<ClusterState::ModelMask, double> limited;
  double demand = 0;
  for (const Resolved& m : shapes_) demand += m.weight * m.gpus * m.milli;
  for (const Resolved& m : shapes_) {
    const ClusterState::ModelMask accepted = m.models & present;
    if (accepted != present && demand > 0) {
      limited[accepted] += m.weight * m.gpus * m.milli / demand;
    }
  }
  limited_.assign(limited.begin(), limited.end());
}

std::vector<double> Fragment::ModelPressure(const ClusterState& cluster) const {
  Prepare(cluster);
  if (limited_.empty()) return {};
  std::vector<double> pressure(cluster.model_count(), 0.0);
  int64_t free_total = 0;
  for (size_t b = 0; b < pressure.size(); ++b) free_total += cluster.model_free_milli(b);
  for (const auto& [models, share] : limited_) {
    int64_t free = 0;
    for (size_t b = 0; b < pressure.size(); ++b) {
      if (models >> b & 1) free += cluster.model_free_milli(b);
    }
    const double p = free_total <= 0 || share * double(free_total) >= kMaxPressure * double(free)
                         ? kMaxPressure
                         : share * double(free_total) / double(free);
    for (size_t b = 0; b < pressure.size(); ++b) {
      if (models >> b & 1) pressure[b] += p;
    }
  }
  return pressure;
}

namespace {

static_assert(Fragment::kFreeTerm * double(json_fields::kMaxGpusPerNode) * kWholeGpuMilli < 1 &&
              Fragment::kFullTerm < Fragment::kFreeTerm);

constexpr uint16_t kMilliMask = 0x3ff;

// The model bit index of a packed GPU entry, as a mask.
ClusterState::ModelMask BitOf(uint16_t packed) { return ClusterState::ModelMask{1} << (packed >> 10); }

void SortGpus(Fragment::Sig& sig) {
  // Insertion sort: a node has a handful of GPUs.
  for (uint32_t i = 1; i < sig.count; ++i) {
    const uint16_t v = sig.gpus[i];
    uint32_t j = i;
    for (; j > 0 && sig.gpus[j - 1] > v; --j) sig.gpus[j] = sig.gpus[j - 1];
    sig.gpus[j] = v;
  }
}

// The order in which F takes a node's GPUs: by model bit, then free milli
// (the packed order), then slot. Bind follows it.
struct TakesBefore {
  const GpuFreeView& view;
  bool operator()(size_t x, size_t y) const {
    return std::tuple(std::countr_zero(view.model_bit[x]), view.milli[x], x) <
           std::tuple(std::countr_zero(view.model_bit[y]), view.milli[y], y);
  }
};

// All the node's slots in that order.
std::vector<size_t> TakeOrder(const GpuFreeView& view) {
  std::vector<size_t> order(view.milli.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), TakesBefore{view});
  return order;
}

// The first `count` slots of that order that take a share of `r`; empty
// when fewer fit.
std::vector<size_t> FirstToTake(const GpuFreeView& view, const Requests& r,
                                ClusterState::ModelMask allowed, size_t count) {
  if (count == 0) return {};
  std::vector<size_t> fit;
  for (size_t i = 0; i < view.milli.size(); ++i) {
    if (GpuSlotFits(view, i, r, allowed)) fit.push_back(i);
  }
  if (fit.size() < count) return {};
  std::partial_sort(fit.begin(), fit.begin() + ptrdiff_t(count), fit.end(), TakesBefore{view});
  fit.resize(count);
  return fit;
}

}  // namespace

size_t Fragment::SigHash::operator()(const Sig& s) const {
  uint64_t h = (uint64_t(s.cpu_rank) << 40) ^ (uint64_t(s.memory_rank) << 20) ^ s.count;
  for (uint32_t i = 0; i < s.count; i += 4) {
    uint64_t w = 0;
    for (uint32_t k = i; k < std::min<uint32_t>(i + 4, s.count); ++k) w = (w << 16) | s.gpus[k];
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  return size_t(h);
}

size_t Fragment::DeltaHash::operator()(const DeltaKey& k) const {
  uint64_t h = SigHash()(k.before);
  for (uint64_t v : {uint64_t(k.gpus) << 32 | uint32_t(k.milli),
                     uint64_t(k.cpu_rank_after) << 32 | k.memory_rank_after, uint64_t(k.allowed)}) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  return size_t(h);
}

Fragment::Sig Fragment::SigOf(int64_t free_cpu, int64_t free_memory) const {
  Sig sig;
  sig.cpu_rank = uint32_t(std::upper_bound(cpu_steps_.begin(), cpu_steps_.end(), free_cpu) -
                          cpu_steps_.begin());
  sig.memory_rank = uint32_t(std::upper_bound(memory_steps_.begin(), memory_steps_.end(), free_memory) -
                             memory_steps_.begin());
  return sig;
}

double Fragment::ExpectedUncached(const Sig& sig) const {
  int64_t free_total = 0;
  for (uint32_t i = 0; i < sig.count; ++i) free_total += sig.gpus[i] & kMilliMask;
  // The largest CPU and memory thresholds the node passes (ranks count them).
  const int64_t cpu = sig.cpu_rank > 0 ? cpu_steps_[sig.cpu_rank - 1] : -1;
  const int64_t memory = sig.memory_rank > 0 ? memory_steps_[sig.memory_rank - 1] : -1;
  double f = 0;
  for (size_t g = 0; g + 1 < groups_.size(); ++g) {
    const Resolved& part = shapes_[groups_[g]];
    int32_t room = 0;
    int64_t unusable = 0;
    for (uint32_t i = 0; i < sig.count; ++i) {
      const int32_t milli = sig.gpus[i] & kMilliMask;
      if ((BitOf(sig.gpus[i]) & part.models) != 0 && milli >= part.milli) {
        ++room;
      } else {
        unusable += milli;
      }
    }
    for (size_t s = groups_[g]; s < groups_[g + 1]; ++s) {
      const Resolved& m = shapes_[s];
      const bool fits = room >= m.gpus && cpu >= m.cpu_milli && memory >= m.memory_mib;
      f += m.weight / m.gpus * double(fits ? unusable : free_total);
    }
  }
  return f;
}

double Fragment::ExpectedOf(const Sig& sig) const {
  if (auto it = memo_.find(sig); it != memo_.end()) return it->second;
  const double f = ExpectedUncached(sig);
  if (memo_.size() > 1'000'000) memo_.clear();  // bounded
  memo_.emplace(sig, f);
  return f;
}

Fragment::Counts Fragment::CountsOf(const GpuFreeView& view) const {
  Counts c{std::vector<int32_t>(shapes_.size(), 0), std::vector<int64_t>(shapes_.size(), 0), 0};
  for (int32_t milli : view.milli) c.free_total += milli;
  for (size_t m = 0; m < shapes_.size(); ++m) {
    for (size_t i = 0; i < view.milli.size(); ++i) {
      if (Usable(shapes_[m], view.model_bit[i], view.milli[i])) {
        ++c.room[m];
      } else {
        c.unusable[m] += view.milli[i];
      }
    }
  }
  return c;
}

double Fragment::FOf(const Counts& c, const GpuFreeView& view, std::span<const size_t> taken,
                     int32_t milli, int64_t cpu, int64_t memory) const {
  double f = 0;
  for (size_t m = 0; m < shapes_.size(); ++m) {
    const Resolved& shape = shapes_[m];
    int32_t room = c.room[m];
    int64_t unusable = c.unusable[m];
    for (size_t i : taken) {
      const ClusterState::ModelMask bit = view.model_bit[i];
      const int32_t was = view.milli[i], now = was - milli;
      room += int32_t(Usable(shape, bit, now)) - int32_t(Usable(shape, bit, was));
      unusable += (Usable(shape, bit, now) ? 0 : now) - (Usable(shape, bit, was) ? 0 : was);
    }
    const bool fits = room >= shape.gpus && cpu >= shape.cpu_milli && memory >= shape.memory_mib;
    f += shape.weight / shape.gpus *
         double(fits ? unusable : c.free_total - int64_t(taken.size()) * milli);
  }
  return f;
}

double Fragment::ExpectedUncached(const NodeState& s) const {
  std::vector<ClusterState::ModelMask> bits;
  std::vector<int32_t> milli;
  for (const auto& [bit, free] : s.gpus) {
    bits.push_back(bit);
    milli.push_back(free);
  }
  const GpuFreeView view{milli, {}, bits};
  return FOf(CountsOf(view), view, {}, 0, s.free_cpu, s.free_memory);
}

double Fragment::Expected(const ClusterState& cluster, const NodeState& s) const {
  Prepare(cluster);
  if (shapes_.empty()) return 0;
  if (s.gpus.size() > kMaxSigGpus) return ExpectedUncached(s);
  Sig sig = SigOf(s.free_cpu, s.free_memory);
  for (const auto& [bit, milli] : s.gpus) {
    sig.gpus[sig.count++] = uint16_t((std::countr_zero(bit) << 10) | std::clamp(milli, 0, 1000));
  }
  SortGpus(sig);
  return ExpectedOf(sig);
}

std::optional<Fragment::Choice> Fragment::Best(const Task& task, const ClusterState& cluster,
                                               NodeId n, ClusterState::ModelMask allowed) const {
  const Requests& r = task.requests;
  const ClusterState::Arrays a = cluster.arrays();
  const std::span<const int32_t> free = cluster.gpu_free_milli(n);
  const std::span<const ClusterState::ModelMask> bits = cluster.gpu_model_bits(n);
  const GpuFreeView view{free, cluster.gpu_free_memory(n), bits};
  if (free.size() > kMaxSigGpus) return BestUnpacked(r, cluster, n, allowed);
  Prepare(cluster);
  // The node before, and after the task's CPU and memory.
  Sig before = SigOf(a.free_cpu[n], a.free_memory[n]);
  std::array<uint16_t, kMaxSigGpus> packed{};
  for (size_t i = 0; i < free.size(); ++i) {
    packed[i] = uint16_t((std::countr_zero(bits[i]) << 10) | std::clamp(free[i], 0, 1000));
  }
  before.count = uint32_t(free.size());
  std::copy(packed.begin(), packed.end(), before.gpus.begin());
  SortGpus(before);
  const Sig after = SigOf(a.free_cpu[n] - r.cpu_milli, a.free_memory[n] - r.memory_mib);
  // The increase depends on the state before, the CPU and memory thresholds
  // the node passes after, and the task's GPUs: memoised by those, working
  // on the GPUs in sorted order so that two nodes of one state choose alike.
  // GPU memory is not in the state: a request for it is worked out each
  // time, on the node's own slots taken in the same order.
  std::pair<double, uint16_t> result;
  if (r.gpu_memory_mib == 0) {
    const DeltaKey key{before, after.cpu_rank, after.memory_rank, r.gpu, r.gpu_milli, allowed};
    if (auto it = deltas_.find(key); it != deltas_.end()) {
      result = it->second;
    } else {
      std::array<uint16_t, kMaxSigGpus> sorted{};
      std::copy(before.gpus.begin(), before.gpus.end(), sorted.begin());
      result = Place(r, before, after, sorted, [&](size_t i) {
        return (BitOf(sorted[i]) & allowed) != 0 && int32_t(sorted[i] & kMilliMask) >= r.gpu_milli;
      });
      if (deltas_.size() > 1'000'000) deltas_.clear();  // bounded
      deltas_.emplace(key, result);
    }
  } else {
    const std::vector<size_t> order = TakeOrder(view);
    std::array<uint16_t, kMaxSigGpus> in_order{};
    for (size_t k = 0; k < order.size(); ++k) in_order[k] = packed[order[k]];
    result = Place(r, before, after, in_order,
                   [&](size_t k) { return GpuSlotFits(view, order[k], r, allowed); });
  }
  if (result.second == kNoFit) return std::nullopt;
  Choice c{result.first, -1};
  if (result.second != kNoGpu) {
    // The GPU of that (model, free milli) the task fits on.
    for (size_t i = 0; i < free.size() && c.slot < 0; ++i) {
      if (packed[i] == result.second && GpuSlotFits(view, i, r, allowed)) c.slot = int(i);
    }
  }
  return c;
}

std::optional<Fragment::Choice> Fragment::BestUnpacked(const Requests& r,
                                                       const ClusterState& cluster, NodeId n,
                                                       ClusterState::ModelMask allowed) const {
  // A node of many GPUs, without the memo. A placement changes the node's
  // CPU, memory and r.gpu of its GPUs, so F after it comes from the node's
  // per-shape counts adjusted for those GPUs (FOf): shapes x (GPUs +
  // choices), not shapes x GPUs per choice.
  Prepare(cluster);
  const ClusterState::Arrays a = cluster.arrays();
  const GpuFreeView view{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                         cluster.gpu_model_bits(n)};
  const Counts counts = CountsOf(view);
  const double before = FOf(counts, view, {}, 0, a.free_cpu[n], a.free_memory[n]);
  const int64_t cpu = a.free_cpu[n] - r.cpu_milli, memory = a.free_memory[n] - r.memory_mib;
  const auto f_of = [&](std::span<const size_t> taken) {
    return FOf(counts, view, taken, r.gpu_milli, cpu, memory);
  };
  if (r.gpu != 1) {
    // No GPU, or several: the first that fit in the take order.
    const std::vector<size_t> taken = FirstToTake(view, r, allowed, size_t(r.gpu));
    if (taken.size() < size_t(r.gpu)) return std::nullopt;
    return Choice{f_of(taken) - before, -1};
  }
  // One GPU: as Place chooses it, the least increase, then the fullest,
  // then the lowest model bit (the packed order), then the lowest slot.
  std::optional<Choice> best;
  for (size_t i = 0; i < view.milli.size(); ++i) {
    if (!GpuSlotFits(view, i, r, allowed)) continue;
    const size_t one[] = {i};
    const double delta = f_of(one) - before;
    const auto rank = [&](size_t slot) {
      return std::tuple(view.milli[slot], std::countr_zero(view.model_bit[slot]));
    };
    if (!best || delta < best->delta ||
        (delta == best->delta && rank(i) < rank(size_t(best->slot)))) {
      best = Choice{delta, int(i)};
    }
  }
  return best;
}

std::pair<double, uint16_t> Fragment::Place(const Requests& r, const Sig& before, Sig after,
                                             std::array<uint16_t, kMaxSigGpus> gpus,
                                             const std::function<bool(size_t)>& fits) const {
  const size_t count = before.count;
  const double f_before = ExpectedOf(before);
  after.count = uint32_t(count);
  const auto state_with = [&](const std::array<uint16_t, kMaxSigGpus>& g) {
    std::copy(g.begin(), g.end(), after.gpus.begin());
    SortGpus(after);
    return ExpectedOf(after) - f_before;
  };
  if (r.gpu == 0) return {state_with(gpus), kNoGpu};
  const auto take = [&](size_t i) { gpus[i] = uint16_t(gpus[i] - uint16_t(r.gpu_milli)); };
  if (r.gpu > 1) {
    // Several GPUs: the first ones that fit, in the packed order (Bind
    // takes the same ones).
    int left = r.gpu;
    for (size_t i = 0; i < count && left > 0; ++i) {
      if (!fits(i)) continue;
      take(i);
      --left;
    }
    if (left > 0) return {0, kNoFit};
    return {state_with(gpus), kNoGpu};
  }
  // One GPU, a share or whole: each GPU it fits on, the one that fragments
  // least (the fullest of equals, as best fit; on a node of several models,
  // the model F would rather spend). GPUs alike (same model, same free) give
  // the same state: each is tried once.
  std::optional<std::pair<double, uint16_t>> best;
  std::array<uint16_t, kMaxSigGpus> tried{};
  size_t tries = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!fits(i)) continue;
    const uint16_t was = gpus[i];
    if (std::find(tried.begin(), tried.begin() + ptrdiff_t(tries), was) != tried.begin() + ptrdiff_t(tries)) {
      continue;
    }
    tried[tries++] = was;
    take(i);
    const double delta = state_with(gpus);
    gpus[i] = was;
    if (!best || delta < best->first ||
        (delta == best->first && (was & kMilliMask) < (best->second & kMilliMask))) {
      best = std::make_pair(delta, was);
    }
  }
  return best ? *best : std::make_pair(0.0, kNoFit);
}

void Fragment::Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
                     std::span<double> scores, framework::CycleState&) const {
  const ClusterState::Arrays a = cluster.arrays();
  if (task.requests.gpu == 0) {
    // A task without GPUs: where its CPU and memory strand the least GPU
    // capacity. By the increase of F in steps of `resolution`; within a
    // step, on the node with the least free GPU capacity, then the fullest
    // GPUs. The terms stay apart: free capacity counts kFreeTerm per milli
    // (under one step for any node's GPUs), fullness at most kFullTerm,
    // under one milli's. Weighing it by the exact increase of F sends it
    // away from nodes short of CPU, onto nodes whose free GPUs then lose
    // their CPU (docs/PLUGINS.md).
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeId n = nodes[i];
      // (Best always has an answer for a task without GPUs.)
      const double delta = Best(task, cluster, n, 0).value_or(Choice{}).delta;
      const double free = double(cluster.total_gpu_milli(n) - a.used_gpu_milli[n]);
      scores[i] = -std::round(delta / resolution_) - kFreeTerm * free + kFullTerm * a.util_gpu[n];
    }
    return;
  }
  // Raw score: minus the increase of F in steps of `resolution` milli, so
  // that more is better; within a step, the node with fuller GPUs (as
  // binpack-gpu would). A node the task does not fit after all (a GPU memory
  // corner Filter let through) gets kNoScore, and 0 once normalised.
  // Less, by `scarcity` steps per unit of pressure, on a node whose models
  // (those the task accepts; the most pressed of them on a node of several)
  // limited work needs.
  const ClusterState::ModelMask allowed = cluster.AllowedModels(task.requests);
  const std::vector<double> pressure = scarcity_ > 0 ? ModelPressure(cluster) : std::vector<double>{};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeId n = nodes[i];
    const std::optional<Choice> c = Best(task, cluster, n, allowed);
    double pressed = 0;
    if (!pressure.empty()) {
      for (ClusterState::ModelMask m = a.model_mask[n] & allowed; m != 0; m &= m - 1) {
        pressed = std::max(pressed, pressure[size_t(std::countr_zero(m))]);
      }
    }
    scores[i] = c ? -std::round(c->delta / resolution_) + 0.5 * a.util_gpu[n] - scarcity_ * pressed
                  : kNoScore;
  }
}

void Fragment::NormalizeScores(std::span<double> scores) const {
  // Over the nodes the task fits; one it does not gets 0.
  double min = 0, max = 0;
  bool any = false;
  for (double s : scores) {
    if (s == kNoScore) continue;
    min = any ? std::min(min, s) : s;
    max = any ? std::max(max, s) : s;
    any = true;
  }
  for (double& s : scores) {
    s = s == kNoScore ? 0.0 : max > min ? 100.0 * (s - min) / (max - min) : 100.0;
  }
}

Status Fragment::Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
                      framework::CycleState&) const {
  const Requests& r = task.requests;
  // Several whole GPUs: Topology's choice or the default; on a node of one
  // model every choice leaves the state F scored.
  if (r.gpu == 0 || (r.gpu > 1 && r.gpu_milli >= kWholeGpuMilli) || !alloc.gpus.empty()) {
    return Status::Ok();
  }
  const ClusterState::ModelMask allowed = cluster.AllowedModels(r);
  const std::vector<GpuDevice>& gpus = cluster.spec(alloc.node).gpus;
  if (r.gpu == 1) {
    const std::optional<Choice> c = Best(task, cluster, alloc.node, allowed);
    if (!c || c->slot < 0) return Status::Ok();  // left to the default choice
    alloc.gpus.push_back({gpus[size_t(c->slot)].index, r.gpu_milli, r.gpu_memory_mib});
    return Status::Ok();
  }
  // Several shares: the GPUs F took, in its order.
  const GpuFreeView view{cluster.gpu_free_milli(alloc.node), cluster.gpu_free_memory(alloc.node),
                         cluster.gpu_model_bits(alloc.node)};
  for (size_t i : FirstToTake(view, r, allowed, size_t(r.gpu))) {
    alloc.gpus.push_back({gpus[i].index, r.gpu_milli, r.gpu_memory_mib});
  }
  return Status::Ok();
}

}  // namespace hf::plugins
