// Test-only builders for nodes, tasks and allocations, shared by the unit
// tests of every layer (core, framework, plugins, scheduler, server). Nothing
// outside a *_test.cc includes this folder.
#ifndef HF_CORE_TESTING_NODES_H_
#define HF_CORE_TESTING_NODES_H_

#include <string>
#include <vector>

#include "core/model.h"

namespace hf::testing {

// A node with `gpus` GPUs of `model`; GPU i sits on PCIe switch and NVLink
// domain i / 4 and NUMA node i / 4.
inline NodeSpec Node(const std::string& name, int64_t cpu_milli, int64_t memory_mib, int gpus = 0,
                     const std::string& model = "A100", int64_t gpu_memory_mib = 81920) {
  NodeSpec s;
  s.name = name;
  s.cpu_milli = cpu_milli;
  s.memory_mib = memory_mib;
  for (int i = 0; i < gpus; ++i) {
    s.gpus.push_back({i, "", model, "nvidia", gpu_memory_mib, i / 4, i / 4, i / 4});
  }
  return s;
}

inline Task MakeTask(TaskKey key, int64_t cpu_milli, int64_t memory_mib, int gpu = 0,
                     int gpu_milli = kWholeGpuMilli) {
  Task t;
  t.key = key;
  t.name = "task-" + std::to_string(key);
  t.requests.cpu_milli = cpu_milli;
  t.requests.memory_mib = memory_mib;
  t.requests.gpu = gpu;
  t.requests.gpu_milli = gpu_milli;
  return t;
}

// An allocation of exactly what `t` asks for, on `node`, with these GPUs.
inline Allocation AllocFor(const Task& t, NodeId node, std::vector<GpuGrant> gpus = {}) {
  Allocation a;
  a.node = node;
  a.cpu_milli = t.requests.cpu_milli;
  a.memory_mib = t.requests.memory_mib;
  a.gpus = std::move(gpus);
  return a;
}

}  // namespace hf::testing

#endif  // HF_CORE_TESTING_NODES_H_
