// nvidia-smi's output as the agent reads it: the GPU inventory and usage
// queries (CSV), `nvidia-smi topo -m` applied to the parsed GPUs, and the
// /proc files read beside them. The first byte picks how the rest is split
// between the inventory and the topology text.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "agent/accelerators/nvidia/nvidia.h"
#include "agent/inventory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hf::agent;
  using namespace hf::agent::accel;
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = all.size() * data[0] / 256;
  const std::string_view csv = all.substr(0, cut);
  const std::string_view topo = all.substr(cut);
  hf::Result<std::vector<hf::GpuDevice>> gpus = ParseNvidiaSmiInventory(csv);
  if (gpus.ok()) (void)ApplyNvidiaSmiTopology(topo, *gpus);
  (void)ParseNvidiaSmiUsage(all);
  (void)MemTotalMib(all);
  (void)MemoryUsedRatio(all);
  (void)CpuCount(all);
  return 0;
}
