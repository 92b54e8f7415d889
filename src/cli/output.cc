#include "cli/output.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "core/yaml_json.h"

namespace hf::cli {
namespace {

using nlohmann::json;

constexpr char kNone[] = "<none>";

const json* Get(const json& o, std::string_view key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

}  // namespace

std::optional<int64_t> IntField(const json& o, std::string_view key) {
  const json* v = Get(o, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d)) return std::nullopt;
    return static_cast<int64_t>(std::llround(d));
  }
  return v->get<int64_t>();
}

namespace {

// Up to `decimals` decimals, trailing zeros dropped: 1.50 -> "1.5".
std::string Decimal(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

const json& ListOrEmpty(const json& v) {
  static const json kEmpty = json::array();
  return v.is_array() ? v : kEmpty;
}

void Flatten(const json& v, const std::string& prefix,
             std::vector<std::vector<std::string>>& rows) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, child] : v.items()) {
      Flatten(child, prefix.empty() ? k : prefix + "." + k, rows);
    }
    return;
  }
  rows.push_back({prefix, v.is_string() ? v.get<std::string>() : v.dump()});
}

}  // namespace

Result<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "yaml") return OutputFormat::kYaml;
  return InvalidArgument("output format must be table, json or yaml, not \"" +
                         std::string(name.substr(0, 50)) + "\"");
}

std::string Serialize(const json& value, OutputFormat format) {
  if (format == OutputFormat::kYaml) return JsonToYaml(value);
  return value.dump(2) + "\n";
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] + 3 - row[i].size(), ' ');
    }
    // An empty last cell would leave the padding of the one before it.
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string Text(const json& o, std::string_view key) {
  const json* v = Get(o, key);
  if (v == nullptr || v->is_null()) return kNone;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    return s.empty() ? kNone : s;
  }
  // The server writes some integral quantities as floats (4.0); they read
  // better as integers.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 1e15) {
      return std::to_string(static_cast<int64_t>(d));
    }
  }
  return v->dump();
}

std::optional<int64_t> ParseRfc3339(std::string_view text) {
  std::string s(text);
  int year, month, day, hour, minute, second, used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &year, &month, &day, &hour,
                  &minute, &second, &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  int64_t offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om, n = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5) {
      return std::nullopt;
    }
    offset = (s[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size() || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<int64_t>(timegm(&tm)) - offset;
}

std::string FormatAge(int64_t s) {
  if (s < 0) return kNone;
  if (s < 120) return std::to_string(s) + "s";
  if (s < 3 * 3600) return std::to_string(s / 60) + "m";
  if (s < 48 * 3600) return std::to_string(s / 3600) + "h";
  if (s < 730 * 86400) return std::to_string(s / 86400) + "d";
  return std::to_string(s / (365 * 86400)) + "y";
}

std::string AgeOf(const json& o, std::string_view key, int64_t now_s) {
  const json* v = Get(o, key);
  if (v == nullptr || !v->is_string()) return "";
  std::optional<int64_t> t = ParseRfc3339(v->get<std::string>());
  return t ? FormatAge(now_s - *t) : "";
}

std::string AgeOfMs(const json& o, std::string_view key, int64_t now_s) {
  std::optional<int64_t> ms = IntField(o, key);
  if (!ms || *ms <= 0) return "";
  return FormatAge(now_s - *ms / 1000);
}

std::string Millis(double ms) { return Decimal(ms, 1) + "ms"; }

std::string Cores(int64_t milli) { return Decimal(static_cast<double>(milli) / 1000.0, 3); }

std::string Memory(int64_t mib) {
  if (mib < 1024) return std::to_string(mib) + "Mi";
  return Decimal(static_cast<double>(mib) / 1024.0, 1) + "Gi";
}

std::string GpuRequest(const json& requests) {
  const int64_t gpu = IntField(requests, "gpu").value_or(0);
  const int64_t milli = IntField(requests, "gpu_milli").value_or(1000);
  if (gpu <= 0) return "0";
  if (milli >= 1000) return std::to_string(gpu);
  const std::string part = std::to_string(milli) + "m";
  return gpu == 1 ? part : std::to_string(gpu) + "x" + part;
}

std::string GpuCell(const json& requests) {
  const int64_t gpu = IntField(requests, "gpu").value_or(0);
  const int64_t milli = IntField(requests, "gpu_milli").value_or(1000);
  const int64_t memory = IntField(requests, "gpu_memory_mib").value_or(0);
  if (gpu <= 0 || milli >= 1000 || memory <= 0) return GpuRequest(requests);
  const std::string count = gpu == 1 ? "" : std::to_string(gpu) + "x";
  // A share of 1 is how a memory-only request is placed (SPEC §7): its memory is what it holds.
  if (milli <= 1) return count + Memory(memory);
  return count + std::to_string(milli) + "m+" + Memory(memory);
}

std::string NodeGpus(const json& node) {
  const json* gpus = Get(node, "gpus");
  const size_t total = gpus && gpus->is_array() ? gpus->size() : 0;
  size_t in_use = 0, shared = 0;
  bool per_gpu = total > 0;
  static const json kNoGpus = json::array();
  for (const json& g : gpus ? ListOrEmpty(*gpus) : kNoGpus) {
    const std::optional<int64_t> milli = IntField(g, "allocated_milli");
    if (!milli) {
      per_gpu = false;
      break;
    }
    in_use += *milli > 0;
    shared += *milli > 0 && *milli < 1000;
  }
  if (!per_gpu) {  // no per-GPU figures: whole GPUs' worth of the node's share
    const json* a = Get(node, "allocated");
    const int64_t milli = a ? IntField(*a, "gpu_milli").value_or(0) : 0;
    in_use = size_t((milli + 999) / 1000);
    shared = 0;
  }
  std::string out = std::to_string(in_use) + "/" + std::to_string(total);
  if (shared > 0) out += " (" + std::to_string(shared) + " shared)";
  return out;
}

std::string TasksTable(const json& tasks, int64_t now_s) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATE", "PRIORITY", "NODE", "GPU", "AGE", "REASON"}};
  for (const json& t : ListOrEmpty(tasks)) {
    const json* requests = Get(t, "requests");
    std::string reason;
    if (const json* r = Get(t, "pending_reason"); r != nullptr && r->is_string()) {
      reason = r->get<std::string>();
    }
    rows.push_back({Text(t, "id"), Text(t, "name"), Text(t, "state"), Text(t, "priority"),
                    Text(t, "node"), requests ? GpuCell(*requests) : "0",
                    AgeOf(t, "created_at", now_s), reason});
  }
  return FormatTable(rows);
}

