// Accelerator vendors, as the node agent sees them (docs/ACCELERATORS.md):
// one implementation per vendor, each covering
//   - discovery: the devices its tool lists (model, memory, fabric domain,
//     and whatever locality the tool prints), with the id the vendor's
//     binding variable takes for each;
//   - measured usage: utilisation and memory in use per device;
//   - binding: the environment that gives a task exactly its devices;
//   - collective communication: what a multi-node job's library reads (the
//     RDMA NIC for NCCL and RCCL).
// A vendor whose tool is not installed is skipped without a word; a tool
// that fails or prints what its parser refuses is logged once, and the node
// registers with what the other vendors found.
//
// The parsers are pure functions over a tool's text, tested on real samples
// (src/agent/testdata/accelerators/, each naming its source); Discover and
// Measure run the tool through a Runner, so that tests can give them text.
//
// Threading: the vendors are immutable singletons (AllVendors); Discover and
// Measure run their tool on the calling thread.
#ifndef HF_AGENT_ACCELERATORS_ACCELERATOR_H_
#define HF_AGENT_ACCELERATORS_ACCELERATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::agent::accel {

// Runs a shell command line; its standard output, or nullopt when it could
// not run or exited non-zero.
using Runner = std::function<std::optional<std::string>(const std::string& command)>;
// The Runner of the live system (popen through /bin/sh, stderr discarded),
// each tool stopped after kToolTimeoutS seconds (then it failed).
inline constexpr int kToolTimeoutS = 20;
std::optional<std::string> RunCommand(const std::string& command);

// One discovered device: what the server is told (`device`, whose index is
// the vendor's own number here; Discover numbers them for the node), and the
// value its vendor's binding variable takes for it (`bind_id`).
struct Found {
  GpuDevice device;
  std::string bind_id;
  std::string bus_id;  // its PCI address ("0000:07:00.0"), for hwloc; "" when unknown
};

// A device a task is bound to: the id its vendor's binding variable takes
// (Found::bind_id) and the vendor's own number for it.
struct Bound {
  std::string bind_id;
  int32_t vendor_index = 0;
};

class Vendor {
 public:
  virtual ~Vendor() = default;
  // GpuDevice::vendor of its devices: kVendorNvidia, kVendorAmd, ...
  virtual std::string_view Name() const = 0;
  // The tools it runs, first found on PATH wins.
  virtual std::vector<std::string> Tools() const = 0;
  // Whether its devices can be read here: one of Tools() on PATH, by
  // default. NVIDIA's also with NVML's library alone.
  virtual bool Present(const std::function<bool(const std::string& tool)>& on_path) const;
  // The variable that hands a task its devices (CUDA_VISIBLE_DEVICES, ...).
  virtual std::string_view BindingVariable() const = 0;
  // Every variable Bind sets: BindingVariable() unless a vendor sets more.
  virtual std::vector<std::string_view> BindingVariables() const { return {BindingVariable()}; }
  // The binding environment of a task given its `devices` of this vendor,
  // in grant order (none: the variables empty, which hides every device).
  // Default: BindingVariable() = the bind ids, comma-separated.
  virtual std::map<std::string, std::string> Bind(const std::vector<Bound>& devices) const;
  // Variables of the same runtime that would override or remap the binding
  // if inherited from the agent's environment (HIP honours
  // CUDA_VISIBLE_DEVICES, say): removed from every task's environment on a
  // node with this vendor's devices.
  virtual std::vector<std::string_view> ConflictingVariables() const { return {}; }
  // The devices, with `tool` (one of Tools(), found on PATH; "" when the
  // vendor is Present without one) run through `run`. Errors: Unavailable when the tool fails, InvalidArgument (naming
  // the tool and line) when its output is not what the parser knows.
  virtual Result<std::vector<Found>> Discover(const std::string& tool, const Runner& run) const = 0;
  // Utilisation and memory in use per device, by the vendor's own number
  // (Found::device.index before renumbering).
  virtual Result<std::vector<GpuUsage>> Measure(const std::string& tool, const Runner& run) const = 0;
  // What a multi-node job's collective library reads, from the node's RDMA
  // NIC chosen for the task ("" when none) and the agent's advertised
  // address ("" when unset). Empty by default.
  virtual std::map<std::string, std::string> CollectiveEnv(const std::string& rdma_device,
                                                           const std::string& address) const {
    (void)rdma_device;
    (void)address;
    return {};
  }
};

// Every vendor the agent knows, in discovery order: nvidia, amd, huawei,
// habana.
const std::vector<const Vendor*>& AllVendors();
// The vendor named `name`, or nullptr (a declared device of another vendor).
const Vendor* FindVendor(std::string_view name);

