#include "sim/yaml_workload.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>

#include "core/job.h"
#include "core/text.h"
#include "core/yaml_json.h"
#include "queues/queue_tree.h"

namespace hf::sim {
namespace {

// `count: N` and `every: S` on an entry: N copies arriving S seconds apart,
// named NAME-0 .. NAME-(N-1).
struct Repeat {
  int64_t count = 1;
  std::optional<int64_t> every_ms;
};
constexpr int64_t kMaxRepeat = 1'000'000;

// The copies' name and arrival shift.
std::string CopyName(const std::string& name, int64_t i) { return name + "-" + std::to_string(i); }

// Converts YAML nodes into model values, turning every problem into
// "FILE:LINE: field: what" so a user can find the entry.
class Reader {
 public:
  Reader(const std::string& source, const std::string& base_dir)
      : source_(source), base_dir_(base_dir) {}

  Status Error(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line;
    return InvalidArgument(source_ + ":" + (line >= 0 ? std::to_string(line + 1) : "?") + ": " +
                           what);
  }

  // Calls `f(key, value, known)` for each entry of a mapping; an entry whose
  // handler leaves `known` false is an unknown key.
  using Handler = std::function<Status(const std::string&, const YAML::Node&, bool&)>;
  Status ForEach(const YAML::Node& map, const std::string& field, const Handler& f) const {
    if (!map.IsMap()) return Error(map, field + " must be a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      bool known = true;
      HF_RETURN_IF_ERROR(f(key, kv.second, known));
      if (!known) return Error(kv.first, "unknown key " + field + "." + key);
    }
    return Status::Ok();
  }

  Status Int(const YAML::Node& n, const std::string& field, int64_t min, int64_t max,
             int64_t& out) const {
    long long v = 0;
    if (!n.IsScalar() || !YAML::convert<long long>::decode(n, v)) {
      return Error(n, field + " must be an integer");
    }
    if (v < min || v > max) {
      return Error(n, field + " must be in " + std::to_string(min) + ".." + std::to_string(max) +
                          ", got " + std::to_string(v));
    }
    out = v;
    return Status::Ok();
  }
  template <typename T>
  Status IntAs(const YAML::Node& n, const std::string& field, int64_t min, T& out) const {
    int64_t v = 0;
    HF_RETURN_IF_ERROR(Int(n, field, min, std::numeric_limits<T>::max(), v));
    out = T(v);
    return Status::Ok();
  }

  Status Number(const YAML::Node& n, const std::string& field, double min, double max,
                double& out) const {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      return Error(n, field + " must be a number");
    }
    if (v < min || v > max) {
      return Error(n, field + " must be in " + FormatNumber(min) + ".." + FormatNumber(max) +
                          ", got " + FormatNumber(v));
    }
    out = v;
    return Status::Ok();
  }