std::string JobsTable(const json& jobs, int64_t now_s) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATE", "RUNNING", "GANG", "PRIORITY", "RESTARTS", "AGE", "REASON"}};
  for (const json& j : ListOrEmpty(jobs)) {
    const json* by_state = Get(j, "members_by_state");
    const std::string running =
        std::to_string(by_state && by_state->is_object() ? by_state->value("running", 0) : 0) +
        "/" + Text(j, "replicas");
    rows.push_back({Text(j, "id"), Text(j, "name"), Text(j, "state"), running,
                    Text(j, "min_available"), Text(j, "priority"), Text(j, "restarts"),
                    AgeOf(j, "created_at", now_s),
                    Text(j, "reason") == kNone ? "" : Text(j, "reason")});
  }
  return FormatTable(rows);
}

namespace {

// The sum of a {"gpu": {MODEL: n}} object's GPUs, as text ("12", "0.5").
std::string GpuSum(const json* amounts) {
  double sum = 0;
  if (amounts && amounts->is_object() && amounts->contains("gpu") && (*amounts)["gpu"].is_object()) {
    for (const auto& [model, n] : (*amounts)["gpu"].items()) {
      if (n.is_number()) sum += n.get<double>();
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", sum);
  return buf;
}

// A quota's GPUs by model: "A100-80G:8,*:2"; `none` when it names none.
std::string GpuQuota(const json* quota, const char* none) {
  std::string out;
  if (quota && quota->is_object() && quota->contains("gpu") && (*quota)["gpu"].is_object()) {
    for (const auto& [model, n] : (*quota)["gpu"].items()) {
      out += (out.empty() ? "" : ",") + model + ":" + n.dump();
    }
  }
  return out.empty() ? none : out;
}

}  // namespace

std::string QueuesTable(const json& queues) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "PARENT", "WEIGHT", "GPUS", "GUARANTEED",
                                                 "MAX", "BORROWED", "SHARE", "PENDING", "RUNNING"}};
  for (const json& q : ListOrEmpty(queues)) {
    char share[32] = "";
    if (const json* s = Get(q, "dominant_share"); s && s->is_number()) {
      std::snprintf(share, sizeof share, "%.0f%%", s->get<double>() * 100);
    }
    const std::string parent = Text(q, "parent");
    rows.push_back({Text(q, "name"), parent == kNone ? "" : parent, Text(q, "weight"),
                    GpuSum(Get(q, "usage")), GpuQuota(Get(q, "guaranteed"), "0"),
                    GpuQuota(Get(q, "max"), "-"), GpuSum(Get(q, "borrowed")), share,
                    Text(q, "pending"), Text(q, "running")});
  }
  return FormatTable(rows);
}

