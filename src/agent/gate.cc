#include "agent/gate.h"

#include <algorithm>
#include <map>

namespace hf::agent {
namespace {

void AddUnique(std::vector<uint64_t>& v, uint64_t id) {
  if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
}

void AddUnique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

Blockers StartBlockers(const NodeSpec& node, uint64_t id, const Allocation& alloc,
                       const std::vector<LiveProcess>& live) {
  Blockers b;
  // What every live process holds, and which stopping ones hold each part.
  int64_t cpu = alloc.cpu_milli, memory = alloc.memory_mib;
  std::map<int32_t, std::pair<int64_t, int64_t>> gpu;  // index -> milli, memory
  for (const GpuGrant& g : alloc.gpus) gpu[g.index] = {g.milli, g.memory_mib};
  for (const LiveProcess& p : live) {
    if (p.id == id) {
      AddUnique(b.tasks, p.id);
      b.earlier_copy = true;
      continue;
    }
    if (!p.alloc) {
      if (p.stopping) {
        AddUnique(b.tasks, p.id);
        AddUnique(b.holds, "an allocation this agent does not know");
      }
      continue;
    }
    cpu += p.alloc->cpu_milli;
    memory += p.alloc->memory_mib;
    for (const GpuGrant& g : p.alloc->gpus) {
      auto it = gpu.find(g.index);
      if (it == gpu.end()) continue;  // a GPU the task does not use
      it->second.first += g.milli;
      it->second.second += g.memory_mib;
    }
  }
  const auto block_on = [&](auto holds_it, const std::string& what) {
    for (const LiveProcess& p : live) {
      if (!p.stopping || !p.alloc || p.id == id || !holds_it(*p.alloc)) continue;
      AddUnique(b.tasks, p.id);
      AddUnique(b.holds, what);
    }
  };
  for (const auto& [index, held] : gpu) {
    const auto dev = std::find_if(node.gpus.begin(), node.gpus.end(),
                                  [index = index](const GpuDevice& d) { return d.index == index; });
    const int64_t memory_cap = dev == node.gpus.end() ? 0 : dev->memory_mib;
    const bool milli_over = held.first > kWholeGpuMilli;
    const bool memory_over = memory_cap > 0 && held.second > memory_cap;
    if (!milli_over && !memory_over) continue;
    block_on(
        [&, index = index](const Allocation& a) {
          return std::any_of(a.gpus.begin(), a.gpus.end(), [&](const GpuGrant& g) {
            return g.index == index && ((milli_over && g.milli > 0) || (memory_over && g.memory_mib > 0));
          });
        },
        "GPU " + std::to_string(index));
  }
  if (alloc.cpu_milli > 0 && cpu > node.cpu_milli) {
    block_on([](const Allocation& a) { return a.cpu_milli > 0; }, "CPU");
  }
  if (alloc.memory_mib > 0 && memory > node.memory_mib) {
    block_on([](const Allocation& a) { return a.memory_mib > 0; }, "memory");
  }
  std::sort(b.tasks.begin(), b.tasks.end());
  return b;
}

std::string WaitingMessage(const Blockers& b) {
  if (b.empty()) return "";
  if (b.earlier_copy && b.tasks.size() == 1) return "waiting for its earlier copy to exit";
  std::string ids, holds;
  for (size_t i = 0; i < b.tasks.size(); ++i) {
    ids += (i == 0 ? "" : i + 1 == b.tasks.size() ? " and " : ", ") + std::to_string(b.tasks[i]);
  }
  for (size_t i = 0; i < b.holds.size(); ++i) {
    holds += (i == 0 ? "" : i + 1 == b.holds.size() ? " and " : ", ") + b.holds[i];
  }
  if (b.earlier_copy) holds += (holds.empty() ? "" : " and ") + std::string("an earlier copy of it");
  const bool one = b.tasks.size() == 1;
  return std::string("waiting for task") + (one ? " " : "s ") + ids + " to exit (" +
         (one ? "it holds " : "they hold ") + holds + ")";
}

}  // namespace hf::agent
