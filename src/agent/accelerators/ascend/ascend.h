// Huawei Ascend NPUs (docs/ACCELERATORS.md): discovered with `npu-smi info`
// (each chip a device: model, HBM or device memory, PCI bus; `npu-smi info
// -t topo` for HCCS domains), bound with ASCEND_RT_VISIBLE_DEVICES (the
// chip's logical id, which the CANN runtime reads), and, for a job's
// members, HCCL told the host address to bootstrap on (HCCL_IF_IP) when the
// agent has --advertise-address. The NPUs' own RoCE addresses (hccn_tool)
// and, for frameworks that want one, a rank table file stay the operator's.
#ifndef HF_AGENT_ACCELERATORS_ASCEND_ASCEND_H_
#define HF_AGENT_ACCELERATORS_ASCEND_ASCEND_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/accelerators/accelerator.h"

namespace hf::agent::accel {

class AscendVendor final : public Vendor {
 public:
  std::string_view Name() const override { return kVendorHuawei; }
  std::vector<std::string> Tools() const override { return {"npu-smi"}; }
  std::string_view BindingVariable() const override { return "ASCEND_RT_VISIBLE_DEVICES"; }
  // The container runtime's variable: inherited, it would mean nothing to a
  // process and mislead whoever reads the environment.
  std::vector<std::string_view> ConflictingVariables() const override {
    return {"ASCEND_VISIBLE_DEVICES"};
  }
  Result<std::vector<Found>> Discover(const std::string& tool, const Runner& run) const override;
  Result<std::vector<GpuUsage>> Measure(const std::string& tool, const Runner& run) const override;
  std::map<std::string, std::string> CollectiveEnv(const std::string& rdma_device,
                                                   const std::string& address) const override;
};

// One chip of `npu-smi info`'s table.
struct NpuChip {
  int32_t npu = 0;       // the NPU (card) id, as the table prints it
  int32_t chip = 0;      // the chip on that card
  int32_t logic_id = 0;  // the "Device" column, else the chip's position in the table
  std::string name;      // "910B3", "310P3"
  std::string bus_id;
  int64_t memory_mib = 0;       // HBM total where the table has HBM, else device memory
  int64_t memory_used_mib = 0;
  double aicore = 0;            // AICore use, 0..1
};

// `npu-smi info`: the box table of two lines per chip (NPU and name, health,
// power; then chip [and logical device id], bus id, AICore %, memory and
// HBM "used / total"), up to the process table. Errors: InvalidArgument
// naming the line for a table without its header or a chip line that does
// not read.
Result<std::vector<NpuChip>> ParseNpuSmiInfo(std::string_view text);

// Devices from the chips: index and bind id the logical id, model
// "Ascend" + name, memory and bus id as the table says.
std::vector<Found> NpuDevices(const std::vector<NpuChip>& chips);

// `npu-smi info -t topo`: the matrix of NPU<n> rows and columns whose HCCS
// cells join chips into fabric domains. Only for one chip per NPU (the
// matrix names NPUs): `chips` maps each device of `gpus` (by index) to its
// NPU id. Errors as ApplyLinkMatrix's; `gpus` unchanged.
Status ApplyNpuSmiTopology(std::string_view text, const std::vector<NpuChip>& chips,
                           std::vector<GpuDevice>& gpus);

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_ASCEND_ASCEND_H_
