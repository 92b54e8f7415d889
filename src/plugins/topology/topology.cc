#include "plugins/topology/topology.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <limits>
#include <map>
#include <unordered_map>

#include "core/fit.h"

namespace hf::plugins {
namespace {

constexpr uint32_t kUnknown = std::numeric_limits<uint32_t>::max();
constexpr int64_t kCheckIntervalMs = 1000;
// The two parts of the score, as bits of a mark.
constexpr uint32_t kDepsBit = 1, kGroupBit = 2;

// What identifies one version of the file on disk. The modification time alone
// can miss a rewrite within the file system's time granularity; size and inode
// (an editor that renames a new file into place) catch most of those.
struct FileStamp {
  bool exists = false;
  int64_t mtime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
          int64_t{st.st_size}, uint64_t{st.st_ino}};
}

// Dense ids for names, so that positions compare as integers.
class Interner {
 public:
  uint32_t Id(const std::string& key) {
    return ids_.emplace(key, uint32_t(ids_.size())).first->second;
  }
  uint32_t size() const { return uint32_t(ids_.size()); }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace

// The configuration: where positions come from.
struct Topology::State {
  // The file at `path`, or the nodes' own fields when `path` is empty.
  // `generation` changes whenever `file` does, to a value no other
  // instance has had (a CycleState's cache may meet several frameworks).
  std::string path;
  TopologyMap file;
  uint64_t generation = 0;
  FileStamp loaded_stamp;
  int64_t last_check_ms = 0;
};

namespace {

// The score for every combination of a node's marks (index: node bits |
// rack bits << 2 | switch bits << 4 | zone bits << 6), per combination of
// the parts that apply and how the group part counts (deps_apply |
// group_apply << 1 | group_spreads << 2). With it Score is a few loads and a
// table look-up per node, without branches.
using ScoreTable = std::array<std::array<double, 256>, 8>;
const ScoreTable& Scores();

}  // namespace

// One cycle's data (CycleState), and the positions it caches from cycle to
// cycle of its CycleState.
struct Topology::Cycle final : framework::CycleState::Data {

  // Positions as interned ids. Racks and switches are named within their
  // parent, as the file nests them: rack r1 under switch s1 is not rack r1
  // under switch s2. A place is one distinct (zone, switch, rack) triple;
  // nodes that share one share a place, so there are about as many places as
  // racks, far fewer than nodes.
  struct Place {
    uint32_t rack, sw, zone;  // kUnknown where the name is empty
  };
  // The cache key. nodes_version() is unique per node set across the
  // process; the address is kept as a cheap extra guard.
  const ClusterState* cached_cluster = nullptr;
  uint64_t cached_nodes_version = 0;
  size_t cached_node_count = 0;
  uint64_t cached_generation = std::numeric_limits<uint64_t>::max();
  std::vector<Place> places;
  std::vector<uint32_t> place_of;  // per NodeId

  // This cycle's marks: which parts (kDepsBit, kGroupBit) each node, rack,
  // switch and zone belongs to, stored as epoch << 2 | bits. Entries of an
  // older epoch read as unmarked, so nothing is cleared between cycles.
  std::vector<uint32_t> node_mark, rack_mark, sw_mark, zone_mark;
  uint32_t epoch = 0;
  bool deps_apply = false, group_apply = false;
  bool group_spreads = false;  // the task's group_placement is spread
  // Per place, its rack, switch and zone bits this cycle (rack | switch << 2 |
  // zone << 4), gathered once in PreScore so that Score reads one byte.
  std::vector<uint8_t> place_bits;

