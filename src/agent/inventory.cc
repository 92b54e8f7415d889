#include "agent/inventory.h"

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/pci_locality.h"
#include "core/model_json.h"
#include "core/yaml_json.h"

namespace hf::agent {
namespace {

using nlohmann::json;

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> SplitComma(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    out.push_back(
        Trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// A whole decimal number, or nullopt ("[N/A]", empty, garbage).
std::optional<int64_t> ToInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<double> ToDouble(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

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

// The words of `line`, split at any run of spaces and tabs (so an empty cell
// between two tabs disappears).
std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.emplace_back(line.substr(start, i - start));
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
  for (const std::string& part : SplitComma(cell)) {
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

// Connected components over slots 0..n-1.
class Components {
 public:
  explicit Components(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t Find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Join(size_t a, size_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }
  // Per slot: its component's id, dense from 0 in slot order, or -1 for a
  // component of one slot (it shares the link with nothing).
  std::vector<int32_t> DenseIds() {
    std::vector<size_t> size(parent_.size(), 0);
    for (size_t i = 0; i < parent_.size(); ++i) ++size[Find(i)];
    std::map<size_t, int32_t> id_of_root;
    std::vector<int32_t> out(parent_.size(), -1);
    for (size_t i = 0; i < parent_.size(); ++i) {
      const size_t root = Find(i);
      if (size[root] < 2) continue;
      out[i] = id_of_root.emplace(root, int32_t(id_of_root.size())).first->second;
    }
    return out;
  }

 private:
  std::vector<size_t> parent_;
};

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable(std::string("cannot read the ") + what + " " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<json> YamlTextToJson(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  Result<json> j = YamlToJson(root);
  if (!j.ok()) return InvalidArgument(source + ": " + j.status().message());
  if (!j->is_object()) return InvalidArgument(source + ": must be a mapping");
  return j;
}

// The value of "Key:   123 kB" in /proc/meminfo, in kB; nullopt if missing.
std::optional<int64_t> MeminfoKb(std::string_view meminfo, std::string_view key) {
  for (std::string_view line : Lines(meminfo)) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      std::istringstream in{std::string(line.substr(key.size() + 1))};
      int64_t kb = 0;
      if (in >> kb) return kb;
    }
  }
  return std::nullopt;
}

double Clamp01(double v) { return std::isnan(v) ? 0 : std::clamp(v, 0.0, 1.0); }

bool ExecutableOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string_view rest = path;
  while (true) {
    const size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) return false;
    rest.remove_prefix(colon + 1);
  }
}

// Runs `command` through the shell and returns its stdout; nullopt when it
// cannot run or exits non-zero.
std::optional<std::string> RunCapture(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) return std::nullopt;
  return out;
}

std::string Slurp(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Result<Inventory> ParseInventory(std::string_view text, const std::string& source) {
  HF_ASSIGN_OR_RETURN(json j, YamlTextToJson(text, source));
  Inventory inv;
  if (j.contains("usage_file")) {
    if (!j["usage_file"].is_string() || j["usage_file"].get<std::string>().empty()) {
      return InvalidArgument(source + ": usage_file must be a non-empty string");
    }
    inv.usage_file = j["usage_file"].get<std::string>();
    j.erase("usage_file");
  }
  // The hostname default needs a name to pass NodeSpecFromJson; the caller
  // replaces it when the file has none.
  const bool unnamed = !j.contains("name");
  if (unnamed) j["name"] = "unnamed";
  Result<NodeSpec> spec = NodeSpecFromJson(j);
  if (!spec.ok()) return InvalidArgument(source + ": " + spec.status().message());
  inv.spec = std::move(spec).value();
  if (unnamed) inv.spec.name.clear();
  return inv;
}

Result<Inventory> LoadInventoryFile(const std::string& path) {
  HF_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "inventory file"));
  HF_ASSIGN_OR_RETURN(Inventory inv, ParseInventory(text, path));
  if (!inv.usage_file.empty() && inv.usage_file[0] != '/') {
    inv.usage_file =
        (std::filesystem::path(path).parent_path() / inv.usage_file).lexically_normal().string();
  }
  return inv;
}

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
  std::vector<GpuDevice> out;
  int line_no = 0;
  for (std::string_view line : Lines(csv)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    const std::vector<std::string> f = SplitComma(line);
    const std::string where = "nvidia-smi output line " + std::to_string(line_no);
    if (f.size() != 4)
      return InvalidArgument(where + ": want 4 fields, got " + std::to_string(f.size()));
    GpuDevice g;
    const auto index = ToInt(f[0]);
    if (!index || *index < 0) return InvalidArgument(where + ": bad index '" + f[0] + "'");
    g.index = static_cast<int32_t>(*index);
    g.uuid = f[1];
    g.model = f[2];
    if (g.model.rfind("NVIDIA ", 0) == 0) g.model.erase(0, 7);
    g.vendor = "nvidia";
    const auto mem = ToInt(f[3]);
    g.memory_mib = mem && *mem > 0 ? *mem : 0;
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
    g.nvlink_domain = nvlink_ids[slot];
    g.pcie_switch = pcie_ids[slot];
    g.numa = numa[slot];
  }
  return Status::Ok();
}

Result<std::vector<GpuUsage>> ParseNvidiaSmiUsage(std::string_view csv) {
  std::vector<GpuUsage> out;
  int line_no = 0;
  for (std::string_view line : Lines(csv)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    const std::vector<std::string> f = SplitComma(line);
    if (f.size() != 3) {
      return InvalidArgument("nvidia-smi output line " + std::to_string(line_no) +
                             ": want 3 fields");
    }
    const auto index = ToInt(f[0]);
    if (!index)
      return InvalidArgument("nvidia-smi output line " + std::to_string(line_no) + ": bad index");
    GpuUsage u;
    u.index = static_cast<int32_t>(*index);
    u.utilization = Clamp01(ToDouble(f[1]).value_or(0) / 100.0);
    u.memory_used_mib = std::max<int64_t>(0, ToInt(f[2]).value_or(0));
    out.push_back(u);
  }
  return out;
}

int64_t MemTotalMib(std::string_view meminfo) {
  return MeminfoKb(meminfo, "MemTotal").value_or(0) / 1024;
}

double MemoryUsedRatio(std::string_view meminfo) {
  const auto total = MeminfoKb(meminfo, "MemTotal");
  const auto avail = MeminfoKb(meminfo, "MemAvailable");
  if (!total || !avail || *total <= 0) return 0;
  return Clamp01(1.0 - static_cast<double>(*avail) / static_cast<double>(*total));
}

int CpuCount(std::string_view cpuinfo) {
  int n = 0;
  for (std::string_view line : Lines(cpuinfo)) {
    if (line.rfind("processor", 0) == 0) {
      const std::string rest = Trim(line.substr(9));
      if (!rest.empty() && rest[0] == ':') ++n;
    }
  }
  return n;
}

Result<NodeUsage> ParseUsage(std::string_view text, const std::string& source) {
  HF_ASSIGN_OR_RETURN(json j, YamlTextToJson(text, source));
  NodeUsage u;
  auto ratio = [&](const json& v, const std::string& field, double& out) -> Status {
    if (!v.is_number()) return InvalidArgument(source + ": " + field + " must be a number");
    out = Clamp01(v.get<double>());
    return Status::Ok();
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "cpu_load") {
      HF_RETURN_IF_ERROR(ratio(value, key, u.cpu_load));
    } else if (key == "memory_used") {
      HF_RETURN_IF_ERROR(ratio(value, key, u.memory_used));
    } else if (key == "gpus") {
      if (!value.is_array()) return InvalidArgument(source + ": gpus must be a list");
      for (size_t i = 0; i < value.size(); ++i) {
        const json& g = value[i];
        const std::string path = "gpus[" + std::to_string(i) + "]";
        if (!g.is_object()) return InvalidArgument(source + ": " + path + " must be a mapping");
        GpuUsage gu;
        for (const auto& [k, v] : g.items()) {
          if (k == "index") {
            if (!v.is_number_integer() || v.get<int64_t>() < 0) {
              return InvalidArgument(source + ": " + path +
                                     ".index must be a non-negative integer");
            }
            gu.index = v.get<int32_t>();
          } else if (k == "utilization") {
            HF_RETURN_IF_ERROR(ratio(v, path + ".utilization", gu.utilization));
          } else if (k == "memory_used_mib") {
            if (!v.is_number_integer() || v.get<int64_t>() < 0) {
              return InvalidArgument(source + ": " + path +
                                     ".memory_used_mib must be a non-negative integer");
            }
            gu.memory_used_mib = v.get<int64_t>();
          } else {
            return InvalidArgument(source + ": unknown field " + path + "." + k);
          }
        }
        u.gpus.push_back(gu);
      }
    } else {
      return InvalidArgument(source + ": unknown field " + key);
    }
  }
  return u;
}

