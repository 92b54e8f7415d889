#include "cli/describe.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/output.h"
#include "core/time.h"

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

// A command's argv, shell-quoted, so that it can be pasted back into a shell.
std::string ShellCommand(const json& argv) {
  if (!argv.is_array() || argv.empty()) return kNone;
  std::string out;
  for (const json& e : argv) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(e.is_string() ? e.get<std::string>() : e.dump());
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

// Backfill's reservation: "room held from 2026-12-02T14:10:00Z on n1 (1), n2 (1)".
std::string ReservationText(const json& r) {
  std::string nodes;
  if (const json& ns = Child(r, "nodes"); ns.is_array()) {
    for (const json& n : ns) {
      nodes += (nodes.empty() ? "" : ", ") + Text(n, "node") + " (" + Text(n, "members") + ")";
    }
  }
  return "room held from " + Text(r, "start") + " on " + (nodes.empty() ? kNone : nodes);
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
  if (const json& vendors = Child(r, "gpu_vendors"); vendors.is_array() && !vendors.empty()) {
    out += ", vendors " + Join(vendors, ",");
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

// A time in ms since the epoch with its age; "<none>" when missing.
std::string TimeMsWithAge(const json& o, std::string_view key, int64_t now_s) {
  std::optional<int64_t> ms = IntField(o, key);
  if (!ms || *ms <= 0) return kNone;
  const std::string age = AgeOfMs(o, key, now_s);
  return FormatTimeSeconds(*ms) + (age.empty() ? "" : " (" + age + " ago)");
}

std::string AutoscalingText(const json& a) {
  if (!a.is_object()) return "off (replicas = min_replicas)";
  return "target " + Text(a, "target_inflight_per_replica") + " in flight per replica, window " +
         Text(a, "window_s") + "s, upscale delay " + Text(a, "upscale_delay_s") +
         "s, downscale delay " + Text(a, "downscale_delay_s") + "s, queue " +
         Text(a, "queue_size") + ", cold start timeout " + Text(a, "cold_start_timeout_s") + "s";
}

std::string DecisionText(const json& d, int64_t now_s) {
  if (!d.is_object()) return kNone;
  std::string out = Text(d, "from") + " -> " + Text(d, "to") + " replicas";
  if (std::string reason = Text(d, "reason"); reason != kNone) out += ": " + reason;
  const std::string age = AgeOfMs(d, "time_ms", now_s);
  if (!age.empty()) out += " (" + age + " ago)";
  return out;
}

// "Events:" and a table of AGE, KIND, MESSAGE (oldest first, as the API
// gives them).
std::string EventsSection(const json& events, int64_t now_s) {
  std::vector<std::vector<std::string>> rows = {{"AGE", "KIND", "MESSAGE"}};
  for (const json& e : events.is_array() ? events : json::array()) {
    const std::string age = AgeOf(e, "time", now_s);
    rows.push_back({age.empty() ? Text(e, "time") : age, Text(e, "kind"), Text(e, "message")});
  }
  return "Events:\n" + Indented(FormatTable(rows));
}

}  // namespace

std::string ShellQuote(std::string_view arg) {
  const bool braces = arg.find_first_of("{}") != std::string_view::npos;
  const bool bare =
      !arg.empty() &&
      std::all_of(arg.begin(), arg.end(),
                  [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) ||
                           (c != '\0' && std::strchr("@%+=:,./_-{}", c) != nullptr);
                  }) &&
      // bash expands {a,b} and {1..3}; a brace without either is literal.
      !(braces && (arg.find(',') != std::string_view::npos || arg.find("..") != std::string_view::npos));
  if (bare) return std::string(arg);
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}


std::string DescribeModel(const json& m, int64_t now_s) {
  Fields f;
  f.Add("Name", Text(m, "name"));
  f.Add("Model", Text(m, "model"));
  f.Add("Status", Text(m, "status"));
  f.Add("Reason", Text(m, "reason"));
  f.Add("Revision", Text(m, "revision"));
  f.Add("Replicas", Text(m, "ready_replicas") + "/" + Text(m, "desired_replicas") + " ready (min " +
                        Text(m, "min_replicas") + ", max " + Text(m, "max_replicas") + ")");
  f.Add("In Flight", Text(m, "inflight"));
  f.Add("Queued", Text(m, "queued"));
  f.Add("Command", ShellCommand(Child(m, "command")));
  f.Add("Env", JoinMap(Child(m, "env")));
  f.Add("Health Path", Text(m, "health_path"));
  f.Add("Requests", RequestsText(Child(m, "requests")));
  f.Add("Priority", Text(m, "priority"));
  f.Add("Preemptible", Text(m, "preemptible"));
  f.Add("Placement", Text(m, "placement"));
  f.Add("Startup Timeout", Text(m, "startup_timeout_s") + "s");
  f.Add("Autoscaling", AutoscalingText(Child(m, "autoscaling")));
  const json& decision = Child(m, "last_decision");
  f.Add("Last Decision", DecisionText(decision, now_s));
  if (decision.is_object() && Child(decision, "inputs").is_object()) {
    f.Add("Decision Inputs", JoinMap(Child(decision, "inputs")));
  }
  f.Add("Endpoints", Join(Child(m, "endpoints")));
  f.Add("Created", TimeMsWithAge(m, "created_at_ms", now_s));
  const json& replicas = Child(m, "replicas");
  if (!replicas.is_array() || replicas.empty()) {
    f.Add("Replica List", kNone);
    return f.Render();
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TASK", "REVISION", "NODE", "STATE", "READY", "INFLIGHT", "ADDRESS", "MESSAGE"}};
  for (const json& r : replicas) {
    std::string ready = Text(r, "ready");
    if (Child(r, "draining").is_boolean() && Child(r, "draining").get<bool>()) {
      ready += " (draining)";
    }
    std::string message;
    if (const json& h = Child(r, "health_error"); h.is_string()) message = h.get<std::string>();
    if (const json& p = Child(r, "pending_reason"); p.is_string()) {
      message += (message.empty() ? "" : "; ") + p.get<std::string>();
    }
    rows.push_back({Text(r, "name"), Text(r, "task"), Text(r, "revision"), Text(r, "node"),
                    Text(r, "state"), ready, Text(r, "inflight"), Text(r, "address"), message});
  }
  return f.Render() + "Replica List:\n" + Indented(FormatTable(rows));
}

std::string DescribeEndpoint(const json& e, int64_t now_s) {
  Fields f;
  f.Add("Name", Text(e, "name"));
  f.Add("Model", Text(e, "model"));
  f.Add("Public", Text(e, "public"));
  f.Add("Routes", Join(Child(e, "routes")));
  f.Add("Requests", Text(e, "requests"));
  f.Add("Errors", Text(e, "errors"));
  f.Add("In Flight", Text(e, "inflight"));
  f.Add("Requests/s", Text(e, "requests_per_s"));
  const json& latency = Child(e, "latency_ms");
  auto millis = [&](std::string_view p) {
    const json& v = Child(latency, p);
    return v.is_number() ? Millis(v.get<double>()) : std::string(kNone);
  };
  f.Add("Latency", IntField(e, "requests").value_or(0) > 0
                       ? "p50 " + millis("p50") + ", p99 " + millis("p99")
                       : std::string(kNone));
  const json& keys = Child(e, "keys");
  if (!keys.is_array() || keys.empty()) {
    f.Add("Keys", kNone);
    return f.Render();
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "AGE"}};
  for (const json& k : keys) {
    const std::string age = AgeOfMs(k, "created_at_ms", now_s);
    rows.push_back({Text(k, "id"), Text(k, "name"), age.empty() ? kNone : age});
  }
  return f.Render() + "Keys:\n" + Indented(FormatTable(rows));
}

std::string DescribeTask(const json& t, int64_t now_s) {
  Fields f;
  f.Add("Name", Text(t, "name"));
  f.Add("ID", Text(t, "id"));
  f.Add("State", Text(t, "state"));
  f.Add("Priority", Text(t, "priority"));
  f.Add("Queue", Text(t, "queue"));
  f.Add("Group", Text(t, "group"));
  if (Text(t, "group") != kNone) f.Add("Group Placement", Text(t, "group_placement"));
  f.Add("Kind", Text(t, "kind"));
  f.Add("Preemptible", Text(t, "preemptible"));
  f.Add("Node", Text(t, "node"));
  f.Add("Requests", RequestsText(Child(t, "requests")));
  if (Child(t, "rdma_required").is_boolean() && Child(t, "rdma_required").get<bool>()) {
    f.Add("RDMA", "required");
  }
  f.Add("Allocation", AllocationText(Child(t, "allocation")));
  // A pending task's reason is why it is not placed; a scheduled one's, why
  // its agent has not started it yet ("waiting for task 12 to exit ...").
  f.Add("Pending Reason", Text(t, "pending_reason"));
  if (const json& r = Child(t, "reservation"); r.is_object())
    f.Add("Reservation", ReservationText(r));
  f.Add("Depends On", Join(Child(t, "depends_on")));
  f.Add("Command", ShellCommand(Child(t, "command")));
  f.Add("Env", JoinMap(Child(t, "env")));
  // Only the names: the API gives no secret's value to anyone but the agent.
  if (Child(t, "secret_env").is_array() && !Child(t, "secret_env").empty()) {
    f.Add("Secret Env", Join(Child(t, "secret_env")) + " (values hidden)");
  }
  f.Add("Created", TimeWithAge(t, "created_at", now_s));
  f.Add("Updated", TimeWithAge(t, "updated_at", now_s));
  const json& events = Child(t, "events");
  if (!events.is_array() || events.empty()) {
    f.Add("Events", kNone);
    return f.Render();
  }
  return f.Render() + EventsSection(events, now_s);
}

std::string DescribeJob(const json& j, int64_t now_s) {
  Fields f;
  f.Add("Name", Text(j, "name"));
  f.Add("ID", Text(j, "id"));
  f.Add("State", Text(j, "state"));
  f.Add("Reason", Text(j, "reason"));
  if (const json& r = Child(j, "reservation"); r.is_object())
    f.Add("Reservation", ReservationText(r));
  f.Add("Queue", Text(j, "queue"));
  f.Add("Priority", Text(j, "priority"));
  f.Add("Gang", Text(j, "min_available") + " of " + Text(j, "replicas") + " members, all or none");
  f.Add("Restarts", Text(j, "restarts"));
  const json& spec = Child(j, "spec");
  const json& restart = Child(spec, "restart");
  if (restart.is_object()) {
    f.Add("On Failure", Text(restart, "on_member_failure") + " (at most " +
                            Text(restart, "max_restarts") + " restarts)");
  }
  f.Add("Time Limit",
        Text(spec, "time_limit_s") == kNone ? kNone : Text(spec, "time_limit_s") + " s");
  f.Add("Created", TimeWithAge(j, "created_at", now_s));
  f.Add("Updated", TimeWithAge(j, "updated_at", now_s));
  std::string out = f.Render();
  std::vector<std::vector<std::string>> members = {
      {"RANK", "ROLE", "TASK", "NAME", "STATE", "NODE", "REASON"}};
  const json& list = Child(j, "members");
  for (const json& m : list.is_array() ? list : json::array()) {
    members.push_back({Text(m, "rank"), Text(m, "role"), Text(m, "id"), Text(m, "name"),
                       Text(m, "state"), Text(m, "node"),
                       Text(m, "pending_reason") == kNone ? "" : Text(m, "pending_reason")});
  }
  out += "Members:\n" + Indented(FormatTable(members));
  return out + EventsSection(Child(j, "events"), now_s);
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
      {"INDEX", "VENDOR", "MODEL", "MEMORY", "ALLOCATED", "ALLOCATED MEMORY", "NUMA", "PCIE",
       "FABRIC"}};
  for (const json& g : gpus) {
    rows.push_back({Text(g, "index"), Text(g, "vendor"), Text(g, "model"),
                    Memory(IntField(g, "memory_mib").value_or(0)),
                    std::to_string(IntField(g, "allocated_milli").value_or(0)) + "m",
                    Memory(IntField(g, "allocated_memory_mib").value_or(0)), Locality(g, "numa"),
                    Locality(g, "pcie_switch"), Locality(g, "fabric_domain")});
  }
  return f.Render() + "GPUs:\n" + Indented(FormatTable(rows));
}

}  // namespace hf::cli
