#include "agent/accelerators/accelerator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <set>

#include "agent/accelerators/amd/amd.h"
#include "agent/accelerators/ascend/ascend.h"
#include "agent/accelerators/gaudi/gaudi.h"
#include "agent/accelerators/nvidia/nvidia.h"

namespace hf::agent::accel {

std::optional<std::string> RunCommand(const std::string& command) {
  // A tool that hangs (a wedged device) must not hold up a heartbeat:
  // coreutils' timeout ends it, with SIGKILL should it ignore SIGTERM (the
  // agent's threads block SIGTERM, and children inherit the mask).
  FILE* p = popen(("timeout -k 2 " + std::to_string(kToolTimeoutS) + " " + command + " 2>/dev/null").c_str(),
                  "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) return std::nullopt;
  return out;
}

const std::vector<const Vendor*>& AllVendors() {
  static const NvidiaVendor nvidia;
  static const AmdVendor amd;
  static const AscendVendor ascend;
  static const GaudiVendor gaudi;
  static const std::vector<const Vendor*> all = {&nvidia, &amd, &ascend, &gaudi};
  return all;
}

const Vendor* FindVendor(std::string_view name) {
  for (const Vendor* v : AllVendors()) {
    if (v->Name() == name) return v;
  }
  return nullptr;
}

namespace {

// Logs a vendor's failure once per process: discovery runs at start, usage
// at every heartbeat, and a broken tool would otherwise fill the log.
void LogOnce(const std::string& key, const std::string& message) {
  static std::mutex mu;  // guards logged
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mu);
  if (logged.insert(key).second) spdlog::warn("agent: {}", message);
}

}  // namespace

bool Vendor::Present(const std::function<bool(const std::string& tool)>& on_path) const {
  const std::vector<std::string> tools = Tools();
  return std::any_of(tools.begin(), tools.end(), on_path);
}

Discovered DiscoverAll(const Runner& run,
                       const std::function<bool(const std::string& tool)>& on_path,
                       const std::vector<const Vendor*>& vendors) {
  Discovered d;
  for (const Vendor* v : vendors) {
    if (!v->Present(on_path)) continue;  // not installed: silently absent
    const std::vector<std::string> tools = v->Tools();
    const auto on = std::find_if(tools.begin(), tools.end(), on_path);
    const std::string tool = on == tools.end() ? "" : *on;
    const std::string name(v->Name());
    Result<std::vector<Found>> found = v->Discover(tool, run);
    if (!found.ok()) {
      LogOnce("discover " + name, "ignoring " + name + " devices: " + found.status().message());
      continue;
    }
    if (found->empty()) continue;  // nothing to measure either
    d.tools[name] = tool;
    for (Found& f : *found) {
      const int32_t node_index = int32_t(d.gpus.size());
      d.vendor_index[node_index] = {name, f.device.index};
      d.bind_ids[node_index] = f.bind_id;
      d.bus_ids.push_back(f.bus_id);
      f.device.index = node_index;
      f.device.vendor = name;
      d.gpus.push_back(std::move(f.device));
    }
  }
  return d;
}

std::vector<GpuUsage> MeasureAll(const Discovered& d, const Runner& run,
                                 const std::vector<const Vendor*>& vendors) {
  std::vector<GpuUsage> out;
  for (const auto& entry : d.tools) {
    const std::string& name = entry.first;
    const std::string& tool = entry.second;
    const auto v = std::find_if(vendors.begin(), vendors.end(),
                                [&](const Vendor* x) { return x->Name() == name; });
    if (v == vendors.end()) continue;
    Result<std::vector<GpuUsage>> usage = (*v)->Measure(tool, run);
    if (!usage.ok()) {
      LogOnce("measure " + name, "no usage of " + name + " devices: " + usage.status().message());
      continue;
    }
    for (const GpuUsage& u : *usage) {
      for (const auto& [node_index, vi] : d.vendor_index) {
        if (vi.first != name || vi.second != u.index) continue;
        GpuUsage g = u;
        g.index = node_index;
        out.push_back(g);
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuUsage& a, const GpuUsage& b) { return a.index < b.index; });
  return out;
}

std::map<std::string, std::string> Vendor::Bind(const std::vector<Bound>& devices) const {
  std::string ids;
  for (const Bound& d : devices) ids += (ids.empty() ? "" : ",") + d.bind_id;
  return {{std::string(BindingVariable()), ids}};
}

std::map<std::string, std::string> BindingEnv(
    const std::vector<GpuDevice>& node_gpus, const std::map<int32_t, std::string>& bind_ids,
    const std::map<int32_t, std::pair<std::string, int32_t>>& vendor_index,
    const std::vector<int32_t>& grants) {
  // How each node index binds: the discovered ids, else its rank among its
  // vendor's devices in index order.
  std::vector<const GpuDevice*> sorted;
  for (const GpuDevice& g : node_gpus) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const GpuDevice* a, const GpuDevice* b) { return a->index < b->index; });
  std::map<std::string, int32_t> rank;
  std::map<int32_t, std::pair<std::string, Bound>> bound;  // index -> (vendor, how)
  for (const GpuDevice* g : sorted) {
    const int32_t r = rank[g->vendor]++;
    Bound b{.bind_id = std::to_string(r), .vendor_index = r};
    if (auto it = bind_ids.find(g->index); it != bind_ids.end()) b.bind_id = it->second;
    if (auto it = vendor_index.find(g->index); it != vendor_index.end()) b.vendor_index = it->second.second;
    bound[g->index] = {g->vendor, std::move(b)};
  }
  std::map<std::string, std::vector<Bound>> of_vendor;
  for (const auto& [vendor, count] : rank) of_vendor[vendor];
  for (int32_t index : grants) {
    if (auto it = bound.find(index); it != bound.end()) of_vendor[it->second.first].push_back(it->second.second);
  }
  std::map<std::string, std::string> env;
  for (const auto& [vendor, devices] : of_vendor) {
    if (const Vendor* v = FindVendor(vendor)) env.merge(v->Bind(devices));
  }
  return env;
}