std::string Hostname() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  std::string name = host;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

Inventory DiscoverInventory() {
  Inventory inv;
  inv.spec.name = Hostname();
  int cpus = CpuCount(Slurp("/proc/cpuinfo"));
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  inv.spec.cpu_milli = static_cast<int64_t>(std::max(cpus, 1)) * 1000;
  inv.spec.memory_mib = MemTotalMib(Slurp("/proc/meminfo"));
  if (ExecutableOnPath("nvidia-smi")) {
    if (auto out = RunCapture(
            "nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits "
            "2>/dev/null")) {
      if (Result<std::vector<GpuDevice>> gpus = ParseNvidiaSmiInventory(*out); gpus.ok()) {
        inv.spec.gpus = std::move(gpus).value();
        inv.gpus_from_nvidia_smi = true;
        // Locality is a bonus: without it the GPUs are still usable, so a
        // failure is logged and the ids stay unknown.
        if (auto topo = RunCapture("nvidia-smi topo -m 2>/dev/null")) {
          if (Status s = ApplyNvidiaSmiTopology(*topo, inv.spec.gpus); !s.ok()) {
            spdlog::warn("agent: GPU locality unknown: {}", s.message());
          }
        } else {
          spdlog::warn("agent: GPU locality unknown: nvidia-smi topo -m failed");
        }
      } else {
        std::fprintf(stderr, "heteroflow agent: ignoring GPUs: %s\n",
                     gpus.status().message().c_str());
      }
    }
  }
  std::error_code ec;
  const std::filesystem::path ib = "/sys/class/infiniband";
  if (std::filesystem::is_directory(ib, ec)) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(ib, ec)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (auto& n : names) inv.spec.rdma.push_back(RdmaDevice{.name = std::move(n)});
  }
  // PCIe switch and NUMA node of the GPUs and NICs, from hwloc (NVLink stays
  // nvidia-smi's). Like nvidia-smi's topology, a bonus: a failure is logged.
  if (!inv.spec.gpus.empty() || !inv.spec.rdma.empty()) {
    std::vector<std::string> bus_ids(inv.spec.gpus.size());
    if (inv.gpus_from_nvidia_smi) {
      if (auto out = RunCapture("nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader 2>/dev/null")) {
        bus_ids = ParseNvidiaSmiBusIds(*out, inv.spec.gpus);
      }
    }
    if (Status s = ApplyPciLocality("", bus_ids, inv.spec.gpus, inv.spec.rdma); !s.ok()) {
      spdlog::warn("agent: PCIe locality unknown: {}", s.message());
    }
  }
  return inv;
}