  void EnsurePositions(const ClusterState& cluster, const State& config);
  void NextEpoch();
  void Mark(NodeId n, uint32_t bit);
  void GatherPlaceBits();
  uint32_t Bits(uint32_t mark) const { return mark & 3 & -uint32_t((mark >> 2) == epoch); }
  uint32_t Bits(const std::vector<uint32_t>& marks, uint32_t id) const {
    return id == kUnknown ? 0 : Bits(marks[id]);
  }
};

namespace {

ScoreTable MakeScores() {
  ScoreTable score_table;
  for (uint32_t parts = 0; parts < 8; ++parts) {
    const bool spread = parts & 4;
    for (uint32_t index = 0; index < 256; ++index) {
      double sum = 0;
      for (uint32_t bit : {kDepsBit, kGroupBit}) {
        if (!(parts & bit)) continue;
        // The closest level at which this part is marked: node, rack, switch, zone.
        double closeness = 0;
        for (uint32_t level = 0; level < 4; ++level) {
          if ((index >> (2 * level)) & bit) {
            closeness = 100.0 - 25.0 * level;
            break;
          }
        }
        // A spread group scores distance instead: away from the other
        // members (another zone 100, ... the same node 0).
        sum += bit == kGroupBit && spread ? 100.0 - closeness : closeness;
      }
      const int count = std::popcount(parts & 3);
      score_table[parts][index] = count ? sum / count : 0.0;
    }
  }
  return score_table;
}

const ScoreTable& Scores() {
  static const ScoreTable table = MakeScores();
  return table;
}

}  // namespace

void Topology::Cycle::EnsurePositions(const ClusterState& cluster, const State& config) {
  if (cached_cluster == &cluster && cached_nodes_version == cluster.nodes_version() &&
      cached_node_count == cluster.node_count() && cached_generation == config.generation) {
    return;
  }
  const TopologyMap& file = config.file;
  const size_t count = cluster.node_count();
  Interner racks, switches, zones, triples;
  places.clear();
  place_of.assign(count, 0);
  for (NodeId n = 0; n < count; ++n) {
    const NodeSpec& spec = cluster.spec(n);
    const auto it = file.find(spec.name);
    const TopologyPosition& pos = it != file.end() ? it->second : spec.topology;
    // '\0' cannot occur in YAML or JSON names, so the joined keys are unambiguous.
    const std::string switch_key = pos.zone + '\0' + pos.switch_name;
    const std::string rack_key = switch_key + '\0' + pos.rack;
    place_of[n] = triples.Id(rack_key);
    if (place_of[n] < places.size()) continue;
    places.push_back({pos.rack.empty() ? kUnknown : racks.Id(rack_key),
                      pos.switch_name.empty() ? kUnknown : switches.Id(switch_key),
                      pos.zone.empty() ? kUnknown : zones.Id(pos.zone)});
  }
  node_mark.assign(count, 0);
  rack_mark.assign(racks.size(), 0);
  sw_mark.assign(switches.size(), 0);
  zone_mark.assign(zones.size(), 0);
  place_bits.assign(places.size(), 0);
  cached_cluster = &cluster;
  cached_nodes_version = cluster.nodes_version();
  cached_node_count = count;
  cached_generation = config.generation;
}

void Topology::Cycle::NextEpoch() {
  // The epoch has 30 bits; when it runs out, clearing once makes every old
  // mark read as unmarked again.
  if (++epoch == (1u << 30)) {
    for (auto* marks : {&node_mark, &rack_mark, &sw_mark, &zone_mark}) {
      std::fill(marks->begin(), marks->end(), 0);
    }
    epoch = 1;
  }
}

void Topology::Cycle::Mark(NodeId n, uint32_t bit) {
  if (n >= place_of.size()) return;
  const auto set = [&](std::vector<uint32_t>& marks, uint32_t id) {
    if (id != kUnknown) marks[id] = Bits(marks[id]) | bit | epoch << 2;
  };
  const Place& p = places[place_of[n]];
  set(node_mark, n);
  set(rack_mark, p.rack);
  set(sw_mark, p.sw);
  set(zone_mark, p.zone);
}

void Topology::Cycle::GatherPlaceBits() {
  for (size_t i = 0; i < places.size(); ++i) {
    const Place& p = places[i];
    place_bits[i] =
        uint8_t(Bits(rack_mark, p.rack) | Bits(sw_mark, p.sw) << 2 | Bits(zone_mark, p.zone) << 4);
  }
}

Topology::Topology(const framework::PluginDeps& deps)
    : state_(std::make_shared<State>()), clock_(deps.clock) {}

Status Topology::Configure(const framework::PluginArgs& args) {
  std::string path;
  if (const auto it = args.config.find("topology_config");
      it != args.config.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidArgument(
          "plugins.topology.topology_config must be a string (a file path), got " +
          std::string(it->type_name()));
    }
    path = it->get<std::string>();
  }
  state_->path = path;
  return Reload();
}

framework::ReloadJob Topology::StartReload() {
  // What `load` reads lives here until `apply` installs it; `load` touches
  // nothing of the plugin.
  struct Read {
    std::string path;
    FileStamp stamp;
    Result<TopologyMap> file = TopologyMap{};
  };
  auto read = std::make_shared<Read>();
  read->path = state_->path;
  return {[read] {
            if (read->path.empty()) return;
            // Stamped before reading: a change made while reading is then
            // seen as a change by the next ReloadDue, never lost.
            read->stamp = StampOf(read->path);
            read->file = LoadTopologyFile(read->path);
          },
          [this, read]() -> Status {
            State& s = *state_;
            static std::atomic<uint64_t> generations{0};
            s.generation = ++generations;
            s.file.clear();
            s.loaded_stamp = read->stamp;
            s.last_check_ms = clock_ ? clock_->NowMs() : 0;
            if (read->path.empty()) return Status::Ok();
            if (!read->file.ok()) {
              // The nodes' own positions stand in meanwhile; the framework
              // leaves the plugin out while it is in status `error`.
              return Unavailable("topology_config " + read->file.status().message());
            }
            s.file = std::move(read->file).value();
            return Status::Ok();
          }};
}

Status Topology::Reload() {
  framework::ReloadJob job = StartReload();
  job.load();
  return job.apply();
}

bool Topology::ReloadDue() {
  State& s = *state_;
  if (s.path.empty() || !clock_) return false;
  const int64_t now = clock_->NowMs();
  if (now - s.last_check_ms < kCheckIntervalMs) return false;
  s.last_check_ms = now;
  return !(StampOf(s.path) == s.loaded_stamp);
}

bool Topology::PreScore(const Task& task, const ClusterState& cluster,
                        std::span<const NodeId> feasible, framework::CycleState& state) const {
  Cycle& s = state.Get<Cycle>(kCycleKey);
  s.EnsurePositions(cluster, *state_);
  s.NextEpoch();
  s.deps_apply = false;
  for (const std::string& name : task.depends_on) {
    if (name.empty()) continue;
    for (auto placed : {cluster.NameNodes(name), cluster.GroupNodes(name)}) {
      for (const NodeCount& c : placed) {
        s.Mark(c.node, kDepsBit);
        s.deps_apply = true;
      }
    }
  }
  s.group_apply = false;
  s.group_spreads = task.group_placement == GroupPlacement::kSpread;
  if (!task.group.empty()) {
    for (const NodeCount& c : cluster.GroupNodes(task.group)) {
      s.Mark(c.node, kGroupBit);
      s.group_apply = true;
    }
  }
  if (!s.deps_apply && !s.group_apply) return false;
  s.GatherPlaceBits();
  return true;
}

void Topology::Score(const Task& task, const ClusterState& cluster, std::span<const NodeId> nodes,
                     std::span<double> scores, framework::CycleState& state) const {
  const Cycle& s = state.Get<Cycle>(kCycleKey);
  const auto& table = Scores()[uint32_t(s.deps_apply) | uint32_t(s.group_apply) << 1 |
                                    uint32_t(s.group_apply && s.group_spreads) << 2];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeId n = nodes[i];
    scores[i] = table[s.Bits(s.node_mark[n]) | uint32_t{s.place_bits[s.place_of[n]]} << 2];
  }
}

