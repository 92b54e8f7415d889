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
using accel::Clamp01;
using accel::Lines;
using accel::Trim;

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
  inv.discovered = accel::DiscoverAll(accel::RunCommand, ExecutableOnPath);
  inv.spec.gpus = inv.discovered.gpus;
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
  // PCIe switch and NUMA node of the devices and NICs, from hwloc, by the
  // devices' PCI addresses (their fabric domains stay their vendors' tools').
  // A bonus, like a tool's topology: a failure is logged.
  if (!inv.spec.gpus.empty() || !inv.spec.rdma.empty()) {
    std::vector<std::string> bus_ids = inv.discovered.bus_ids;
    bus_ids.resize(inv.spec.gpus.size());
    if (Status s = ApplyPciLocality("", bus_ids, inv.spec.gpus, inv.spec.rdma); !s.ok()) {
      spdlog::warn("agent: PCIe locality unknown: {}", s.message());
    }
  }
  return inv;
}

NodeUsage MeasureUsage(int64_t cpu_milli, const accel::Discovered& discovered) {
  NodeUsage u;
  double load1 = 0;
  if (getloadavg(&load1, 1) == 1 && cpu_milli > 0) {
    u.cpu_load = Clamp01(load1 / (static_cast<double>(cpu_milli) / 1000.0));
  }
  u.memory_used = MemoryUsedRatio(Slurp("/proc/meminfo"));
  if (!discovered.tools.empty()) u.gpus = accel::MeasureAll(discovered, accel::RunCommand);
  return u;
}

Result<NodeUsage> CurrentUsage(const Inventory& inv) {
  if (inv.usage_file.empty()) return MeasureUsage(inv.spec.cpu_milli, inv.discovered);
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
