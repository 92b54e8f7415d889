#include "agent/accelerators/nvidia/nvidia.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

namespace hf::agent::accel {
namespace {

// `text` without ANSI escape sequences (ESC '[' parameters, then one final
// byte in '@'..'~'): recent nvidia-smi versions underline the topo header.
std::string StripAnsi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

// N for "GPU<N>", else nullopt.
std::optional<int32_t> GpuLabelIndex(const std::string& label) {
  if (label.size() <= 3 || label.rfind("GPU", 0) != 0) return std::nullopt;
  const auto n = ToInt(label.substr(3));
  if (!n || *n < 0 || *n > std::numeric_limits<int32_t>::max() ||
      !std::isdigit(static_cast<unsigned char>(label[3]))) {
    return std::nullopt;
  }
  return static_cast<int32_t>(*n);
}

// The column names of a topo -m header: its words, with the affinity
// columns whose names hold spaces joined back together. A future
// multi-word column would count as several and make every GPU row's cell
// count differ, which is reported rather than misread.
std::vector<std::string> TopoHeaderColumns(const std::vector<std::string>& words) {
  static const std::vector<std::vector<std::string>> kPhrases = {
      {"CPU", "Affinity"}, {"NUMA", "Affinity"}, {"GPU", "NUMA", "ID"}};
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size();) {
    bool joined = false;
    for (const auto& phrase : kPhrases) {
      if (i + phrase.size() <= words.size() &&
          std::equal(phrase.begin(), phrase.end(), words.begin() + ptrdiff_t(i))) {
        std::string name = phrase[0];
        for (size_t k = 1; k < phrase.size(); ++k) name += " " + phrase[k];
        out.push_back(std::move(name));
        i += phrase.size();
        joined = true;
        break;
      }
    }
    if (!joined) out.push_back(words[i++]);
  }
  return out;
}

// What a matrix cell says about two GPUs, as far as locality goes.
enum class GpuLink {
  kSelf,        // X
  kNvlink,      // NV<n>: n bonded NVLinks
  kPcieSwitch,  // PIX (one PCIe switch) or PXB (several, below one host bridge)
  kFarther,     // PHB, NODE, SYS (SOC on old drivers): through a host bridge or further
  kUnknown,
};

GpuLink ClassifyGpuLink(const std::string& cell) {
  if (cell == "X") return GpuLink::kSelf;
  if (cell.size() > 2 && cell.rfind("NV", 0) == 0 &&
      std::all_of(cell.begin() + 2, cell.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return GpuLink::kNvlink;
  }
  if (cell == "PIX" || cell == "PXB") return GpuLink::kPcieSwitch;
  if (cell == "PHB" || cell == "NODE" || cell == "SYS" || cell == "SOC") return GpuLink::kFarther;
  return GpuLink::kUnknown;
}

// A "NUMA Affinity" cell: "0" → 0; "N/A" → -1; a list of nodes ("0-1",
// "0,2") → the node when it names only one, else -1 (the GPU is local to no
// single node); nullopt for anything else.
std::optional<int32_t> ParseNumaAffinity(const std::string& cell) {
  if (cell == "N/A") return -1;
  std::optional<int64_t> only;
  bool several = false;
  for (const std::string& part : CsvFields(cell)) {
    const size_t dash = part.find('-');
    const auto lo = ToInt(part.substr(0, dash));
    const auto hi = dash == std::string::npos ? lo : ToInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > std::numeric_limits<int32_t>::max())
      return std::nullopt;
    if (*hi != *lo || (only && *only != *lo)) several = true;
    only = *lo;
  }
  if (several) return -1;
  return static_cast<int32_t>(*only);
}

}  // namespace

