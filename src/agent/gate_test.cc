#include "agent/gate.h"

#include <gtest/gtest.h>

namespace hf::agent {
namespace {

NodeSpec TwoGpuNode() {
  NodeSpec n;
  n.name = "n";
  n.cpu_milli = 8000;
  n.memory_mib = 16384;
  n.gpus = {{0, "", "A100", "nvidia", 40960, 0, 0, 0}, {1, "", "A100", "nvidia", 40960, 0, 0, 0}};
  return n;
}

Allocation Alloc(int64_t cpu, int64_t mem, std::vector<GpuGrant> gpus) {
  Allocation a;
  a.cpu_milli = cpu;
  a.memory_mib = mem;
  a.gpus = std::move(gpus);
  return a;
}

TEST(GateTest, Table) {
  const Allocation whole0 = Alloc(1000, 1024, {{0, 1000, 0}});
  const Allocation whole1 = Alloc(1000, 1024, {{1, 1000, 0}});
  const Allocation half0 = Alloc(1000, 1024, {{0, 500, 10000}});
  struct Row {
    const char* name;
    Allocation task;
    std::vector<LiveProcess> live;
    std::vector<uint64_t> want;
    std::string message;
  } rows[] = {
      {"a victim on the task's GPU blocks", whole0, {{7, whole0, true}}, {7},
       "waiting for task 7 to exit (it holds GPU 0)"},
      {"a victim on another GPU does not", whole0, {{7, whole1, true}}, {}, ""},
      {"a running neighbour never blocks", whole0, {{7, whole0, false}}, {}, ""},
      {"shares that fit beside a stopping one do not wait", half0, {{7, half0, true}}, {}, ""},
      {"shares that pass 1000 milli wait", half0, {{7, Alloc(0, 0, {{0, 600, 0}}), true}}, {7},
       "waiting for task 7 to exit (it holds GPU 0)"},
      {"GPU memory that would pass the GPU's waits", Alloc(0, 0, {{0, 100, 30000}}),
       {{7, Alloc(0, 0, {{0, 100, 20000}}), true}}, {7},
       "waiting for task 7 to exit (it holds GPU 0)"},
      {"CPU only the victim's exit frees", Alloc(5000, 0, {}),
       {{7, Alloc(4000, 0, {}), true}, {8, Alloc(1000, 0, {}), false}}, {7},
       "waiting for task 7 to exit (it holds CPU)"},
      {"CPU that is free anyway", Alloc(3000, 0, {}), {{7, Alloc(4000, 0, {}), true}}, {}, ""},
      {"memory only the victims' exit frees", Alloc(0, 10000, {}),
       {{7, Alloc(0, 5000, {}), true}, {9, Alloc(0, 5000, {}), true}}, {7, 9},
       "waiting for tasks 7 and 9 to exit (they hold memory)"},
      {"an unknown allocation being stopped blocks", whole1, {{7, std::nullopt, true}}, {7},
       "waiting for task 7 to exit (it holds an allocation this agent does not know)"},
      {"an earlier copy of the task blocks", whole1, {{5, whole1, true}}, {5},
       "waiting for its earlier copy to exit"},
      {"GPU and CPU from two victims", Alloc(7000, 0, {{0, 1000, 0}}),
       {{7, Alloc(0, 0, {{0, 1000, 0}}), true}, {8, Alloc(2000, 0, {}), true}}, {7, 8},
       "waiting for tasks 7 and 8 to exit (they hold GPU 0 and CPU)"},
  };
  for (const Row& r : rows) {
    const Blockers b = StartBlockers(TwoGpuNode(), 5, r.task, r.live);
    EXPECT_EQ(b.tasks, r.want) << r.name;
    EXPECT_EQ(WaitingMessage(b), r.message) << r.name;
  }
}

}  // namespace
}  // namespace hf::agent
