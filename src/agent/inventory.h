// What a node has (its inventory, sent at registration) and what it uses
// (measured usage, sent in heartbeats); see docs/AGENT.md.
//
// Two sources of inventory:
//   - declared: a YAML (or JSON) file with the same fields as the API's node
//     JSON (name, labels, cpu_milli, memory_mib, gpus, rdma, topology) plus
//     an optional `usage_file: PATH`, a YAML/JSON file re-read at every
//     heartbeat ({cpu_load, memory_used, gpus: [{index, utilization,
//     memory_used_mib}]}), so that test and demo nodes can report any load;
//   - discovered: CPUs from /proc/cpuinfo, memory from /proc/meminfo,
//     accelerators from each vendor's tool that is installed (accelerators/:
//     NVML or nvidia-smi, rocm-smi, npu-smi, hl-smi), RDMA devices from
//     /sys/class/infiniband, and the PCIe switch and NUMA node of both from
//     hwloc (pci_locality.h).
// The parsers are pure functions over text so that they can be tested on
// samples; Discover* and Measure* read the live system.
//
// Errors: InvalidArgument for a malformed file (naming the file and field),
// Unavailable for a file that cannot be read.
// Threading: pure functions; Discover/Measure read files and run the
// vendors' tools.
#ifndef HF_AGENT_INVENTORY_H_
#define HF_AGENT_INVENTORY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/accelerators/accelerator.h"
#include "core/model.h"
#include "core/status.h"

namespace hf::agent {

struct Inventory {
  NodeSpec spec;
  // The declared usage file ("" when usage is measured). Relative paths are
  // resolved against the inventory file's folder.
  std::string usage_file;
  // What the vendors' tools found (empty for a declared inventory):
  // heartbeats ask the same tools for utilisation, and tasks are bound with
  // the ids they gave.
  accel::Discovered discovered;
};

// A declared inventory from YAML or JSON text; `source` names it in messages.
Result<Inventory> ParseInventory(std::string_view text, const std::string& source);
// Reads and parses the file at `path`.
Result<Inventory> LoadInventoryFile(const std::string& path);

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
// (every vendor's tool found), RDMA devices. Never fails: what cannot be
// read is left out.
Inventory DiscoverInventory();
// Measured usage now: cpu_load = loadavg(1 min) / CPUs in [0, 1],
// memory_used from /proc/meminfo, the devices of `discovered` from their
// vendors' tools.
NodeUsage MeasureUsage(int64_t cpu_milli, const accel::Discovered& discovered);
// The heartbeat usage of `inv`: the usage file when declared, else measured.
Result<NodeUsage> CurrentUsage(const Inventory& inv);

// {"cpu_load", "memory_used", "gpus": [{"index", "utilization", "memory_used_mib"}]}.
nlohmann::json UsageToJson(const NodeUsage& u);

}  // namespace hf::agent

#endif  // HF_AGENT_INVENTORY_H_