std::vector<std::string> ParseNvidiaSmiBusIds(std::string_view csv, const std::vector<GpuDevice>& gpus) {
  std::vector<std::string> out(gpus.size());
  std::istringstream in{std::string(csv)};
  for (std::string line; std::getline(in, line);) {
    const size_t comma = line.find(',');
    if (comma == std::string::npos) continue;
    int index = -1;
    if (std::sscanf(line.substr(0, comma).c_str(), "%d", &index) != 1) continue;
    std::string id = line.substr(comma + 1);
    id.erase(0, id.find_first_not_of(" \t"));
    id.erase(id.find_last_not_of(" \t\r") + 1);
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    char extra = 0;
    if (std::sscanf(id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &func, &extra) != 4) continue;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i].index == index) out[i] = id;
    }
  }
  return out;
}

Result<std::vector<GpuDevice>> ParseNvidiaSmiInventory(std::string_view csv) {
  HF_ASSIGN_OR_RETURN(auto rows, ParseQueryCsv(csv, "nvidia-smi --query-gpu",
                                               {"index", "uuid", "name", "memory.total"}));
  std::vector<GpuDevice> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const std::string where = "nvidia-smi --query-gpu device " + std::to_string(i);
    GpuDevice g;
    g.vendor = kVendorNvidia;
    // Without an index column the devices come in index order.
    g.index = int32_t(i);
    if (auto it = r.find("index"); it != r.end()) {
      const auto index = ToInt(it->second);
      if (!index || *index < 0 || *index > INT32_MAX) {
        return InvalidArgument(where + ": bad index '" + it->second + "'");
      }
      g.index = static_cast<int32_t>(*index);
    }
    auto name = r.find("name");
    if (name == r.end() || name->second.empty()) return InvalidArgument(where + ": no name");
    g.model = name->second;
    if (g.model.rfind("NVIDIA ", 0) == 0) g.model.erase(0, 7);
    if (auto it = r.find("uuid"); it != r.end()) g.uuid = it->second;
    if (auto it = r.find("memory.total"); it != r.end()) {
      g.memory_mib = std::max<int64_t>(0, Quantity(it->second).value_or(0));
    }
    out.push_back(std::move(g));
  }
  return out;
}

