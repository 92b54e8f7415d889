#include "agent/accelerators/amd/amd.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

namespace hf::agent::accel {
namespace {

using Fields = std::map<int32_t, std::map<std::string, std::string>>;

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// N for "card<N>" (JSON and CSV) or "GPU[N]" (plain).
std::optional<int32_t> CardIndex(const std::string& s) {
  std::optional<int64_t> n;
  if (s.rfind("card", 0) == 0) {
    n = ToInt(s.substr(4));
  } else if (s.rfind("GPU[", 0) == 0 && s.back() == ']') {
    n = ToInt(s.substr(4, s.size() - 5));
  }
  if (!n || *n < 0 || *n > INT32_MAX) return std::nullopt;
  return int32_t(*n);
}

// The fields of a CSV line, honouring double quotes ("a, b" is one field).
std::vector<std::string> QuotedCsv(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(Trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(Trim(cur));
  return out;
}

Result<Fields> ParseJson(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return InvalidArgument("rocm-smi --json: not a JSON object");
  Fields out;
  for (const auto& [card, values] : j.items()) {
    const std::optional<int32_t> index = CardIndex(card);
    if (!index) continue;  // "system" and the like
    if (!values.is_object()) return InvalidArgument("rocm-smi --json: " + card + " is not an object");
    auto& f = out[*index];
    for (const auto& [k, v] : values.items()) {
      f[Lower(k)] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  return out;
}

Result<Fields> ParseCsv(const std::vector<std::string_view>& lines, size_t header) {
  std::vector<std::string> keys = QuotedCsv(lines[header]);
  for (std::string& k : keys) k = Lower(k);
  Fields out;
  for (size_t at = header + 1; at < lines.size(); ++at) {
    if (Trim(lines[at]).empty()) continue;
    const std::vector<std::string> cells = QuotedCsv(lines[at]);
    const std::optional<int32_t> index = CardIndex(cells[0]);
    if (!index) continue;  // a trailing system line
    if (cells.size() != keys.size()) {
      return InvalidArgument("rocm-smi --csv line " + std::to_string(at + 1) + ": " +
                             std::to_string(cells.size()) + " fields for " +
                             std::to_string(keys.size()) + " columns");
    }
    for (size_t c = 1; c < cells.size(); ++c) out[*index][keys[c]] = cells[c];
  }
  return out;
}

// "GPU[0]\t\t: Card series: \t\tAMD Instinct MI300X OAM".
Result<Fields> ParsePlain(const std::vector<std::string_view>& lines) {
  Fields out;
  for (size_t at = 0; at < lines.size(); ++at) {
    const std::string line = Trim(lines[at]);
    if (line.rfind("GPU[", 0) != 0) continue;
    const size_t close = line.find(']');
    const std::optional<int32_t> index = CardIndex(line.substr(0, close + 1));
    const size_t colon = line.find(':', close);
    const size_t second = colon == std::string::npos ? colon : line.find(':', colon + 1);
    if (!index) {
      return InvalidArgument("rocm-smi line " + std::to_string(at + 1) + ": bad GPU number: '" +
                             line.substr(0, 80) + "'");
    }
    if (second == std::string::npos) continue;  // a note such as "GPU[0] : Not supported"
    std::string key = Trim(std::string_view(line).substr(colon + 1, second - colon - 1));
    // Some sections prefix the key: "(Topology) Numa Node".
    if (key.rfind('(', 0) == 0 && key.find(')') != std::string::npos) key = Trim(key.substr(key.find(')') + 1));
    out[*index][Lower(key)] = Trim(std::string_view(line).substr(second + 1));
  }
  return out;
}

std::string Get(const std::map<std::string, std::string>& f, const std::string& key) {
  auto it = f.find(key);
  return it == f.end() ? "" : it->second;
}

// "Arcturus GL-XL [Instinct MI100]" -> "MI100"; "AMD Instinct MI300X OAM" ->
// "MI300X OAM"; "Navi 32 [Radeon RX 7700 XT / 7800 XT]" -> "Radeon RX 7700
// XT / 7800 XT".
std::string ModelName(std::string series) {
  const size_t open = series.rfind('['), close = series.rfind(']');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    series = series.substr(open + 1, close - open - 1);
  }
  series = Trim(series);
  for (const char* prefix : {"AMD ", "Instinct "}) {
    if (series.rfind(prefix, 0) == 0) series.erase(0, std::string(prefix).size());
  }
  return series;
}

}  // namespace

Result<std::map<int32_t, std::map<std::string, std::string>>> ParseRocmSmi(std::string_view text) {
  // --json may follow WARNING lines (a device in a low-power state): the
  // object starts at the first line that opens with '{'.
  const std::string trimmed = Trim(text);
  size_t json_at = trimmed.rfind('{', 0) == 0 ? 0 : trimmed.find("\n{");
  if (json_at != std::string::npos && json_at > 0) ++json_at;
  Result<Fields> fields = Fields{};
  if (json_at != std::string::npos) {
    fields = ParseJson(std::string_view(trimmed).substr(json_at));
  } else {
    const std::vector<std::string_view> lines = Lines(text);
    const auto header = std::find_if(lines.begin(), lines.end(), [](std::string_view l) {
      return Trim(l).rfind("device,", 0) == 0;
    });
    fields = header != lines.end() ? ParseCsv(lines, size_t(header - lines.begin())) : ParsePlain(lines);
  }
  if (!fields.ok()) return fields.status();
  if (fields->empty()) return InvalidArgument("rocm-smi: no GPU in the output");
  return fields;
}

Result<std::vector<Found>> RocmSmiDevices(std::string_view text) {
  HF_ASSIGN_OR_RETURN(Fields fields, ParseRocmSmi(text));
  std::vector<Found> out;
  for (const auto& [index, f] : fields) {
    const std::string series = Get(f, "card series");
    if (series.empty() || series == "N/A") {
      return InvalidArgument("rocm-smi: GPU[" + std::to_string(index) + "] has no card series");
    }
    Found d;
    d.device.index = index;
    d.device.vendor = kVendorAmd;
    d.device.model = ModelName(series);
    d.device.uuid = Get(f, "unique id");
    if (d.device.uuid == "N/A") d.device.uuid.clear();
    d.device.memory_mib = std::max<int64_t>(0, ToInt(Get(f, "vram total memory (b)")).value_or(0)) >> 20;
    d.bus_id = Get(f, "pci bus");
    d.bind_id = std::to_string(index);
    out.push_back(std::move(d));
  }
  return out;
}

Status ApplyRocmSmiTopology(std::string_view text, std::vector<GpuDevice>& gpus) {
  const std::vector<std::string_view> lines = Lines(text);
  const auto banner = std::find_if(lines.begin(), lines.end(), [](std::string_view l) {
    return l.find("Link Type between two GPUs") != std::string_view::npos;
  });
  if (banner == lines.end()) return InvalidArgument("rocm-smi --showtopo: no link-type matrix");
  std::vector<GpuDevice> updated = gpus;
  HF_RETURN_IF_ERROR(ApplyLinkMatrix(
      lines, size_t(banner - lines.begin()) + 1, "GPU", "rocm-smi --showtopo",
      [](const std::string& cell) {
        return cell == "XGMI";
      },
      updated));
  // Every cell of the matrix must be one rocm-smi writes.
  for (auto at = banner + 2; at != lines.end() && Trim(*at).rfind("GPU", 0) == 0; ++at) {
    const std::vector<std::string> cells = Words(*at);
    for (size_t c = 1; c < cells.size(); ++c) {
      if (cells[c] != "0" && cells[c] != "XGMI" && cells[c] != "PCIE") {
        return InvalidArgument("rocm-smi --showtopo: unknown link '" + cells[c] + "' in row " + cells[0]);
      }
    }
  }
  // NUMA nodes, where the section is there; the plain lines of the other
  // sections are of no concern here.
  Fields numa;
  {
    std::vector<std::string_view> numa_lines;
    for (std::string_view l : lines) {
      if (l.find("Numa Node") != std::string_view::npos) numa_lines.push_back(l);
    }
    HF_ASSIGN_OR_RETURN(numa, ParsePlain(numa_lines));
  }
  for (GpuDevice& g : updated) {
    auto it = numa.find(g.index);
    const std::optional<int64_t> node = it == numa.end() ? std::nullopt : ToInt(Get(it->second, "numa node"));
    g.numa = node && *node >= 0 ? int32_t(*node) : -1;
  }
  gpus = std::move(updated);
  return Status::Ok();
}

Result<std::vector<GpuUsage>> RocmSmiUsage(std::string_view text) {
  HF_ASSIGN_OR_RETURN(Fields fields, ParseRocmSmi(text));
  std::vector<GpuUsage> out;
  for (const auto& [index, f] : fields) {
    GpuUsage u;
    u.index = index;
    u.utilization = Clamp01(ToDouble(Get(f, "gpu use (%)")).value_or(0) / 100.0);
    u.memory_used_mib = std::max<int64_t>(0, ToInt(Get(f, "vram total used memory (b)")).value_or(0)) >> 20;
    out.push_back(u);
  }
  return out;
}

Result<std::vector<Found>> AmdVendor::Discover(const std::string& tool, const Runner& run) const {
  const std::optional<std::string> out =
      run(tool + " --showproductname --showmeminfo vram --showbus --showuniqueid --json");
  if (!out) return Unavailable(tool + " --showproductname failed");
  HF_ASSIGN_OR_RETURN(std::vector<Found> found, RocmSmiDevices(*out));
  // xGMI hives and NUMA nodes are a bonus, as NVLink is for NVIDIA.
  std::vector<GpuDevice> gpus;
  for (const Found& f : found) gpus.push_back(f.device);
  if (const std::optional<std::string> topo = run(tool + " --showtopo")) {
    if (Status s = ApplyRocmSmiTopology(*topo, gpus); !s.ok()) {
      spdlog::warn("agent: AMD GPU locality unknown: {}", s.message());
    }
  } else {
    spdlog::warn("agent: AMD GPU locality unknown: {} --showtopo failed", tool);
  }
  for (size_t i = 0; i < found.size(); ++i) found[i].device = gpus[i];
  return found;
}

Result<std::vector<GpuUsage>> AmdVendor::Measure(const std::string& tool, const Runner& run) const {
  const std::optional<std::string> out = run(tool + " --showuse --showmeminfo vram --json");
  if (!out) return Unavailable(tool + " --showuse failed");
  return RocmSmiUsage(*out);
}

std::map<std::string, std::string> AmdVendor::CollectiveEnv(const std::string& rdma_device,
                                                            const std::string&) const {
  if (rdma_device.empty()) return {};
  return {{"NCCL_IB_HCA", rdma_device}};
}

}  // namespace hf::agent::accel
