// What a node has (its inventory, sent at registration) and what it uses
// (measured usage, sent in heartbeats); see docs/AGENT.md.
//
// Two sources of inventory:
//   - declared: a YAML (or JSON) file with the same fields as the API's node
//     JSON (name, labels, cpu_milli, memory_mib, gpus, rdma, topology) plus
//     an optional `usage_file: PATH`, a YAML/JSON file re-read at every
//     heartbeat ({cpu_load, memory_used, gpus: [{index, utilization,
//     memory_used_mib}]}), so that test and demo nodes can report any load;
//   - discovered: CPUs from /proc/cpuinfo, memory from /proc/meminfo, GPUs
//     from nvidia-smi when it is installed (their NVLink domains from
//     `nvidia-smi topo -m`), RDMA devices from /sys/class/infiniband, and the
//     PCIe switch and NUMA node of both from hwloc (pci_locality.h).
// The parsers are pure functions over text so that they can be tested on
// samples; Discover* and Measure* read the live system.
//
// Errors: InvalidArgument for a malformed file (naming the file and field),
// Unavailable for a file that cannot be read.
// Threading: pure functions; Discover/Measure read files and run nvidia-smi.
#ifndef HF_AGENT_INVENTORY_H_
#define HF_AGENT_INVENTORY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::agent {

struct Inventory {
  NodeSpec spec;
  // The declared usage file ("" when usage is measured). Relative paths are
  // resolved against the inventory file's folder.
  std::string usage_file;
  // Whether GPUs came from nvidia-smi, so that heartbeats ask it for their
  // utilisation too.
  bool gpus_from_nvidia_smi = false;
};

// A declared inventory from YAML or JSON text; `source` names it in messages.
Result<Inventory> ParseInventory(std::string_view text, const std::string& source);
// Reads and parses the file at `path`.
Result<Inventory> LoadInventoryFile(const std::string& path);

// The output of `nvidia-smi --query-gpu=index,uuid,name,memory.total
// --format=csv,noheader,nounits`, one line per GPU:
//   "0, GPU-8f3c..., NVIDIA H100 80GB HBM3, 81559". The model is the name
// without a leading "NVIDIA ". Locality ids stay unknown (-1); see
// ApplyNvidiaSmiTopology.
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
//   - nvlink_domain: the connected components of GPUs joined by an NV# cell;
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
// `nvidia-smi --query-gpu=index,utilization.gpu,memory.used
// --format=csv,noheader,nounits`: "0, 95, 30000" (utilisation in percent;
// "[N/A]" reads as 0).
Result<std::vector<GpuUsage>> ParseNvidiaSmiUsage(std::string_view csv);

// /proc/meminfo: MemTotal in MiB (0 when missing), and 1 - MemAvailable /
// MemTotal clamped to [0, 1] (0 when either is missing).
int64_t MemTotalMib(std::string_view meminfo);
double MemoryUsedRatio(std::string_view meminfo);
// /proc/cpuinfo: the number of "processor" lines.
int CpuCount(std::string_view cpuinfo);

// A usage file's contents (YAML or JSON); every field optional.
Result<NodeUsage> ParseUsage(std::string_view text, const std::string& source);

// The host's name, lower-cased ("" when it cannot be read).
std::string Hostname();

// The live node: name from Hostname() (lower-cased), CPUs, memory, GPUs
// (nvidia-smi), RDMA devices. Never fails: what cannot be read is left out.
Inventory DiscoverInventory();
// Measured usage now: cpu_load = loadavg(1 min) / CPUs in [0, 1],
// memory_used from /proc/meminfo, GPUs from nvidia-smi when `with_gpus`.
NodeUsage MeasureUsage(int64_t cpu_milli, bool with_gpus);
// The heartbeat usage of `inv`: the usage file when declared, else measured.
Result<NodeUsage> CurrentUsage(const Inventory& inv);

// {"cpu_load", "memory_used", "gpus": [{"index", "utilization", "memory_used_mib"}]}.
nlohmann::json UsageToJson(const NodeUsage& u);

}  // namespace hf::agent

#endif  // HF_AGENT_INVENTORY_H_
