#include "agent/accelerators/gaudi/gaudi.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace hf::agent::accel {
namespace {

// "512Mib / 32768Mib" -> (512, 32768), whatever the spacing and the case of
// the unit.
std::optional<std::pair<int64_t, int64_t>> MemoryPair(const std::string& cell) {
  const size_t slash = cell.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const auto used = Quantity(cell.substr(0, slash)), total = Quantity(cell.substr(slash + 1));
  if (!used || !total) return std::nullopt;
  return std::make_pair(*used, *total);
}

// The cells of "| a | b | c |", trimmed.
std::vector<std::string> Cells(std::string_view line) {
  std::vector<std::string> out;
  size_t at = line.find('|');
  while (at != std::string_view::npos) {
    const size_t next = line.find('|', at + 1);
    if (next == std::string_view::npos) break;
    out.push_back(Trim(line.substr(at + 1, next - at - 1)));
    at = next;
  }
  return out;
}

}  // namespace

Result<std::vector<Found>> HlSmiQueryDevices(std::string_view csv) {
  HF_ASSIGN_OR_RETURN(auto rows, ParseQueryCsv(csv, "hl-smi -Q",
                                               {"index", "name", "bus_id", "uuid", "module_id",
                                                "memory.total"}));
  std::vector<Found> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const std::string where = "hl-smi -Q device " + std::to_string(i);
    Found f;
    f.device.vendor = kVendorHabana;
    f.device.index = int32_t(i);
    if (auto it = r.find("index"); it != r.end()) {
      const auto index = ToInt(it->second);
      if (!index || *index < 0 || *index > INT32_MAX) {
        return InvalidArgument(where + ": bad index '" + it->second + "'");
      }
      f.device.index = int32_t(*index);
    }
    auto name = r.find("name");
    if (name == r.end() || name->second.empty()) return InvalidArgument(where + ": no name");
    f.device.model = name->second;
    if (auto it = r.find("uuid"); it != r.end()) f.device.uuid = it->second;
    if (auto it = r.find("bus_id"); it != r.end()) f.bus_id = it->second;
    if (auto it = r.find("memory.total"); it != r.end()) {
      f.device.memory_mib = std::max<int64_t>(0, Quantity(it->second).value_or(0));
    }
    f.bind_id = std::to_string(f.device.index);
    if (auto it = r.find("module_id"); it != r.end()) {
      const auto module = ToInt(it->second);
      if (!module || *module < 0 || *module > INT32_MAX) {
        return InvalidArgument(where + ": bad module_id '" + it->second + "'");
      }
      f.bind_id = std::to_string(*module);
    }
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<HlSmiRow>> ParseHlSmiTable(std::string_view text) {
  const std::vector<std::string_view> lines = Lines(text);
  size_t at = 0;
  while (at < lines.size() && Trim(lines[at]).rfind("|===", 0) != 0) ++at;
  if (at == lines.size()) return InvalidArgument("hl-smi: no table header");
  std::vector<HlSmiRow> out;
  for (++at; at < lines.size(); ++at) {
    const std::string line = Trim(lines[at]);
    if (line.empty() || line.rfind("|---", 0) == 0) continue;
    if (line[0] == '+' || line.find("Compute Processes") != std::string::npos) break;
    const std::string where = "hl-smi line " + std::to_string(at + 1);
    const std::vector<std::string> first = Cells(line);
    if (at + 1 >= lines.size()) return InvalidArgument(where + ": an AIP without its second line");
    const std::vector<std::string> second = Cells(lines[at + 1]);
    const std::vector<std::string> aip = first.empty() ? std::vector<std::string>() : Words(first[0]);
    std::optional<int64_t> index;
    if (aip.size() >= 2) index = ToInt(aip[0]);
    if (first.size() < 3 || second.size() < 3 || !index || *index < 0 || *index > INT32_MAX) {
      return InvalidArgument(where + ": not an AIP's two lines: '" + line.substr(0, 80) + "'");
    }
    HlSmiRow r;
    r.index = int32_t(*index);
    r.name = aip[1];
    r.bus_id = Words(first[1]).empty() ? "" : Words(first[1])[0];
    const auto memory = MemoryPair(second[1]);
    if (!memory) return InvalidArgument(where + ": no memory 'used / total' in '" + second[1] + "'");
    r.memory_used_mib = std::max<int64_t>(0, memory->first);
    r.memory_mib = std::max<int64_t>(0, memory->second);
    r.utilization = Clamp01(double(Quantity(second[2]).value_or(0)) / 100.0);
    out.push_back(std::move(r));
    ++at;
  }
  if (out.empty()) return InvalidArgument("hl-smi: no AIP in the table");
  return out;
}

Result<std::vector<GpuUsage>> HlSmiQueryUsage(std::string_view csv) {
  HF_ASSIGN_OR_RETURN(auto rows, ParseQueryCsv(csv, "hl-smi -Q",
                                               {"index", "utilization.aip", "memory.used"}));
  std::vector<GpuUsage> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    GpuUsage u;
    u.index = int32_t(i);
    if (auto it = r.find("index"); it != r.end()) {
      const auto index = ToInt(it->second);
      if (!index || *index < 0 || *index > INT32_MAX) {
        return InvalidArgument("hl-smi -Q device " + std::to_string(i) + ": bad index");
      }
      u.index = int32_t(*index);
    }
    if (auto it = r.find("utilization.aip"); it != r.end()) {
      u.utilization = Clamp01(double(Quantity(it->second).value_or(0)) / 100.0);
    }
    if (auto it = r.find("memory.used"); it != r.end()) {
      u.memory_used_mib = std::max<int64_t>(0, Quantity(it->second).value_or(0));
    }
    out.push_back(u);
  }
  return out;
}

