// Where GPUs and RDMA NICs sit on the host's PCIe tree and NUMA nodes, from
// hwloc (docs/AGENT.md, "Discovery"). The rdma plugin pairs a task's GPUs
// with the NIC under the same PCIe switch, or failing that on the same NUMA
// node; for discovered inventories those ids come from here.
//
//   - numa: the OS index of the NUMA node the device's nearest CPU-side
//     ancestor covers (-1 when it spans several or none);
//   - pcie_switch: devices joined below the host bridge (by one PCIe switch
//     or switch hierarchy, without crossing a host bridge, as nvidia-smi's
//     PIX/PXB) share an id: the id of their topmost PCI-to-PCI bridge below
//     the host bridge (the root port). Ids are numbered 0, 1, ... in the
//     order the GPUs (by index) and then the NICs (by name) first meet them,
//     so GPUs' and NICs' ids compare. A device right on a host bridge gets -1.
//
// GPUs are found by PCI bus id ("0000:07:00.0"; nvidia-smi's eight-digit
// domain works too), NICs by their OpenFabrics name ("mlx5_0"). The GPUs'
// ids are replaced only when hwloc found every GPU; otherwise they keep what
// they had (nvidia-smi's topology), and the NICs get their NUMA node only,
// since their switch ids could not be compared with the GPUs'.
//
// Threading: no shared state; each call loads its own topology.
#ifndef HF_AGENT_PCI_LOCALITY_H_
#define HF_AGENT_PCI_LOCALITY_H_

#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::agent {

// `gpu_bus_ids[i]` is gpus[i]'s PCI bus id ("" when unknown). `xml_path`:
// load that hwloc XML topology instead of the live machine ("" for the live
// one). Unavailable when hwloc cannot load a topology; the devices are left
// as they were then.
Status ApplyPciLocality(const std::string& xml_path, const std::vector<std::string>& gpu_bus_ids,
                        std::vector<GpuDevice>& gpus, std::vector<RdmaDevice>& rdma);

}  // namespace hf::agent

#endif  // HF_AGENT_PCI_LOCALITY_H_