namespace {

// The first `want` of `eligible` (slots, ascending) inside the one locality
// domain that can hold them and has the fewest eligible GPUs, ties to the
// lowest domain id; empty when no domain can. Unknown (-1) is no domain.
std::vector<size_t> PickInOneDomain(const std::vector<size_t>& eligible,
                                    const std::vector<GpuDevice>& gpus,
                                    int32_t GpuDevice::*domain_of, size_t want) {
  // A domain is one vendor's: a node with NVIDIA and AMD GPUs numbers each
  // vendor's fabric from 0, and no task spans two vendors' devices.
  using Key = std::pair<std::string, int32_t>;
  std::map<Key, std::pair<size_t, size_t>> count;  // key -> (eligible GPUs, its lowest slot)
  for (size_t slot : eligible) {
    if (domain_of == nullptr || gpus[slot].*domain_of >= 0) {
      auto [it, fresh] = count.try_emplace(
          Key{gpus[slot].vendor, domain_of == nullptr ? 0 : gpus[slot].*domain_of}, 0, slot);
      ++it->second.first;
    }
  }
  // The fewest that hold them all; between equals, the lowest GPUs.
  const Key* best = nullptr;
  std::pair<size_t, size_t> best_rank;
  for (const auto& [key, c] : count) {
    if (c.first >= want && (best == nullptr || c < best_rank)) {
      best = &key;
      best_rank = c;
    }
  }
  std::vector<size_t> chosen;
  if (best == nullptr) return chosen;
  for (size_t slot : eligible) {
    if (chosen.size() == want) break;
    if (gpus[slot].vendor == best->first &&
        (domain_of == nullptr || gpus[slot].*domain_of == best->second)) {
      chosen.push_back(slot);
    }
  }
  return chosen;
}

}  // namespace

