// AMD GPUs (docs/ACCELERATORS.md): discovered with rocm-smi (product name,
// VRAM, PCI bus and unique id; then `rocm-smi --showtopo` for xGMI hives and
// NUMA nodes), bound with ROCR_VISIBLE_DEVICES (the rocm-smi index), and RCCL
// given the task's RDMA NIC in NCCL_IB_HCA, which it reads as NCCL does.
//
// Why ROCR_VISIBLE_DEVICES: it is applied by the ROCm runtime below HIP, so
// every ROCm program sees only the task's GPUs, renumbered from 0; HIP's own
// HIP_VISIBLE_DEVICES (and CUDA_VISIBLE_DEVICES, which HIP also honours)
// then index those, so the agent removes both from the task's environment
// rather than set them to indices the task no longer has.
#ifndef HF_AGENT_ACCELERATORS_AMD_AMD_H_
#define HF_AGENT_ACCELERATORS_AMD_AMD_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/accelerators/accelerator.h"

namespace hf::agent::accel {

class AmdVendor final : public Vendor {
 public:
  std::string_view Name() const override { return kVendorAmd; }
  std::vector<std::string> Tools() const override { return {"rocm-smi"}; }
  std::string_view BindingVariable() const override { return "ROCR_VISIBLE_DEVICES"; }
  std::vector<std::string_view> ConflictingVariables() const override {
    return {"HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"};
  }
  Result<std::vector<Found>> Discover(const std::string& tool, const Runner& run) const override;
  Result<std::vector<GpuUsage>> Measure(const std::string& tool, const Runner& run) const override;
  std::map<std::string, std::string> CollectiveEnv(const std::string& rdma_device,
                                                   const std::string& address) const override;
};

// rocm-smi's answer in any of its three forms, per GPU index, keys
// lower-cased ("card series", "vram total memory (b)", "pci bus"):
//   --json:  {"card0": {"Card Series": "...", ...}, ...} ("system" skipped);
//   --csv:   a header line starting "device," then "card0,..." lines (fields
//            may be double-quoted);
//   plain:   "GPU[0]\t\t: Card series: \t\tAMD Instinct MI300X OAM" lines
//            between "=====" banners, WARNING lines and notes without a
//            value ("GPU[0] : Not supported"), which are skipped.
// Errors: InvalidArgument naming the form and line when nothing parses as a
// GPU, or a line of the form found is malformed.
Result<std::map<int32_t, std::map<std::string, std::string>>> ParseRocmSmi(std::string_view text);

// Devices from ParseRocmSmi's fields: model from "card series" (the name in
// brackets when there is one, without "AMD " and "Instinct "), memory from
// "vram total memory (b)" (bytes; 0 when absent), uuid from "unique id",
// bus id from "pci bus". InvalidArgument when a GPU has no card series.
Result<std::vector<Found>> RocmSmiDevices(std::string_view text);

// `rocm-smi --showtopo`: fabric_domain from the "Link Type between two GPUs"
// matrix (GPUs joined by XGMI cells, numbered densely from 0 in order of
// their lowest index; -1 for a GPU with no xGMI link), numa from the
// "(Topology) Numa Node" lines (-1 when absent). Errors: InvalidArgument
// (no link-type matrix, a cell that is neither 0, XGMI nor PCIE, a GPU of
// `gpus` missing) and `gpus` unchanged.
Status ApplyRocmSmiTopology(std::string_view text, std::vector<GpuDevice>& gpus);

// Usage from ParseRocmSmi's fields: "gpu use (%)" and "vram total used
// memory (b)" (missing or N/A read 0).
Result<std::vector<GpuUsage>> RocmSmiUsage(std::string_view text);

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_AMD_AMD_H_