NodeUsage MeasureUsage(int64_t cpu_milli, bool with_gpus) {
  NodeUsage u;
  double load1 = 0;
  if (getloadavg(&load1, 1) == 1 && cpu_milli > 0) {
    u.cpu_load = Clamp01(load1 / (static_cast<double>(cpu_milli) / 1000.0));
  }
  u.memory_used = MemoryUsedRatio(Slurp("/proc/meminfo"));
  if (with_gpus) {
    if (auto out = RunCapture("nvidia-smi --query-gpu=index,utilization.gpu,memory.used "
                              "--format=csv,noheader,nounits 2>/dev/null")) {
      if (auto gpus = ParseNvidiaSmiUsage(*out); gpus.ok()) u.gpus = std::move(gpus).value();
    }
  }
  return u;
}

Result<NodeUsage> CurrentUsage(const Inventory& inv) {
  if (inv.usage_file.empty()) return MeasureUsage(inv.spec.cpu_milli, inv.gpus_from_nvidia_smi);
  HF_ASSIGN_OR_RETURN(std::string text, ReadFile(inv.usage_file, "usage file"));
  return ParseUsage(text, inv.usage_file);
}

json UsageToJson(const NodeUsage& u) {
  json gpus = json::array();
  for (const GpuUsage& g : u.gpus) {
    gpus.push_back({{"index", g.index},
                    {"utilization", g.utilization},
                    {"memory_used_mib", g.memory_used_mib}});
  }
  return {{"cpu_load", u.cpu_load}, {"memory_used", u.memory_used}, {"gpus", gpus}};
}

}  // namespace hf::agent