std::vector<std::string> VariablesToClear(const std::map<std::string, std::string>& binding) {
  std::vector<std::string> out;
  for (const Vendor* v : AllVendors()) {
    std::vector<std::string_view> names = v->ConflictingVariables();
    for (std::string_view b : v->BindingVariables()) names.push_back(b);
    for (std::string_view n : names) {
      const std::string name(n);
      if (!binding.contains(name) && std::find(out.begin(), out.end(), name) == out.end()) {
        out.push_back(name);
      }
    }
  }
  return out;
}

std::map<std::string, std::string> CollectiveEnvFor(const std::vector<std::string>& vendors,
                                                    const std::string& rdma_device,
                                                    const std::string& address) {
  std::map<std::string, std::string> env;
  for (const std::string& name : vendors) {
    if (const Vendor* v = FindVendor(name)) env.merge(v->CollectiveEnv(rdma_device, address));
  }
  return env;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> CsvFields(std::string_view line) {
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

double Clamp01(double v) { return std::isnan(v) ? 0 : std::clamp(v, 0.0, 1.0); }

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

Result<std::vector<std::map<std::string, std::string>>> ParseQueryCsv(
    std::string_view text, const std::string& what, const std::vector<std::string>& positional) {
  std::vector<std::map<std::string, std::string>> out;
  std::vector<std::string> columns;
  int line_no = 0;
  for (std::string_view line : Lines(text)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    std::vector<std::string> fields = CsvFields(line);
    if (columns.empty()) {
      // A header names its columns; a device line starts with a value. The
      // positional names decide: a header holds one of them as a field.
      const bool header = std::any_of(fields.begin(), fields.end(), [&](std::string f) {
        f = Trim(f.substr(0, f.find('[')));
        return std::find(positional.begin(), positional.end(), f) != positional.end();
      });
      if (header) {
        for (std::string& f : fields) f = Trim(f.substr(0, f.find('[')));
        columns = std::move(fields);
        continue;
      }
      columns = positional;
    }
    if (fields.size() != columns.size()) {
      return InvalidArgument(what + " line " + std::to_string(line_no) + ": " +
                             std::to_string(fields.size()) + " fields for " +
                             std::to_string(columns.size()) + " columns");
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < fields.size(); ++i) row[columns[i]] = fields[i];
    out.push_back(std::move(row));
  }
  return out;
}

std::optional<int64_t> Quantity(const std::string& value) {
  const std::vector<std::string> words = Words(value);
  if (words.empty()) return std::nullopt;
  std::string number = words[0];
  // "512Mib", "95%": the unit may follow without a space.
  while (!number.empty() && !std::isdigit(static_cast<unsigned char>(number.back()))) number.pop_back();
  return ToInt(number);
}

Components::Components(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }

size_t Components::Find(size_t x) {
  while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
  return x;
}

void Components::Join(size_t a, size_t b) {
  a = Find(a);
  b = Find(b);
  if (a != b) parent_[std::max(a, b)] = std::min(a, b);
}

std::vector<int32_t> Components::DenseIds() {
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

namespace {

// n for "<prefix><n>", else nullopt.
std::optional<int32_t> LabelIndex(const std::string& label, std::string_view prefix) {
  if (label.size() <= prefix.size() || label.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  const std::optional<int64_t> n = ToInt(label.substr(prefix.size()));
  if (!n || *n < 0 || *n > INT32_MAX) return std::nullopt;
  return int32_t(*n);
}

}  // namespace

Status ApplyLinkMatrix(const std::vector<std::string_view>& lines, size_t header,
                       std::string_view prefix, const std::string& what,
                       const std::function<bool(const std::string& cell)>& linked,
                       std::vector<GpuDevice>& gpus) {
  if (header >= lines.size()) return InvalidArgument(what + ": no link matrix");
  std::vector<int32_t> columns;  // device index of each leading column
  for (const std::string& w : Words(lines[header])) {
    const std::optional<int32_t> n = LabelIndex(w, prefix);
    if (!n) break;
    columns.push_back(*n);
  }
  if (columns.empty()) {
    return InvalidArgument(what + ": the matrix header has no " + std::string(prefix) + "<n> columns");
  }
  std::map<int32_t, std::vector<std::string>> rows;
  for (size_t at = header + 1; at < lines.size(); ++at) {
    std::vector<std::string> cells = Words(lines[at]);
    if (cells.empty()) break;
    const std::optional<int32_t> n = LabelIndex(cells[0], prefix);
    if (!n) break;
    if (cells.size() < columns.size() + 1) {
      return InvalidArgument(what + ": row " + cells[0] + " has " + std::to_string(cells.size() - 1) +
                             " cells for " + std::to_string(columns.size()) + " devices");
    }
    cells.erase(cells.begin());
    cells.resize(columns.size());
    rows[*n] = std::move(cells);
  }
  // Positions in ascending index, so that dense ids follow the lowest index.
  std::vector<size_t> order(gpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return gpus[a].index < gpus[b].index; });
  std::map<int32_t, size_t> position;  // device index -> position in `order`
  for (size_t p = 0; p < order.size(); ++p) {
    const int32_t index = gpus[order[p]].index;
    if (!rows.contains(index)) {
      return InvalidArgument(what + ": no row for " + std::string(prefix) + std::to_string(index));
    }
    position[index] = p;
  }
  Components domains(gpus.size());
  for (const auto& [row, cells] : rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      if (columns[c] == row || !linked(cells[c])) continue;
      auto a = position.find(row), b = position.find(columns[c]);
      if (a != position.end() && b != position.end()) domains.Join(a->second, b->second);
    }
  }
  const std::vector<int32_t> ids = domains.DenseIds();
  for (size_t p = 0; p < order.size(); ++p) gpus[order[p]].fabric_domain = ids[p];
  return Status::Ok();
}


}  // namespace hf::agent::accel