  Status Bool(const YAML::Node& n, const std::string& field, bool& out) const {
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, out)) {
      return Error(n, field + " must be true or false");
    }
    return Status::Ok();
  }

  Status String(const YAML::Node& n, const std::string& field, std::string& out) const {
    if (!n.IsScalar()) return Error(n, field + " must be a string");
    out = n.Scalar();
    return Status::Ok();
  }

  Status StringList(const YAML::Node& n, const std::string& field,
                    std::vector<std::string>& out) const {
    if (!n.IsSequence()) return Error(n, field + " must be a list of strings");
    out.clear();
    for (const auto& v : n) {
      std::string s;
      HF_RETURN_IF_ERROR(String(v, field + "[]", s));
      out.push_back(std::move(s));
    }
    return Status::Ok();
  }

  Status StringMap(const YAML::Node& n, const std::string& field,
                   std::map<std::string, std::string>& out) const {
    out.clear();
    return ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool&) {
      return String(v, field + "." + k, out[k]);
    });
  }

  Status Gpu(const YAML::Node& n, const std::string& field, GpuDevice& g) const {
    return ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) {
      const std::string f = field + "." + k;
      if (k == "index") return IntAs(v, f, 0, g.index);
      if (k == "uuid") return String(v, f, g.uuid);
      if (k == "model") return String(v, f, g.model);
      if (k == "vendor") return String(v, f, g.vendor);
      if (k == "memory_mib") return IntAs(v, f, 0, g.memory_mib);
      if (k == "numa") return IntAs(v, f, -1, g.numa);
      if (k == "pcie_switch") return IntAs(v, f, -1, g.pcie_switch);
      if (k == "fabric_domain") return IntAs(v, f, -1, g.fabric_domain);
      // The earlier name, still read; fabric_domain wins when both are given.
      if (k == "nvlink_domain") return n["fabric_domain"] ? Status::Ok() : IntAs(v, f, -1, g.fabric_domain);
      known = false;
      return Status::Ok();
    });
  }

  Status Nic(const YAML::Node& n, const std::string& field, RdmaDevice& r) const {
    return ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) {
      const std::string f = field + "." + k;
      if (k == "name") return String(v, f, r.name);
      if (k == "numa") return IntAs(v, f, -1, r.numa);
      if (k == "pcie_switch") return IntAs(v, f, -1, r.pcie_switch);
      known = false;
      return Status::Ok();
    });
  }

  Status UsageEntry(const YAML::Node& n, const std::string& field, NodeUsage& u) const {
    return ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) {
      const std::string f = field + "." + k;
      if (k == "cpu_load") return Number(v, f, 0, 1, u.cpu_load);
      if (k == "memory_used") return Number(v, f, 0, 1, u.memory_used);
      if (k == "gpus") {
        if (!v.IsSequence()) return Error(v, f + " must be a list");
        for (size_t i = 0; i < v.size(); ++i) {
          const std::string gf = f + "[" + std::to_string(i) + "]";
          GpuUsage& g = u.gpus.emplace_back();
          HF_RETURN_IF_ERROR(
              ForEach(v[i], gf, [&](const std::string& gk, const YAML::Node& gv, bool& gknown) {
                const std::string ff = gf + "." + gk;
                if (gk == "index") return IntAs(gv, ff, 0, g.index);
                if (gk == "utilization") return Number(gv, ff, 0, 1, g.utilization);
                if (gk == "memory_used_mib") return IntAs(gv, ff, 0, g.memory_used_mib);
                gknown = false;
                return Status::Ok();
              }));
        }
        return Status::Ok();
      }
      known = false;
      return Status::Ok();
    });
  }

  // A usage file is its own document: its errors name that file.
  Status UsageFile(const YAML::Node& at, const std::string& field, const std::string& path,
                   NodeUsage& u) const {
    std::filesystem::path p(path);
    if (p.is_relative() && !base_dir_.empty()) p = std::filesystem::path(base_dir_) / p;
    auto text = ReadWholeFile(p.string());
    if (!text.ok()) return Error(at, field + ": " + text.status().message());
    YAML::Node doc;
    try {
      doc = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(p.string() + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    return Reader(p.string(), base_dir_).UsageEntry(doc, "usage", u);
  }

  Status NodeEntry(const YAML::Node& n, const std::string& field, SimNode& out) const {
    NodeSpec& s = out.spec;
    bool has_usage = false, has_usage_file = false;
    HF_RETURN_IF_ERROR(
        ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) -> Status {
          const std::string f = field + "." + k;
          if (k == "name") return String(v, f, s.name);
          if (k == "labels") return StringMap(v, f, s.labels);
          if (k == "cpu_milli") return IntAs(v, f, 0, s.cpu_milli);
          if (k == "memory_mib") return IntAs(v, f, 0, s.memory_mib);
          if (k == "gpus") {
            if (!v.IsSequence()) return Error(v, f + " must be a list");
            for (size_t i = 0; i < v.size(); ++i) {
              GpuDevice g;
              g.index = int32_t(i);
              HF_RETURN_IF_ERROR(Gpu(v[i], f + "[" + std::to_string(i) + "]", g));
              s.gpus.push_back(std::move(g));
            }
            return Status::Ok();
          }
          if (k == "rdma") {
            if (!v.IsSequence()) return Error(v, f + " must be a list");
            for (size_t i = 0; i < v.size(); ++i) {
              HF_RETURN_IF_ERROR(
                  Nic(v[i], f + "[" + std::to_string(i) + "]", s.rdma.emplace_back()));
            }
            return Status::Ok();
          }
          if (k == "topology") {
            return ForEach(v, f, [&](const std::string& tk, const YAML::Node& tv, bool& tknown) {
              const std::string tf = f + "." + tk;
              if (tk == "zone") return String(tv, tf, s.topology.zone);
              if (tk == "switch") return String(tv, tf, s.topology.switch_name);
              if (tk == "rack") return String(tv, tf, s.topology.rack);
              tknown = false;
              return Status::Ok();
            });
          }
          if (k == "usage") {
            if (has_usage_file) return Error(v, field + ": give usage or usage_file, not both");
            has_usage = true;
            return UsageEntry(v, f, out.usage.emplace());
          }
          if (k == "usage_file") {
            if (has_usage) return Error(v, field + ": give usage or usage_file, not both");
            has_usage_file = true;
            std::string path;
            HF_RETURN_IF_ERROR(String(v, f, path));
            return UsageFile(v, f, path, out.usage.emplace());
          }
          known = false;
          return Status::Ok();
        }));
    Status st = s.Validate();
    if (!st.ok()) return Error(n, field + ": " + st.message());
    return Status::Ok();
  }

  Status RequestsEntry(const YAML::Node& n, const std::string& field, hf::Requests& r) const {
    HF_RETURN_IF_ERROR(
        ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) {
          const std::string f = field + "." + k;
          if (k == "cpu_milli") return IntAs(v, f, 0, r.cpu_milli);
          if (k == "memory_mib") return IntAs(v, f, 0, r.memory_mib);
          if (k == "gpu") return IntAs(v, f, 0, r.gpu);
          if (k == "gpu_milli") return IntAs(v, f, 1, r.gpu_milli);
          if (k == "gpu_memory_mib") return IntAs(v, f, 0, r.gpu_memory_mib);
          if (k == "gpu_models") return StringList(v, f, r.gpu_models);
          if (k == "gpu_vendors") return StringList(v, f, r.gpu_vendors);
          known = false;
          return Status::Ok();
        }));
    Status st = r.Validate();
    if (!st.ok()) return Error(n, field + ": " + st.message());
    return Status::Ok();
  }

  // Seconds (fractions allowed) to milliseconds.
  Status Time(const YAML::Node& n, const std::string& field, std::optional<int64_t>& out) const {
    double s = 0;
    HF_RETURN_IF_ERROR(Number(n, field, 0, 1e12, s));
    out = std::llround(s * 1000);
    return Status::Ok();
  }

  Status TaskEntry(const YAML::Node& n, const std::string& field, SimTask& out,
                   Repeat& repeat) const {
    Task& t = out.task;
    HF_RETURN_IF_ERROR(
        ForEach(n, field, [&](const std::string& k, const YAML::Node& v, bool& known) -> Status {
          const std::string f = field + "." + k;
          if (k == "name") return String(v, f, t.name);
          if (k == "group") return String(v, f, t.group);
          if (k == "priority") {
            return IntAs(v, f, std::numeric_limits<int32_t>::min(), t.priority);
          }
          if (k == "kind") {
            std::string kind;
            HF_RETURN_IF_ERROR(String(v, f, kind));
            if (kind == "batch")
              t.kind = TaskKind::kBatch;
            else if (kind == "inference")
              t.kind = TaskKind::kInference;
            else
              return Error(v, f + " must be batch or inference, got \"" + kind + "\"");
            return Status::Ok();
          }
          if (k == "requests") return RequestsEntry(v, f, t.requests);
          if (k == "rdma_required") return Bool(v, f, t.rdma_required);
          if (k == "depends_on") return StringList(v, f, t.depends_on);
          if (k == "preemptible") return Bool(v, f, t.preemptible);
          if (k == "command") return StringList(v, f, t.command);
          if (k == "env") return StringMap(v, f, t.env);
          if (k == "create_time") return Time(v, f, out.create_ms);
          if (k == "delete_time") return Time(v, f, out.delete_ms);
          if (k == "queue") return String(v, f, t.queue);
          if (k == "user") return String(v, f, out.user);
          if (k == "time_limit_s") return IntAs(v, f, 1, t.time_limit_s);
          if (k == "duration") {
            HF_RETURN_IF_ERROR(Time(v, f, out.run_ms));
            if (*out.run_ms <= 0) return Error(v, f + " must be > 0");
            return Status::Ok();
          }
          if (k == "count") return IntAs(v, f, 1, repeat.count);
          if (k == "every") return Time(v, f, repeat.every_ms);
          known = false;
          return Status::Ok();
        }));
    if (t.name.empty()) return Error(n, field + ".name is required");
    if (!out.create_ms) out.create_ms = 0;
    if (out.delete_ms && *out.delete_ms < *out.create_ms) {
      return Error(n, field + ": delete_time is before create_time");
    }
    if (out.delete_ms && out.run_ms) {
      return Error(
          n, field + ": give delete_time (leaves then) or duration (runs that long), not both");
    }
    if (repeat.every_ms && repeat.count == 1) return Error(n, field + ": every needs count");
    if (repeat.count > 1 && out.delete_ms) {
      return Error(n, field + ": count repeats a task with a duration, not a delete_time");
    }
    if (t.queue.empty()) return Error(n, field + ".queue must not be empty");
    return Status::Ok();
  }

  const std::string& source() const { return source_; }

 private:
  const std::string source_;
  const std::string base_dir_;
};

}  // namespace