bool Topology::Domains(const ClusterState& cluster, framework::CycleState& state,
                       framework::NodeDomains& out) const {
  Cycle& s = state.Get<Cycle>(kCycleKey);
  s.EnsurePositions(cluster, *state_);
  const size_t n = cluster.node_count();
  out.rack.resize(n);
  out.sw.resize(n);
  bool known = false;
  for (NodeId i = 0; i < n; ++i) {
    const Cycle::Place& p = s.places[s.place_of[i]];
    out.rack[i] = p.rack == kUnknown ? framework::NodeDomains::kNoDomain : p.rack;
    out.sw[i] = p.sw == kUnknown ? framework::NodeDomains::kNoDomain : p.sw;
    known |= p.rack != kUnknown || p.sw != kUnknown;
  }
  return known;
}

Status Topology::Bind(const Task& task, const ClusterState& cluster, Allocation& alloc,
                      framework::CycleState&) const {
  const Requests& r = task.requests;
  if (r.gpu <= 1 || r.gpu_milli != kWholeGpuMilli || !alloc.gpus.empty()) return Status::Ok();
  const NodeId n = alloc.node;
  const GpuFreeView free{cluster.gpu_free_milli(n), cluster.gpu_free_memory(n),
                         cluster.gpu_model_bits(n)};
  const ClusterState::ModelMask allowed = cluster.AllowedModels(r);
  const std::vector<GpuDevice>& gpus = cluster.spec(n).gpus;
  std::vector<size_t> eligible;
  for (size_t slot = 0; slot < gpus.size(); ++slot) {
    if (GpuSlotFits(free, slot, r, allowed)) eligible.push_back(slot);
  }
  const size_t want = size_t(r.gpu);
  // Too few: leave the choice empty and let the framework report the failure.
  if (eligible.size() < want) return Status::Ok();
  std::vector<size_t> chosen;
  // The closest domain that holds them all: fabric, PCIe switch, NUMA node,
  // then one vendor's devices anywhere on the node (nullptr).
  for (int32_t GpuDevice::*domain_of :
       {&GpuDevice::fabric_domain, &GpuDevice::pcie_switch, &GpuDevice::numa,
        static_cast<int32_t GpuDevice::*>(nullptr)}) {
    chosen = PickInOneDomain(eligible, gpus, domain_of, want);
    if (!chosen.empty()) break;
  }
  if (chosen.empty()) chosen.assign(eligible.begin(), eligible.begin() + ptrdiff_t(want));
  for (size_t slot : chosen) {
    alloc.gpus.push_back({gpus[slot].index, r.gpu_milli, r.gpu_memory_mib});
  }
  return Status::Ok();
}

}  // namespace hf::plugins