Status ApplyNvidiaSmiTopology(std::string_view topo_text, std::vector<GpuDevice>& gpus) {
  const std::string what = "nvidia-smi topo -m";
  const std::string text = StripAnsi(topo_text);
  const std::vector<std::string_view> lines = Lines(text);
  size_t at = 0;
  while (at < lines.size() && Words(lines[at]).empty()) ++at;
  if (at == lines.size()) return InvalidArgument(what + ": empty output");
  const std::vector<std::string> columns = TopoHeaderColumns(Words(lines[at]));
  std::map<int32_t, size_t> column_of_gpu;
  std::optional<size_t> numa_column;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (const auto index = GpuLabelIndex(columns[c])) {
      if (!column_of_gpu.emplace(*index, c).second) {
        return InvalidArgument(what + ": column " + columns[c] + " appears twice in the header");
      }
    } else if (columns[c] == "NUMA Affinity") {
      numa_column = c;
    }
  }
  if (column_of_gpu.empty()) {
    return InvalidArgument(what + ": the first line has no GPU<n> columns: '" + Trim(lines[at]) +
                           "'");
  }

  // The GPU rows, by index. NIC rows are skipped; the legend ends the matrix.
  std::map<int32_t, std::vector<std::string>> row_of_gpu;
  for (++at; at < lines.size(); ++at) {
    std::vector<std::string> cells = Words(lines[at]);
    if (cells.empty()) continue;
    if (cells[0].rfind("Legend", 0) == 0) break;
    const auto index = GpuLabelIndex(cells[0]);
    if (!index) continue;
    const std::string label = cells[0];
    cells.erase(cells.begin());
    if (cells.size() != columns.size()) {
      return InvalidArgument(what + ": row " + label + " has " + std::to_string(cells.size()) +
                             " cells but the header has " + std::to_string(columns.size()) +
                             " columns");
    }
    if (!column_of_gpu.contains(*index)) {
      return InvalidArgument(what + ": row " + label + " has no column in the header");
    }
    if (!row_of_gpu.emplace(*index, std::move(cells)).second) {
      return InvalidArgument(what + ": row " + label + " appears twice");
    }
  }
  for (const auto& [index, column] : column_of_gpu) {
    if (!row_of_gpu.contains(index)) {
      return InvalidArgument(what + ": no row for GPU" + std::to_string(index));
    }
  }
  for (const GpuDevice& g : gpus) {
    if (!row_of_gpu.contains(g.index)) {
      return InvalidArgument(what + ": GPU" + std::to_string(g.index) +
                             " of nvidia-smi --query-gpu is missing");
    }
  }
  // A GPU the query did not list would make the numbering disagree with the
  // node's GPUs; both come from the same driver, so this is a broken read.
  for (const auto& [index, row] : row_of_gpu) {
    if (std::none_of(gpus.begin(), gpus.end(),
                     [index = index](const GpuDevice& g) { return g.index == index; })) {
      return InvalidArgument(what + ": GPU" + std::to_string(index) +
                             " is not among the GPUs of nvidia-smi --query-gpu");
    }
  }

  // Slots in ascending GPU index, so that dense ids follow the lowest index.
  std::vector<int32_t> indices;
  for (const auto& [index, row] : row_of_gpu) indices.push_back(index);
  Components nvlink(indices.size()), pcie(indices.size());
  std::vector<int32_t> numa(indices.size(), -1);
  for (size_t a = 0; a < indices.size(); ++a) {
    const std::vector<std::string>& row = row_of_gpu.at(indices[a]);
    for (size_t b = 0; b < indices.size(); ++b) {
      const std::string& cell = row[column_of_gpu.at(indices[b])];
      const std::string pair =
          "GPU" + std::to_string(indices[a]) + " to GPU" + std::to_string(indices[b]);
      const GpuLink link = ClassifyGpuLink(cell);
      if ((link == GpuLink::kSelf) != (a == b)) {
        return InvalidArgument(what + ": cell '" + cell + "' from " + pair +
                               (a == b ? " should be X" : " says self"));
      }
      switch (link) {
        case GpuLink::kNvlink:
          nvlink.Join(a, b);
          break;
        case GpuLink::kPcieSwitch:
          pcie.Join(a, b);
          break;
        case GpuLink::kUnknown:
          return InvalidArgument(what + ": unknown link '" + cell + "' from " + pair);
        case GpuLink::kSelf:
        case GpuLink::kFarther:
          break;
      }
    }
    if (numa_column) {
      const std::string& cell = row[*numa_column];
      const auto node = ParseNumaAffinity(cell);
      if (!node) {
        return InvalidArgument(what + ": GPU" + std::to_string(indices[a]) +
                               " has a bad NUMA Affinity '" + cell + "'");
      }
      numa[a] = *node;
    }
  }

  const std::vector<int32_t> nvlink_ids = nvlink.DenseIds();
  const std::vector<int32_t> pcie_ids = pcie.DenseIds();
  for (GpuDevice& g : gpus) {
    const size_t slot =
        size_t(std::lower_bound(indices.begin(), indices.end(), g.index) - indices.begin());
    g.fabric_domain = nvlink_ids[slot];
    g.pcie_switch = pcie_ids[slot];
    g.numa = numa[slot];
  }
  return Status::Ok();
}

Result<std::vector<GpuUsage>> ParseNvidiaSmiUsage(std::string_view csv) {
  HF_ASSIGN_OR_RETURN(auto rows, ParseQueryCsv(csv, "nvidia-smi --query-gpu",
                                               {"index", "utilization.gpu", "memory.used"}));
  std::vector<GpuUsage> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    GpuUsage u;
    u.index = int32_t(i);
    if (auto it = r.find("index"); it != r.end()) {
      const auto index = ToInt(it->second);
      if (!index || *index < 0 || *index > INT32_MAX) {
        return InvalidArgument("nvidia-smi --query-gpu device " + std::to_string(i) + ": bad index");
      }
      u.index = static_cast<int32_t>(*index);
    }
    if (auto it = r.find("utilization.gpu"); it != r.end()) {
      u.utilization = Clamp01(double(Quantity(it->second).value_or(0)) / 100.0);
    }
    if (auto it = r.find("memory.used"); it != r.end()) {
      u.memory_used_mib = std::max<int64_t>(0, Quantity(it->second).value_or(0));
    }
    out.push_back(u);
  }
  return out;
}

