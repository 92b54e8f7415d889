#include "agent/accelerators/ascend/ascend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>

namespace hf::agent::accel {
namespace {

// The cells of a table line "| a | b | c |", trimmed.
std::vector<std::string> Cells(std::string_view line) {
  std::vector<std::string> out;
  std::string_view rest = line;
  const size_t first = rest.find('|');
  if (first == std::string_view::npos) return out;
  rest.remove_prefix(first + 1);
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (bar == std::string_view::npos) {
      if (!Trim(rest).empty()) out.push_back(Trim(rest));
      break;
    }
    out.push_back(Trim(rest.substr(0, bar)));
    rest.remove_prefix(bar + 1);
  }
  return out;
}

// The "used / total" pairs of a cell, in order ("3318 / 65536",
// "60478/ 65536").
std::vector<std::pair<int64_t, int64_t>> Pairs(const std::string& cell) {
  std::string spaced;
  for (char c : cell) {
    if (c == '/') spaced += " / ";
    else spaced += c;
  }
  const std::vector<std::string> w = Words(spaced);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i + 2 < w.size(); ++i) {
    if (w[i + 1] != "/") continue;
    const auto a = ToInt(w[i]), b = ToInt(w[i + 2]);
    if (a && b) out.emplace_back(*a, *b);
    i += 2;
  }
  return out;
}

}  // namespace

Result<std::vector<NpuChip>> ParseNpuSmiInfo(std::string_view text) {
  const std::vector<std::string_view> lines = Lines(text);
  // The header: the two lines before the first "+===" rule.
  size_t rule = 0;
  while (rule < lines.size() && Trim(lines[rule]).rfind("+===", 0) != 0) ++rule;
  if (rule == lines.size() || rule < 2) return InvalidArgument("npu-smi info: no table header");
  const std::vector<std::string> head1 = Cells(lines[rule - 2]), head2 = Cells(lines[rule - 1]);
  if (head1.empty() || Words(head1[0]).empty() || Words(head1[0])[0] != "NPU" || head2.size() < 3 ||
      Words(head2[0]).empty() || Words(head2[0])[0] != "Chip") {
    return InvalidArgument("npu-smi info: the table header is not 'NPU Name | ...' / 'Chip ... | ...'");
  }
  const bool has_device = Words(head2[0]).size() > 1 && Words(head2[0])[1] == "Device";
  const bool has_hbm = head2[2].find("HBM-Usage") != std::string::npos;

  std::vector<NpuChip> out;
  std::set<int32_t> logic_ids;
  for (size_t at = rule + 1; at < lines.size(); ++at) {
    const std::string line = Trim(lines[at]);
    if (line.empty() || line[0] == '+') continue;  // rules between NPUs and chips
    const std::vector<std::string> first = Cells(line);
    // The process table ends the devices: its header, or its empty rows.
    if (first.size() < 3 || first[0].find("No running processes") != std::string::npos ||
        (first.size() > 1 && first[1].find("Process") != std::string::npos)) {
      break;
    }
    const std::string where = "npu-smi info line " + std::to_string(at + 1);
    if (at + 1 >= lines.size()) return InvalidArgument(where + ": a chip without its second line");
    const std::vector<std::string> second = Cells(lines[at + 1]);
    const std::vector<std::string> npu_name = Words(first[0]);
    const std::vector<std::string> chip_dev = second.empty() ? std::vector<std::string>() : Words(second[0]);
    NpuChip c;
    std::optional<int64_t> npu, chip;
    if (!npu_name.empty()) npu = ToInt(npu_name[0]);
    if (!chip_dev.empty()) chip = ToInt(chip_dev[0]);
    if (npu_name.size() < 2 || !npu || second.size() < 3 || !chip || *npu < 0 || *npu > INT32_MAX ||
        *chip < 0 || *chip > INT32_MAX || (has_device && chip_dev.size() < 2)) {
      return InvalidArgument(where + ": not an NPU's two lines: '" + line.substr(0, 80) + "'");
    }
    c.npu = int32_t(*npu);
    c.chip = int32_t(*chip);
    c.name = npu_name[1];
    c.logic_id = int32_t(out.size());
    if (has_device) {
      const auto dev = ToInt(chip_dev[1]);
      if (!dev || *dev < 0 || *dev > INT32_MAX) {
        return InvalidArgument(where + ": bad device id '" + chip_dev[1] + "'");
      }
      c.logic_id = int32_t(*dev);
    }
    if (!logic_ids.insert(c.logic_id).second) {
      return InvalidArgument(where + ": device id " + std::to_string(c.logic_id) + " appears twice");
    }
    c.bus_id = Words(second[1]).empty() ? "" : Words(second[1])[0];
    const std::vector<std::string> usage = Words(second[2]);
    c.aicore = usage.empty() ? 0 : Clamp01(ToDouble(usage[0]).value_or(0) / 100.0);
    const std::vector<std::pair<int64_t, int64_t>> memory = Pairs(second[2]);
    // Memory-Usage, then HBM-Usage where the table has it (910: the HBM is
    // the device's memory, Memory-Usage its small DDR).
    const size_t which = has_hbm ? 1 : 0;
    if (memory.size() <= which) return InvalidArgument(where + ": no memory 'used / total' in '" + second[2] + "'");
    c.memory_used_mib = std::max<int64_t>(0, memory[which].first);
    c.memory_mib = std::max<int64_t>(0, memory[which].second);
    out.push_back(std::move(c));
    ++at;
  }
  if (out.empty()) return InvalidArgument("npu-smi info: no NPU in the table");
  return out;
}

