// NVIDIA GPUs (docs/ACCELERATORS.md): discovered and measured through NVML
// when libnvidia-ml.so.1 is installed (nvml.h), else with nvidia-smi; NVLink
// domains, PCIe switches and NUMA nodes from `nvidia-smi topo -m`. Bound
// with CUDA_VISIBLE_DEVICES (the index, NVML's and nvidia-smi's alike), and
// NCCL given the task's RDMA NIC in NCCL_IB_HCA.
#ifndef HF_AGENT_ACCELERATORS_NVIDIA_NVIDIA_H_
#define HF_AGENT_ACCELERATORS_NVIDIA_NVIDIA_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/accelerators/accelerator.h"
#include "agent/accelerators/nvidia/nvml.h"

namespace hf::agent::accel {

class NvidiaVendor final : public Vendor {
 public:
  // `nvml_library`: NVML's library name, or a path (tests).
  explicit NvidiaVendor(std::string nvml_library = Nvml::kLibrary)
      : nvml_library_(std::move(nvml_library)) {}
  std::string_view Name() const override { return kVendorNvidia; }
  std::vector<std::string> Tools() const override { return {"nvidia-smi"}; }
  bool Present(const std::function<bool(const std::string& tool)>& on_path) const override;
  std::string_view BindingVariable() const override { return "CUDA_VISIBLE_DEVICES"; }
  // Locality (topo -m) is a bonus: when it fails the devices are kept, with
  // unknown locality, and the failure is logged. Found::bus_id is filled
  // from `--query-gpu=index,pci.bus_id`, for hwloc.
  Result<std::vector<Found>> Discover(const std::string& tool, const Runner& run) const override;
  Result<std::vector<GpuUsage>> Measure(const std::string& tool, const Runner& run) const override;
  // NCCL_IB_HCA: the task's RDMA NIC.
  std::map<std::string, std::string> CollectiveEnv(const std::string& rdma_device,
                                                   const std::string& address) const override;

 private:
  // NVML, loaded on first use (nullptr when absent or broken, logged once).
  const Nvml* GetNvml() const;
  const std::string nvml_library_;
  mutable std::once_flag nvml_once_;
  mutable std::unique_ptr<Nvml> nvml_;  // set once, under nvml_once_
};

// The output of `nvidia-smi --query-gpu=index,uuid,name,memory.total
// --format=csv,nounits` (ParseQueryCsv: read by its header, so other field
// lists read too, and without a header these four in this order), one line
// per GPU: "0, GPU-8f3c..., NVIDIA H100 80GB HBM3, 81559". The model is the
// name without a leading "NVIDIA "; without an index column the GPUs are
// numbered in line order; without memory.total their memory is 0. Locality
// ids stay unknown (-1); see ApplyNvidiaSmiTopology.
Result<std::vector<GpuDevice>> ParseNvidiaSmiInventory(std::string_view csv);

// Fills the locality ids of `gpus` from the text of `nvidia-smi topo -m`:
//
//           GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
//   GPU0     X      NV4     PXB     SYS     PIX     0-31            0               N/A
//   ...     (one row per GPU, then one per NIC, then a "Legend:" block)
//
// Cells may be separated by tabs, spaces or both; ANSI styling (newer drivers
// underline the header) is ignored. Only the GPU rows are read; NIC columns and
// rows are skipped, and the affinity columns present vary by driver.
//   - fabric_domain: the connected components of GPUs joined by an NV# cell;
//   - pcie_switch: the components of GPUs joined by PIX or PXB (under one PCIe
//     switch or switch hierarchy, without crossing a host bridge);
// both numbered densely from 0 in order of their lowest GPU index. A GPU that
// shares no such link with another GPU is in no domain (-1), as the topology
// plugin reads -1. Note that the matrix shows only the closest link, so on an
// NVLink box the PCIe switches between GPUs are hidden and stay -1.
//   - numa: the "NUMA Affinity" cell, kept as the host's NUMA node number (the
//     number /sys and the RDMA NICs use), not renumbered; -1 when the column is
//     absent (older drivers), "N/A", or a range of several nodes.
// Each GpuDevice is matched by `index` to the row "GPU<index>".
//
// Errors: InvalidArgument naming the problem (no header, a GPU row whose cell
// count differs from the header's, an unknown link cell, a GPU of `gpus` with
// no row or a row with no GPU in `gpus`, a bad NUMA cell). On error `gpus` is
// left unchanged; on success every locality id is overwritten.
Status ApplyNvidiaSmiTopology(std::string_view topo_text, std::vector<GpuDevice>& gpus);

// The output of `nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader`
// ("0, 00000000:07:00.0" a line): each of `gpus`' PCI bus id, by index, ""
// where a line is missing or malformed (for ApplyPciLocality).
std::vector<std::string> ParseNvidiaSmiBusIds(std::string_view csv, const std::vector<GpuDevice>& gpus);
// `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,nounits`
// (read as ParseNvidiaSmiInventory reads): "0, 95, 30000" (utilisation in
// percent; "[N/A]" reads as 0; units after a value are ignored).
Result<std::vector<GpuUsage>> ParseNvidiaSmiUsage(std::string_view csv);

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_NVIDIA_NVIDIA_H_