std::string NodesTable(const json& nodes) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "CONDITION", "GPUS", "VENDOR", "MODEL", "CPU", "MEM", "RACK"}};
  for (const json& n : ListOrEmpty(nodes)) {
    const json* alloc = Get(n, "allocated");
    static const json kNoAlloc = json::object();
    const json& a = alloc ? *alloc : kNoAlloc;
    const json* gpus = Get(n, "gpus");
    // The distinct vendors and models of its GPUs, in GPU order.
    std::string vendor_text, model_text;
    const auto add = [](std::string& list, const std::string& v) {
      if (v == kNone) return;
      const std::string padded = "," + list + ",";
      if (padded.find("," + v + ",") == std::string::npos) list += (list.empty() ? "" : ",") + v;
    };
    if (gpus != nullptr) {
      for (const json& g : ListOrEmpty(*gpus)) {
        add(vendor_text, Text(g, "vendor"));
        add(model_text, Text(g, "model"));
      }
    }
    const json* topology = Get(n, "topology");
    rows.push_back({Text(n, "name"), Text(n, "condition"),
                    NodeGpus(n),
                    vendor_text.empty() ? kNone : vendor_text,
                    model_text.empty() ? kNone : model_text,
                    Cores(IntField(a, "cpu_milli").value_or(0)) + "/" +
                        Cores(IntField(n, "cpu_milli").value_or(0)),
                    Memory(IntField(a, "memory_mib").value_or(0)) + "/" +
                        Memory(IntField(n, "memory_mib").value_or(0)),
                    topology ? Text(*topology, "rack") : kNone});
  }
  return FormatTable(rows);
}

std::string PluginsTable(const json& plugins) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TYPE", "ENABLED", "WEIGHT", "STATUS", "MODE"}};
  for (const json& p : ListOrEmpty(plugins)) {
    rows.push_back({Text(p, "name"), Text(p, "type"), Text(p, "enabled"), Text(p, "weight"),
                    Text(p, "status"), Text(p, "mode")});
  }
  return FormatTable(rows);
}

std::string TokensTable(const json& tokens, int64_t now_s) {
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "ROLE", "ACTIVE", "AGE", "EXPIRES"}};
  for (const json& t : ListOrEmpty(tokens)) {
    const json* expires = Get(t, "expires_at");
    rows.push_back({Text(t, "id"), Text(t, "name"), Text(t, "role"), Text(t, "active"),
                    AgeOf(t, "created_at", now_s),
                    expires && expires->is_string() ? expires->get<std::string>() : "never"});
  }
  return FormatTable(rows);
}

std::string ModelsTable(const json& models, int64_t now_s) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "MODEL", "STATUS", "READY", "INFLIGHT",
                                                 "QUEUED", "MIN-MAX", "AUTOSCALE", "REVISION",
                                                 "AGE"}};
  for (const json& m : ListOrEmpty(models)) {
    const json* autoscaling = Get(m, "autoscaling");
    const bool autoscaled = autoscaling != nullptr && autoscaling->is_object();
    const std::string age = AgeOfMs(m, "created_at_ms", now_s);
    rows.push_back({Text(m, "name"), Text(m, "model"), Text(m, "status"),
                    Text(m, "ready_replicas") + "/" + Text(m, "desired_replicas"),
                    Text(m, "inflight"), Text(m, "queued"),
                    Text(m, "min_replicas") + "-" + Text(m, "max_replicas"),
                    autoscaled ? Text(*autoscaling, "target_inflight_per_replica") : "-",
                    Text(m, "revision"), age.empty() ? kNone : age});
  }
  return FormatTable(rows);
}

std::string EndpointsTable(const json& endpoints) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "MODEL", "PUBLIC", "KEYS", "REQ/S", "REQUESTS", "ERRORS", "P50", "P99", "INFLIGHT"}};
  for (const json& e : ListOrEmpty(endpoints)) {
    const json* keys = Get(e, "keys");
    const json* latency = Get(e, "latency_ms");
    const bool served = IntField(e, "requests").value_or(0) > 0;
    auto percentile = [&](std::string_view p) -> std::string {
      if (!served) return "-";
      const json* v = latency ? Get(*latency, p) : nullptr;
      return v != nullptr && v->is_number() ? Millis(v->get<double>()) : kNone;
    };
    const json* rate = Get(e, "requests_per_s");
    rows.push_back({Text(e, "name"), Text(e, "model"), Text(e, "public"),
                    keys && keys->is_array() ? std::to_string(keys->size()) : "0",
                    rate && rate->is_number() ? Decimal(rate->get<double>(), 2) : kNone,
                    Text(e, "requests"), Text(e, "errors"), percentile("p50"), percentile("p99"),
                    Text(e, "inflight")});
  }
  return FormatTable(rows);
}

std::string KeyValueTable(const json& object) {
  std::vector<std::vector<std::string>> rows = {{"KEY", "VALUE"}};
  if (object.is_object()) Flatten(object, "", rows);
  return FormatTable(rows);
}

}  // namespace hf::cli