std::vector<Found> NpuDevices(const std::vector<NpuChip>& chips) {
  std::vector<Found> out;
  for (const NpuChip& c : chips) {
    Found f;
    f.device.index = c.logic_id;
    f.device.vendor = kVendorHuawei;
    f.device.model = "Ascend" + c.name;
    f.device.memory_mib = c.memory_mib;
    f.bus_id = c.bus_id;
    f.bind_id = std::to_string(c.logic_id);
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const Found& a, const Found& b) { return a.device.index < b.device.index; });
  return out;
}

Status ApplyNpuSmiTopology(std::string_view text, const std::vector<NpuChip>& chips,
                           std::vector<GpuDevice>& gpus) {
  std::set<int32_t> npus;
  for (const NpuChip& c : chips) {
    if (!npus.insert(c.npu).second) {
      return InvalidArgument("npu-smi info -t topo: several chips on NPU " + std::to_string(c.npu) +
                             ": the matrix cannot tell them apart");
    }
  }
  // The matrix names NPUs: number the devices by NPU id for the read.
  std::vector<GpuDevice> by_npu = gpus;
  for (GpuDevice& g : by_npu) {
    const auto chip = std::find_if(chips.begin(), chips.end(),
                                   [&](const NpuChip& c) { return c.logic_id == g.index; });
    if (chip == chips.end()) {
      return InvalidArgument("npu-smi info -t topo: device " + std::to_string(g.index) + " is no chip");
    }
    g.index = chip->npu;
  }
  const std::vector<std::string_view> lines = Lines(text);
  size_t header = 0;
  while (header < lines.size() && Trim(lines[header]).rfind("NPU", 0) != 0) ++header;
  HF_RETURN_IF_ERROR(ApplyLinkMatrix(
      lines, header, "NPU", "npu-smi info -t topo",
      [](const std::string& cell) { return cell == "HCCS"; }, by_npu));
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].fabric_domain = by_npu[i].fabric_domain;
  return Status::Ok();
}

Result<std::vector<Found>> AscendVendor::Discover(const std::string& tool, const Runner& run) const {
  const std::optional<std::string> out = run(tool + " info");
  if (!out) return Unavailable(tool + " info failed");
  HF_ASSIGN_OR_RETURN(std::vector<NpuChip> chips, ParseNpuSmiInfo(*out));
  std::vector<Found> found = NpuDevices(chips);
  // HCCS domains are a bonus, as NVLink is for NVIDIA; cards of several
  // chips (Atlas 300I) have none to read.
  std::vector<GpuDevice> gpus;
  for (const Found& f : found) gpus.push_back(f.device);
  if (const std::optional<std::string> topo = run(tool + " info -t topo")) {
    if (Status s = ApplyNpuSmiTopology(*topo, chips, gpus); !s.ok()) {
      spdlog::warn("agent: NPU fabric unknown: {}", s.message());
    }
  }
  for (size_t i = 0; i < found.size(); ++i) found[i].device = gpus[i];
  return found;
}

Result<std::vector<GpuUsage>> AscendVendor::Measure(const std::string& tool, const Runner& run) const {
  const std::optional<std::string> out = run(tool + " info");
  if (!out) return Unavailable(tool + " info failed");
  HF_ASSIGN_OR_RETURN(std::vector<NpuChip> chips, ParseNpuSmiInfo(*out));
  std::vector<GpuUsage> usage;
  for (const NpuChip& c : chips) {
    usage.push_back(GpuUsage{.index = c.logic_id, .utilization = c.aicore,
                             .memory_used_mib = c.memory_used_mib});
  }
  return usage;
}

std::map<std::string, std::string> AscendVendor::CollectiveEnv(const std::string&,
                                                               const std::string& address) const {
  if (address.empty()) return {};
  return {{"HCCL_IF_IP", address}};
}

}  // namespace hf::agent::accel