Result<Workload> ParseYamlWorkload(const std::string& text, const std::string& source,
                                   const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  Reader r(source, base_dir);
  Workload w;
  w.nodes_source = w.tasks_source = source;
  if (!root || root.IsNull())
    return InvalidArgument(source + ":1: empty workload; expected nodes: and tasks:");
  bool has_policy = false;
  YAML::Node jobs;
  HF_RETURN_IF_ERROR(r.ForEach(
      root, "workload", [&](const std::string& k, const YAML::Node& v, bool& known) -> Status {
        if (k == "plugins" || k == "scheduler") {
          has_policy = true;  // parsed below, by the policy's own parser
          return Status::Ok();
        }
        if (k == "nodes") {
          if (!v.IsSequence()) return r.Error(v, "nodes must be a list");
          std::set<std::string> names;
          for (size_t i = 0; i < v.size(); ++i) {
            SimNode n;
            HF_RETURN_IF_ERROR(r.NodeEntry(v[i], "nodes[" + std::to_string(i) + "]", n));
            if (!names.insert(n.spec.name).second)
              return r.Error(v[i], "duplicate node name " + n.spec.name);
            w.nodes.push_back(std::move(n));
          }
          return Status::Ok();
        }
        if (k == "tasks") {
          if (!v.IsSequence()) return r.Error(v, "tasks must be a list");
          std::set<std::string> names;
          for (size_t i = 0; i < v.size(); ++i) {
            SimTask t;
            Repeat repeat;
            const std::string field = "tasks[" + std::to_string(i) + "]";
            HF_RETURN_IF_ERROR(r.TaskEntry(v[i], field, t, repeat));
            if (repeat.count > kMaxRepeat || w.tasks.size() + size_t(repeat.count) > kMaxRepeat) {
              return r.Error(v[i], field + ": more than " + std::to_string(kMaxRepeat) + " tasks");
            }
            t.origin = source + ":" + std::to_string(v[i].Mark().line + 1);
            for (int64_t c = 0; c < repeat.count; ++c) {
              SimTask copy = t;
              if (repeat.count > 1) {
                copy.task.name = CopyName(t.task.name, c);
                *copy.create_ms += c * repeat.every_ms.value_or(0);
              }
              copy.task.key = TaskKey(w.tasks.size());
              if (!names.insert(copy.task.name).second)
                return r.Error(v[i], "duplicate task name " + copy.task.name);
              w.tasks.push_back(std::move(copy));
            }
          }
          return Status::Ok();
        }
        if (k == "jobs") {
          if (!v.IsSequence()) return r.Error(v, "jobs must be a list");
          jobs = v;
          return Status::Ok();
        }
        if (k == "queues") {
          if (!v.IsSequence()) return r.Error(v, "queues must be a list");
          for (size_t i = 0; i < v.size(); ++i) {
            const std::string field = "queues[" + std::to_string(i) + "]";
            Result<nlohmann::json> j = YamlToJson(v[i]);
            if (!j.ok()) return r.Error(v[i], field + ": " + j.status().message());
            Result<queues::QueueSpec> q = queues::QueueSpecFromJson(*j, field);
            if (!q.ok()) return r.Error(v[i], q.status().message());
            w.queues.push_back(std::move(*q));
          }
          auto tree = queues::QueueTree::Build(w.queues);
          if (!tree.ok()) return r.Error(v, tree.status().message());
          return Status::Ok();
        }
        known = false;
        return Status::Ok();
      }));
  if (w.nodes.empty()) return InvalidArgument(source + ": no nodes");
  // Jobs after tasks, whatever the order in the file: members' keys follow
  // the tasks'.
  std::set<std::string> names;
  for (const SimTask& t : w.tasks) names.insert(t.task.name);
  uint64_t job_id = 0;
  for (size_t i = 0; jobs && i < jobs.size(); ++i) {
    const YAML::Node& entry = jobs[i];
    const std::string at = source + ":" + std::to_string(entry.Mark().line + 1);
    const std::string field = "jobs[" + std::to_string(i) + "]";
    Result<nlohmann::json> j = YamlToJson(entry);
    if (!j.ok()) return InvalidArgument(at + ": " + field + ": " + j.status().message());
    if (!j->is_object()) return InvalidArgument(at + ": " + field + " must be a mapping");
    const auto seconds = [&](const char* key, bool required, int64_t& out_ms) -> Status {
      auto it = j->find(key);
      if (it == j->end()) {
        return required ? InvalidArgument(at + ": " + field + "." + key + " is required")
                        : Status::Ok();
      }
      if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
        return InvalidArgument(at + ": " + field + "." + key + " must be a number of seconds >= 0");
      }
      out_ms = static_cast<int64_t>(std::llround(it->get<double>() * 1000));
      j->erase(it);
      return Status::Ok();
    };
    int64_t create_ms = 0, stagger_ms = 0, run_ms = 0, every_ms = 0;
    HF_RETURN_IF_ERROR(seconds("create_time", false, create_ms));
    HF_RETURN_IF_ERROR(seconds("stagger", false, stagger_ms));
    HF_RETURN_IF_ERROR(seconds("duration", true, run_ms));
    HF_RETURN_IF_ERROR(seconds("every", false, every_ms));
    int64_t count = 1;
    if (auto it = j->find("count"); it != j->end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > kMaxRepeat) {
        return InvalidArgument(at + ": " + field + ".count must be an integer in 1.." +
                               std::to_string(kMaxRepeat));
      }
      count = it->get<int64_t>();
      j->erase(it);
    }
    std::string user;
    if (auto it = j->find("user"); it != j->end()) {
      if (!it->is_string()) return InvalidArgument(at + ": " + field + ".user must be a string");
      user = it->get<std::string>();
      j->erase(it);
    }
    Result<JobSpec> spec = JobSpecFromJson(*j);
    if (!spec.ok()) return InvalidArgument(at + ": " + field + ": " + spec.status().message());
    const std::string base = spec->name;
    for (int64_t c = 0; c < count; ++c) {
      if (count > 1) spec->name = CopyName(base, c);
      ++job_id;
      for (Task& t : spec->Members(job_id)) {
        if (!names.insert(t.name).second)
          return InvalidArgument(at + ": duplicate task name " + t.name);
        if (w.tasks.size() >= size_t(kMaxRepeat))
          return InvalidArgument(at + ": more than " + std::to_string(kMaxRepeat) + " tasks");
        SimTask st;
        t.key = TaskKey(w.tasks.size());
        st.create_ms = create_ms + c * every_ms + stagger_ms * t.job.rank;
        st.job_run_ms = run_ms;
        st.job_gang = framework::GangOptions::For(*spec);
        st.user = user;
        st.origin = at;
        st.task = std::move(t);
        w.tasks.push_back(std::move(st));
      }
    }
  }
  if (has_policy) {
    auto policy = framework::ParsePolicyYaml(text, source);
    if (!policy.ok()) return policy.status();
    w.policy = std::move(*policy);
  }
  return w;
}

Result<Workload> LoadYamlWorkload(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseYamlWorkload(*text, path, std::filesystem::path(path).parent_path().string());
}

}  // namespace hf::sim
