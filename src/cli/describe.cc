#include "cli/describe.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/output.h"

namespace hf::cli {
namespace {

using nlohmann::json;

constexpr char kNone[] = "<none>";

// "Key:" padded so the values line up, one field a line.
class Fields {
 public:
  void Add(std::string key, std::string value) { rows_.emplace_back(key + ":", std::move(value)); }
  std::string Render() const {
    size_t width = 0;
    for (const auto& [k, v] : rows_) width = std::max(width, k.size());
    std::string out;
    for (const auto& [k, v] : rows_) {
      out += k;
      out.append(width + 2 - k.size(), ' ');
      out += v;
      out += '\n';
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

const json& Child(const json& o, std::string_view key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

// ["a", "b"] -> "a, b"; anything else -> "<none>".
std::string Join(const json& list, std::string_view sep = ", ") {
  if (!list.is_array() || list.empty()) return kNone;
  std::string out;
  for (const json& e : list) {
    if (!out.empty()) out += sep;
    out += e.is_string() ? e.get<std::string>() : e.dump();
  }
  return out;
}

std::string JoinMap(const json& map) {
  if (!map.is_object() || map.empty()) return kNone;
  std::string out;
  for (const auto& [k, v] : map.items()) {
    if (!out.empty()) out += ", ";
    out += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

// A time with its age: "2026-12-02T14:00:00Z (5m ago)".
std::string TimeWithAge(const json& o, std::string_view key, int64_t now_s) {
  const std::string t = Text(o, key);
  const std::string age = AgeOf(o, key, now_s);
  return age.empty() ? t : t + " (" + age + " ago)";
}

std::string RequestsText(const json& r) {
  if (!r.is_object()) return kNone;
  std::string out = "cpu " + Cores(IntField(r, "cpu_milli").value_or(0)) + ", memory " +
                    Memory(IntField(r, "memory_mib").value_or(0)) + ", gpu " + GpuRequest(r);
  if (int64_t m = IntField(r, "gpu_memory_mib").value_or(0); m > 0) {
    out += " (" + Memory(m) + " each)";
  }
  if (const json& models = Child(r, "gpu_models"); models.is_array() && !models.empty()) {
    out += ", models " + Join(models, ",");
  }
  return out;
}

std::string AllocationText(const json& a) {
  if (!a.is_object()) return kNone;
  std::string out = "cpu " + Cores(IntField(a, "cpu_milli").value_or(0)) + ", memory " +
                    Memory(IntField(a, "memory_mib").value_or(0));
  const json& gpus = Child(a, "gpus");
  if (gpus.is_array() && !gpus.empty()) {
    out += ", gpus";
    for (size_t i = 0; i < gpus.size(); ++i) {
      out += i ? ", " : " ";
      out += Text(gpus[i], "index") + " (" +
             std::to_string(IntField(gpus[i], "milli").value_or(0)) + "m";
      if (int64_t m = IntField(gpus[i], "memory_mib").value_or(0); m > 0) out += ", " + Memory(m);
      out += ")";
    }
  }
  if (std::string rdma = Text(a, "rdma_device"); rdma != kNone) out += ", rdma " + rdma;
  return out;
}

// Each line of `text` indented by two spaces.
std::string Indented(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size() - 1;
    out += "  " + text.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}

// A locality id; -1 (unknown) as "-".
std::string Locality(const json& o, std::string_view key) {
  std::optional<int64_t> v = IntField(o, key);
  return v && *v < 0 ? "-" : Text(o, key);
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "";
  return " (" + std::to_string(part * 100 / whole) + "%)";
}

}  // namespace

std::string DescribeTask(const json& t, int64_t now_s) {
  Fields f;
  f.Add("Name", Text(t, "name"));
  f.Add("ID", Text(t, "id"));
  f.Add("State", Text(t, "state"));
  f.Add("Priority", Text(t, "priority"));
  f.Add("Group", Text(t, "group"));
  f.Add("Kind", Text(t, "kind"));
  f.Add("Preemptible", Text(t, "preemptible"));
  f.Add("Node", Text(t, "node"));
  f.Add("Requests", RequestsText(Child(t, "requests")));
  if (Child(t, "rdma_required").is_boolean() && Child(t, "rdma_required").get<bool>()) {
    f.Add("RDMA", "required");
  }
  f.Add("Allocation", AllocationText(Child(t, "allocation")));
  f.Add("Pending Reason", Text(t, "pending_reason"));
  f.Add("Depends On", Join(Child(t, "depends_on")));
  f.Add("Command", Join(Child(t, "command"), " "));
  f.Add("Env", JoinMap(Child(t, "env")));
  f.Add("Created", TimeWithAge(t, "created_at", now_s));
  f.Add("Updated", TimeWithAge(t, "updated_at", now_s));
  const json& events = Child(t, "events");
  if (!events.is_array() || events.empty()) {
    f.Add("Events", kNone);
    return f.Render();
  }
  std::vector<std::vector<std::string>> rows = {{"AGE", "KIND", "MESSAGE"}};
  for (const json& e : events) {
    const std::string age = AgeOf(e, "time", now_s);
    rows.push_back({age.empty() ? Text(e, "time") : age, Text(e, "kind"), Text(e, "message")});
  }
  return f.Render() + "Events:\n" + Indented(FormatTable(rows));
}

std::string DescribeNode(const json& n) {
  Fields f;
  f.Add("Name", Text(n, "name"));
  f.Add("Condition", Text(n, "condition"));
  f.Add("Labels", JoinMap(Child(n, "labels")));
  const json& topo = Child(n, "topology");
  f.Add("Topology", topo.is_object() ? "zone " + Text(topo, "zone") + ", switch " +
                                           Text(topo, "switch") + ", rack " + Text(topo, "rack")
                                     : kNone);
  const json& gpus = Child(n, "gpus");
  const int64_t gpu_count = gpus.is_array() ? static_cast<int64_t>(gpus.size()) : 0;
  const int64_t cpu = IntField(n, "cpu_milli").value_or(0);
  const int64_t mem = IntField(n, "memory_mib").value_or(0);
  f.Add("Capacity",
        "cpu " + Cores(cpu) + ", memory " + Memory(mem) + ", gpus " + std::to_string(gpu_count));
  const json& a = Child(n, "allocated");
  const int64_t a_cpu = IntField(a, "cpu_milli").value_or(0);
  const int64_t a_mem = IntField(a, "memory_mib").value_or(0);
  const int64_t a_gpu = IntField(a, "gpu_milli").value_or(0);
  f.Add("Allocated", "cpu " + Cores(a_cpu) + Percent(a_cpu, cpu) + ", memory " + Memory(a_mem) +
                         Percent(a_mem, mem) + ", gpus " + Cores(a_gpu) +
                         Percent(a_gpu, gpu_count * 1000));
  std::vector<std::string> rdma;
  if (const json& list = Child(n, "rdma"); list.is_array()) {
    for (const json& r : list)
      rdma.push_back(Text(r, "name") + " (numa " + Locality(r, "numa") + ")");
  }
  f.Add("RDMA", rdma.empty() ? kNone : Join(json(rdma)));
  f.Add("Tasks", Join(Child(n, "tasks")));
  if (gpu_count == 0) {
    f.Add("GPUs", kNone);
    return f.Render();
  }
  std::vector<std::vector<std::string>> rows = {
      {"INDEX", "MODEL", "MEMORY", "ALLOCATED", "ALLOCATED MEMORY", "NUMA", "PCIE", "NVLINK"}};
  for (const json& g : gpus) {
    rows.push_back({Text(g, "index"), Text(g, "model"),
                    Memory(IntField(g, "memory_mib").value_or(0)),
                    std::to_string(IntField(g, "allocated_milli").value_or(0)) + "m",
                    Memory(IntField(g, "allocated_memory_mib").value_or(0)), Locality(g, "numa"),
                    Locality(g, "pcie_switch"), Locality(g, "nvlink_domain")});
  }
  return f.Render() + "GPUs:\n" + Indented(FormatTable(rows));
}

}  // namespace hf::cli
