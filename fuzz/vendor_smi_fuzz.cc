// The other accelerator vendors' tools as the agent reads them
// (src/agent/accelerators/): rocm-smi in its three forms and its topology,
// npu-smi's table and HCCS matrix, hl-smi's table and query CSV. The first
// byte picks the parser; a discovery's devices then take the topology text
// that follows the first NUL.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "agent/accelerators/amd/amd.h"
#include "agent/accelerators/ascend/ascend.h"
#include "agent/accelerators/gaudi/gaudi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hf::agent::accel;
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = all.find('\0');
  const std::string_view text = all.substr(0, nul);
  const std::string_view topo = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  switch (data[0] % 4) {
    case 0:
      if (auto found = RocmSmiDevices(text); found.ok()) {
        std::vector<hf::GpuDevice> gpus;
        for (const Found& f : *found) gpus.push_back(f.device);
        (void)ApplyRocmSmiTopology(topo, gpus);
      }
      (void)RocmSmiUsage(text);
      break;
    case 1:
      if (auto chips = ParseNpuSmiInfo(text); chips.ok()) {
        std::vector<hf::GpuDevice> gpus;
        for (const Found& f : NpuDevices(*chips)) gpus.push_back(f.device);
        (void)ApplyNpuSmiTopology(topo, *chips, gpus);
      }
      break;
    case 2:
      (void)ParseHlSmiTable(text);
      break;
    default:
      (void)HlSmiQueryDevices(text);
      (void)HlSmiQueryUsage(text);
      break;
  }
  return 0;
}
