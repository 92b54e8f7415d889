#include "agent/pci_locality.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

namespace hf::agent {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// The root port above a PCI object: its topmost PCI-to-PCI bridge below the
// host bridge; nullptr when it sits right on the host bridge.
hwloc_obj_t RootPort(hwloc_obj_t obj) {
  hwloc_obj_t top = nullptr;
  for (hwloc_obj_t p = obj->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    if (p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;  // the host bridge
    top = p;
  }
  return top;
}

int32_t NumaOf(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (cpu_side == nullptr || cpu_side->nodeset == nullptr || hwloc_bitmap_weight(cpu_side->nodeset) != 1) {
    return -1;
  }
  return hwloc_bitmap_first(cpu_side->nodeset);
}

hwloc_obj_t PciByBusId(hwloc_topology_t topo, const std::string& bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  if (bus_id.empty() || std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) {
    return nullptr;
  }
  return hwloc_get_pcidev_by_busid(topo, domain, bus, dev, func);
}

hwloc_obj_t OpenFabrics(hwloc_topology_t topo, const std::string& name) {
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr; o = hwloc_get_next_osdev(topo, o)) {
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name != nullptr && name == o->name) {
      // The PCI device it belongs to.
      hwloc_obj_t p = o->parent;
      return p != nullptr && p->type == HWLOC_OBJ_PCI_DEVICE ? p : nullptr;
    }
  }
  return nullptr;
}

}  // namespace

Status ApplyPciLocality(const std::string& xml_path, const std::vector<std::string>& gpu_bus_ids,
                        std::vector<GpuDevice>& gpus, std::vector<RdmaDevice>& rdma) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Unavailable("hwloc: cannot initialise a topology");
  Topology topo(raw);
  // Bridges and PCI devices are what this is about; hwloc drops them by default.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
    return Unavailable("hwloc: cannot read the topology " + xml_path);
  }
  if (hwloc_topology_load(raw) != 0) {
    return Unavailable("hwloc: cannot load the topology" + (xml_path.empty() ? "" : " " + xml_path));
  }

  std::map<hwloc_obj_t, int32_t> switch_ids;
  const auto switch_of = [&](hwloc_obj_t pci) -> int32_t {
    hwloc_obj_t port = RootPort(pci);
    if (port == nullptr) return -1;
    return switch_ids.emplace(port, int32_t(switch_ids.size())).first->second;
  };

  std::vector<hwloc_obj_t> gpu_objs;
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpu_objs.push_back(PciByBusId(raw, i < gpu_bus_ids.size() ? gpu_bus_ids[i] : ""));
  }
  const bool all_gpus = std::find(gpu_objs.begin(), gpu_objs.end(), nullptr) == gpu_objs.end();
  if (all_gpus) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      gpus[i].numa = NumaOf(raw, gpu_objs[i]);
      gpus[i].pcie_switch = switch_of(gpu_objs[i]);
    }
  }
  for (RdmaDevice& nic : rdma) {
    hwloc_obj_t pci = OpenFabrics(raw, nic.name);
    if (pci == nullptr) continue;
    nic.numa = NumaOf(raw, pci);
    if (all_gpus) nic.pcie_switch = switch_of(pci);
  }
  return Status::Ok();
}

}  // namespace hf::agent