std::map<std::string, std::string> GaudiVendor::Bind(const std::vector<Bound>& devices) const {
  std::string modules, indices;
  for (const Bound& d : devices) {
    modules += (modules.empty() ? "" : ",") + d.bind_id;
    indices += (indices.empty() ? "" : ",") + std::to_string(d.vendor_index);
  }
  return {{"HABANA_VISIBLE_MODULES", modules}, {"HABANA_VISIBLE_DEVICES", indices}};
}

Result<std::vector<Found>> GaudiVendor::Discover(const std::string& tool, const Runner& run) const {
  if (const std::optional<std::string> csv =
          run(tool + " -Q index,name,bus_id,uuid,module_id,memory.total -f csv,nounits")) {
    return HlSmiQueryDevices(*csv);
  }
  // An hl-smi without the query (or the module id): the table, bound by index.
  const std::optional<std::string> table = run(tool);
  if (!table) return Unavailable(tool + " failed");
  HF_ASSIGN_OR_RETURN(std::vector<HlSmiRow> rows, ParseHlSmiTable(*table));
  spdlog::warn("agent: {} -Q failed: Gaudi devices bound by index, not module id", tool);
  std::vector<Found> out;
  for (const HlSmiRow& r : rows) {
    Found f;
    f.device.index = r.index;
    f.device.vendor = kVendorHabana;
    f.device.model = r.name;
    f.device.memory_mib = r.memory_mib;
    f.bus_id = r.bus_id;
    f.bind_id = std::to_string(r.index);
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<GpuUsage>> GaudiVendor::Measure(const std::string& tool, const Runner& run) const {
  if (const std::optional<std::string> csv =
          run(tool + " -Q index,utilization.aip,memory.used -f csv,nounits")) {
    return HlSmiQueryUsage(*csv);
  }
  const std::optional<std::string> table = run(tool);
  if (!table) return Unavailable(tool + " failed");
  HF_ASSIGN_OR_RETURN(std::vector<HlSmiRow> rows, ParseHlSmiTable(*table));
  std::vector<GpuUsage> out;
  for (const HlSmiRow& r : rows) {
    out.push_back(GpuUsage{.index = r.index, .utilization = r.utilization,
                           .memory_used_mib = r.memory_used_mib});
  }
  return out;
}

}  // namespace hf::agent::accel
