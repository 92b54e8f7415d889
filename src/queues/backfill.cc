#include "queues/backfill.h"

#include <algorithm>
#include <climits>
#include <tuple>
#include <utility>

namespace hf::queues {
namespace {

// Members of shape `m` that fit in the given room (need at most: a cap).
int32_t Hostable(int64_t cpu, int64_t mem, int64_t slots, const Requests& m, int32_t cap) {
  int64_t k = cap;
  if (m.cpu_milli > 0) k = std::min(k, std::max<int64_t>(0, cpu) / m.cpu_milli);
  if (m.memory_mib > 0) k = std::min(k, std::max<int64_t>(0, mem) / m.memory_mib);
  if (m.gpu > 0) k = std::min(k, std::max<int64_t>(0, slots) / m.gpu);
  return static_cast<int32_t>(k);
}

// GPU shares of `member` that a grant of `milli` on one GPU takes away.
int64_t SlotsOf(int32_t milli, const Requests& member) {
  if (member.gpu == 0 || member.gpu_milli <= 0) return 0;
  return (milli + member.gpu_milli - 1) / member.gpu_milli;
}

struct Snapshot {
  int64_t t;
  int64_t cpu, mem, slots;
  int32_t members;
};

}  // namespace

std::optional<Reservation> PlanReservation(const ClusterState& c, const Task& task,
                                           const Requests& member, int32_t need, int64_t now_ms,
                                           const EndOf& end_of) {
  if (need <= 0) return std::nullopt;
  const ClusterState::ModelMask allowed = c.AllowedModels(member);
  // Per node, its room as its tasks end (only the moments it can host more).
  std::vector<std::vector<Snapshot>> steps(c.node_count());
  struct Event {
    int64_t t;
    NodeId node;
    int32_t more;
  };
  std::vector<Event> events;
  int64_t total = 0;
  std::vector<std::pair<int64_t, const PlacedTask*>> ending;
  std::vector<int32_t> free_milli;
  for (NodeId n = 0; n < c.node_count(); ++n) {
    if (!c.schedulable(n)) continue;
    if (member.gpu > 0 && !(c.model_mask(n) & allowed)) continue;
    const auto bits = c.gpu_model_bits(n);
    const auto milli = c.gpu_free_milli(n);
    free_milli.assign(milli.begin(), milli.end());
    const auto slots = [&] {
      int64_t s = 0;
      if (member.gpu == 0) return s;
      for (size_t i = 0; i < free_milli.size(); ++i) {
        if (bits[i] & allowed) s += free_milli[i] / member.gpu_milli;
      }
      return s;
    };
    int64_t cpu = c.free_cpu(n), mem = c.free_memory(n);
    int32_t k = Hostable(cpu, mem, slots(), member, need);
    steps[n].push_back({now_ms, cpu, mem, slots(), k});
    total += k;
    ending.clear();
    for (TaskKey key : c.TasksOn(n)) {
      const PlacedTask* p = c.FindPlaced(key);
      const int64_t end = end_of(*p);
      if (end != INT64_MAX) ending.emplace_back(std::max(end, now_ms), p);
    }
    if (need == 1) {
      // A placed task that holds enough for it by itself: its end makes
      // room, whatever else takes the room free now, and no reservation is
      // due.
      for (const auto& [end, p] : ending) {
        int64_t s = 0;
        for (const GpuGrant& g : p->alloc.gpus) {
          const int32_t slot = c.GpuSlot(n, g.index);
          if (member.gpu > 0 && slot >= 0 && (bits[size_t(slot)] & allowed)) {
            s += g.milli / member.gpu_milli;
          }
        }
        if (Hostable(p->alloc.cpu_milli, p->alloc.memory_mib, s, member, 1) >= 1) {
          return std::nullopt;
        }
      }
    }
    std::sort(ending.begin(), ending.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < ending.size();) {
      const int64_t t = ending[i].first;
      for (; i < ending.size() && ending[i].first == t; ++i) {
        const PlacedTask* p = ending[i].second;
        cpu += p->alloc.cpu_milli;
        mem += p->alloc.memory_mib;
        for (const GpuGrant& g : p->alloc.gpus) {
          const int32_t slot = c.GpuSlot(n, g.index);
          if (slot >= 0) free_milli[size_t(slot)] += g.milli;
        }
      }
      const int32_t now_k = Hostable(cpu, mem, slots(), member, need);
      steps[n].push_back({t, cpu, mem, slots(), now_k});
      if (now_k > k) events.push_back({t, n, now_k - k});
      k = now_k;
    }
  }
  int64_t start = now_ms;
  if (total < need) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return std::tie(a.t, a.node) < std::tie(b.t, b.node);
    });
    bool found = false;
    for (const Event& e : events) {
      total += e.more;
      if (total >= need) {
        start = e.t;
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  Reservation r;
  r.task = task.key;
  r.job = task.job.id;
  r.priority = task.priority;
  r.start_ms = start;
  r.member = member;
  std::vector<Reservation::Hold> candidates;
  for (NodeId n = 0; n < c.node_count(); ++n) {
    const Snapshot* at = nullptr;
    for (const Snapshot& s : steps[n]) {
      if (s.t <= start) at = &s;
    }
    if (at && at->members > 0) {
      candidates.push_back({n, at->members, at->cpu, at->mem, at->slots});
    }
  }
  // Fewest nodes: those that host the most first, then the lowest id.
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.members != b.members ? a.members > b.members : a.node < b.node;
  });
  int32_t left = need;
  for (Reservation::Hold h : candidates) {
    if (left <= 0) break;
    h.members = std::min(h.members, left);
    left -= h.members;
    r.holds.push_back(h);
  }
  return r;
}

GangNeed NeedOf(const Requests& first, const std::vector<const Requests*>& waiting,
                int32_t min_available, int32_t placed) {
  GangNeed g{first, 1};
  if (waiting.empty()) return g;
  for (const Requests* r : waiting) {
    g.member.cpu_milli = std::max(g.member.cpu_milli, r->cpu_milli);
    g.member.memory_mib = std::max(g.member.memory_mib, r->memory_mib);
    g.member.gpu = std::max(g.member.gpu, r->gpu);
    g.member.gpu_milli = std::max(g.member.gpu_milli, r->gpu_milli);
  }
  g.need = std::min(int32_t(waiting.size()), std::max(1, min_available - placed));
  return g;
}

void HeldAgainst(const Reservation& r, const Requests& req, int64_t end_ms,
                 std::vector<NodeId>& out) {
  if (end_ms <= r.start_ms) return;  // gone before the reservation starts
  const int64_t take = int64_t{req.gpu} * SlotsOf(req.gpu_milli, r.member);
  for (const Reservation::Hold& h : r.holds) {
    if (Hostable(h.cpu_milli - req.cpu_milli, h.memory_mib - req.memory_mib, h.gpu_slots - take,
                 r.member, h.members) < h.members) {
      out.push_back(h.node);
    }
  }
}

void Charge(Reservation& r, const Allocation& alloc, int64_t end_ms) {
  if (end_ms <= r.start_ms) return;
  for (Reservation::Hold& h : r.holds) {
    if (h.node != alloc.node) continue;
    h.cpu_milli -= alloc.cpu_milli;
    h.memory_mib -= alloc.memory_mib;
    for (const GpuGrant& g : alloc.gpus) h.gpu_slots -= SlotsOf(g.milli, r.member);
  }
}

}  // namespace hf::queues
