// Intel Gaudi HPUs (Habana; docs/ACCELERATORS.md): discovered with hl-smi's
// query mode (`hl-smi -Q index,name,bus_id,uuid,module_id,memory.total -f
// csv,nounits`, which mirrors nvidia-smi's), or its table when the query
// fails, and bound with HABANA_VISIBLE_MODULES: the module ids, which is
// what the Gaudi software stack reads in a process. HABANA_VISIBLE_DEVICES,
// set beside it to the same devices' indices, is the habana container
// runtime's (by index): a task that starts a container hands it on. Module
// ids differ from indices; a device whose module id hl-smi did not give
// binds by its index, with a warning.
#ifndef HF_AGENT_ACCELERATORS_GAUDI_GAUDI_H_
#define HF_AGENT_ACCELERATORS_GAUDI_GAUDI_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/accelerators/accelerator.h"

namespace hf::agent::accel {

class GaudiVendor final : public Vendor {
 public:
  std::string_view Name() const override { return kVendorHabana; }
  std::vector<std::string> Tools() const override { return {"hl-smi"}; }
  std::string_view BindingVariable() const override { return "HABANA_VISIBLE_MODULES"; }
  std::vector<std::string_view> BindingVariables() const override {
    return {"HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES"};
  }
  // HABANA_VISIBLE_MODULES: the module ids; HABANA_VISIBLE_DEVICES: the
  // indices.
  std::map<std::string, std::string> Bind(const std::vector<Bound>& devices) const override;
  Result<std::vector<Found>> Discover(const std::string& tool, const Runner& run) const override;
  Result<std::vector<GpuUsage>> Measure(const std::string& tool, const Runner& run) const override;
};

// hl-smi -Q ... -f csv: read by its header (ParseQueryCsv; without one, the
// discovery query's columns in order). index (else line order), name,
// bus_id, uuid, module_id (the bind id; else the index), memory.total.
// Errors: InvalidArgument naming the line (a bad index or module id, no name).
Result<std::vector<Found>> HlSmiQueryDevices(std::string_view csv);

// A device of `hl-smi`'s table: two lines per AIP (index, name; bus id)
// then (memory "used / total", AIP-Util %), up to "Compute Processes".
struct HlSmiRow {
  int32_t index = 0;
  std::string name;  // "HL-225"
  std::string bus_id;
  int64_t memory_used_mib = 0;
  int64_t memory_mib = 0;
  double utilization = 0;  // 0..1
};
Result<std::vector<HlSmiRow>> ParseHlSmiTable(std::string_view text);

// Usage from hl-smi -Q index,utilization.aip,memory.used -f csv,nounits.
Result<std::vector<GpuUsage>> HlSmiQueryUsage(std::string_view csv);

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_GAUDI_GAUDI_H_