bool NvidiaVendor::Present(const std::function<bool(const std::string& tool)>& on_path) const {
  return on_path("nvidia-smi") || GetNvml() != nullptr;
}

const Nvml* NvidiaVendor::GetNvml() const {
  std::call_once(nvml_once_, [this] {
    Result<std::unique_ptr<Nvml>> nvml = Nvml::Load(nvml_library_);
    if (nvml.ok()) {
      nvml_ = std::move(nvml).value();
    } else {
      spdlog::warn("agent: NVML not used: {}", nvml.status().message());
    }
  });
  return nvml_.get();
}

Result<std::vector<Found>> NvidiaVendor::Discover(const std::string& tool, const Runner& run) const {
  std::vector<Found> found;
  Result<std::vector<Found>> from_nvml = Unavailable("no NVML");
  if (const Nvml* nvml = GetNvml()) {
    from_nvml = nvml->Devices();
    // NVML that fails on a GPU: nvidia-smi, when there is one, may still read them.
    if (!from_nvml.ok() && tool.empty()) return from_nvml.status();
    if (!from_nvml.ok()) spdlog::warn("agent: NVML: {}; reading nvidia-smi", from_nvml.status().message());
  }
  if (from_nvml.ok()) {
    found = std::move(from_nvml).value();
  } else {
    const std::optional<std::string> out =
        run(tool + " --query-gpu=index,uuid,name,memory.total --format=csv,nounits");
    if (!out) return Unavailable(tool + " --query-gpu failed");
    HF_ASSIGN_OR_RETURN(std::vector<GpuDevice> gpus, ParseNvidiaSmiInventory(*out));
    std::vector<std::string> bus_ids(gpus.size());
    if (const std::optional<std::string> ids =
            run(tool + " --query-gpu=index,pci.bus_id --format=csv,noheader")) {
      bus_ids = ParseNvidiaSmiBusIds(*ids, gpus);
    }
    for (size_t i = 0; i < gpus.size(); ++i) {
      found.push_back(Found{.device = gpus[i], .bind_id = std::to_string(gpus[i].index),
                            .bus_id = bus_ids[i]});
    }
  }
  // Locality is a bonus: without it the GPUs are still usable, so a failure
  // is logged and the ids stay unknown. NVML alone (no nvidia-smi): none.
  if (tool.empty()) return found;
  std::vector<GpuDevice> gpus;
  for (const Found& f : found) gpus.push_back(f.device);
  if (const std::optional<std::string> topo = run(tool + " topo -m")) {
    if (Status s = ApplyNvidiaSmiTopology(*topo, gpus); !s.ok()) {
      spdlog::warn("agent: GPU locality unknown: {}", s.message());
    }
  } else {
    spdlog::warn("agent: GPU locality unknown: {} topo -m failed", tool);
  }
  for (size_t i = 0; i < found.size(); ++i) found[i].device = gpus[i];
  return found;
}

Result<std::vector<GpuUsage>> NvidiaVendor::Measure(const std::string& tool, const Runner& run) const {
  if (const Nvml* nvml = GetNvml()) return nvml->Usage();
  const std::optional<std::string> out =
      run(tool + " --query-gpu=index,utilization.gpu,memory.used --format=csv,nounits");
  if (!out) return Unavailable(tool + " --query-gpu failed");
  return ParseNvidiaSmiUsage(*out);
}

std::map<std::string, std::string> NvidiaVendor::CollectiveEnv(const std::string& rdma_device,
                                                               const std::string&) const {
  if (rdma_device.empty()) return {};
  return {{"NCCL_IB_HCA", rdma_device}};
}

}  // namespace hf::agent::accel