// What discovery found on the node, every vendor together.
struct Discovered {
  // Numbered for the node in vendor order (AllVendors), each vendor's in its
  // own order: index i of the node is unique whatever the vendors.
  std::vector<GpuDevice> gpus;
  // Node index -> the id the vendor's binding variable takes for it.
  std::map<int32_t, std::string> bind_ids;
  // Node index -> (vendor, the vendor's own number), for Measure's answers.
  std::map<int32_t, std::pair<std::string, int32_t>> vendor_index;
  // The vendors found, by name, with the tool that answered.
  std::map<std::string, std::string> tools;
  // Per entry of `gpus`: its PCI address, "" when unknown (pci_locality.h).
  std::vector<std::string> bus_ids;
};

// Runs every vendor of `vendors` that is Present (its tool on PATH, as
// `on_path` says). A vendor whose tool fails is logged (once per process
// and vendor) and left out.
Discovered DiscoverAll(const Runner& run,
                       const std::function<bool(const std::string& tool)>& on_path,
                       const std::vector<const Vendor*>& vendors = AllVendors());

// Measured usage of the node's discovered devices, by node index.
std::vector<GpuUsage> MeasureAll(const Discovered& d, const Runner& run,
                                 const std::vector<const Vendor*>& vendors = AllVendors());

// The binding environment of a task on a node with `node_gpus`, given its
// `grants` (node indices): for each vendor with devices on the node, what
// its Bind sets for the task's devices of that vendor, in grant order (the
// variables empty for a vendor none of whose devices it got, which hides
// them all). `bind_ids` and `vendor_index`: node index -> the binding id and
// the vendor's own number (Discovered's); an index without them binds as its
// rank among the node's devices of its vendor, in index order (declared
// inventories). Vendors the agent does not know get no variable.
std::map<std::string, std::string> BindingEnv(
    const std::vector<GpuDevice>& node_gpus, const std::map<int32_t, std::string>& bind_ids,
    const std::map<int32_t, std::pair<std::string, int32_t>>& vendor_index,
    const std::vector<int32_t>& grants);

// Every variable of every known vendor (binding and conflicting ones) that a
// task's environment must not inherit: those BindingEnv does not set.
std::vector<std::string> VariablesToClear(const std::map<std::string, std::string>& binding);

// The collective-communication environment of a task whose devices are of
// `vendors`: each known vendor's CollectiveEnv, merged.
std::map<std::string, std::string> CollectiveEnvFor(const std::vector<std::string>& vendors,
                                                    const std::string& rdma_device,
                                                    const std::string& address);

// Shared by the parsers (and the agent's /proc readers): `text` split at
// '\n' (a trailing '\r' kept); `s` without surrounding white space; the
// fields of a comma-separated line, each trimmed; a whole decimal number or
// a decimal, or nullopt ("[N/A]", empty, trailing garbage); `v` in [0, 1]
// (NaN reads 0).
std::vector<std::string_view> Lines(std::string_view text);
std::string Trim(std::string_view s);
std::vector<std::string> CsvFields(std::string_view line);
std::optional<int64_t> ToInt(const std::string& s);
std::optional<double> ToDouble(const std::string& s);
double Clamp01(double v);
// The CSV of a query tool (nvidia-smi --query-gpu, hl-smi -Q), with its
// header: one map per device line, header name -> value, the header's units
// dropped ("memory.total [MiB]" -> "memory.total"). Without a header
// (`noheader`), `positional` names the columns. Errors: InvalidArgument
// naming `what` and the line for a line whose field count differs.
Result<std::vector<std::map<std::string, std::string>>> ParseQueryCsv(
    std::string_view text, const std::string& what, const std::vector<std::string>& positional);
// The leading whole number of a query value ("131072 MiB" -> 131072,
// "95 %" -> 95); nullopt for "[N/A]", "N/A" or garbage.
std::optional<int64_t> Quantity(const std::string& value);
// The words of `line`, split at any run of spaces and tabs.
std::vector<std::string> Words(std::string_view line);

// Connected components over slots 0..n-1 (devices joined by a fabric link).
class Components {
 public:
  explicit Components(size_t n);
  size_t Find(size_t x);
  void Join(size_t a, size_t b);
  // Per slot: its component's id, dense from 0 in slot order, or -1 for a
  // component of one slot (it shares the link with nothing).
  std::vector<int32_t> DenseIds();

 private:
  std::vector<size_t> parent_;
};

// A device-to-device link matrix as the vendors' tools print it (rocm-smi
// --showtopo, npu-smi info -t topo): a header line whose first labels are
// "<prefix><n>" (others after them, such as "CPU Affinity", are ignored),
// then one row per device, "<prefix><n>" and a cell per device column. Read
// from `lines[header]` until a line that does not start with the prefix.
// Fills each device's fabric_domain (matched by GpuDevice::index to n) with
// the components of the cells `linked` says join two devices. Errors:
// InvalidArgument naming `what` (no device columns, a row with too few
// cells, a device of `gpus` without a row) and `gpus` unchanged.
Status ApplyLinkMatrix(const std::vector<std::string_view>& lines, size_t header,
                       std::string_view prefix, const std::string& what,
                       const std::function<bool(const std::string& cell)>& linked,
                       std::vector<GpuDevice>& gpus);

}  // namespace hf::agent::accel

#endif  // HF_AGENT_ACCELERATORS_ACCELERATOR_H_
