#include "queues/queue_tree.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/json_fields.h"

namespace hf::queues {
namespace {

using nlohmann::json;
using namespace hf::json_fields;

// The most GPUs one quota entry may name: far above any cluster.
constexpr int64_t kMaxQuotaGpus = 10'000'000;
constexpr size_t kMaxSubmitters = 256;

Status ReadQuota(const json& v, const std::string& path, Quota& q) {
  HF_RETURN_IF_ERROR(RequireObject(v, path));
  HF_RETURN_IF_ERROR(CheckKeys(v, path, {"gpu", "cpu_milli", "memory_mib"}));
  for (const auto& [key, x] : v.items()) {
    const std::string f = Field(path, key);
    if (key == "gpu") {
      HF_RETURN_IF_ERROR(RequireObject(x, f));
      HF_RETURN_IF_ERROR(CheckCount(x.size(), f, kMaxGpuModels + 1));
      for (const auto& [model, n] : x.items()) {
        const std::string mf = f + "." + Truncate(model);
        if (model.empty() || model.size() > kMaxNameLength) {
          return InvalidArgument(f + " has a GPU model name of " + std::to_string(model.size()) +
                                 " characters; 1.." + std::to_string(kMaxNameLength));
        }
        int64_t gpus = 0;
        HF_RETURN_IF_ERROR(ReadInt<int64_t>(n, mf, 0, kMaxQuotaGpus, gpus));
        q.gpu_milli[model] = gpus * kWholeGpuMilli;
      }
    } else if (key == "cpu_milli") {
      int64_t c = 0;
      HF_RETURN_IF_ERROR(ReadQuantity<int64_t>(x, f, c));
      q.cpu_milli = c;
    } else if (key == "memory_mib") {
      int64_t m = 0;
      HF_RETURN_IF_ERROR(ReadQuantity<int64_t>(x, f, m));
      q.memory_mib = m;
    }
  }
  return Status::Ok();
}

// "N" for milli-GPUs that are whole, "N.NNN" otherwise.
std::string Gpus(int64_t milli) {
  if (milli % kWholeGpuMilli == 0) return std::to_string(milli / kWholeGpuMilli);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", double(milli) / kWholeGpuMilli);
  return buf;
}

// Every key either quota names, "*" included.
std::set<std::string> GpuKeys(const Quota& a, const Quota& b) {
  std::set<std::string> keys{kEveryOtherModel};
  for (const auto& [k, v] : a.gpu_milli) keys.insert(k);
  for (const auto& [k, v] : b.gpu_milli) keys.insert(k);
  return keys;
}

// The amount `q` gives GPU key `k` ("*" reads only "*").
std::optional<int64_t> GpuEntry(const Quota& q, const std::string& k) {
  if (k == kEveryOtherModel) {
    auto it = q.gpu_milli.find(k);
    return it == q.gpu_milli.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  return q.Gpu(k);
}

}  // namespace

std::optional<int64_t> Quota::Gpu(const std::string& model) const {
  auto it = gpu_milli.find(model);
  if (it != gpu_milli.end()) return it->second;
  it = gpu_milli.find(kEveryOtherModel);
  if (it != gpu_milli.end()) return it->second;
  return std::nullopt;
}

Result<QueueSpec> QueueSpecFromJson(const json& j, const std::string& given_path) {
  if (!j.is_object()) {
    return InvalidArgument((given_path.empty() ? std::string("queue") : given_path) +
                           " must be an object, got " + TypeName(j));
  }
  QueueSpec q;
  if (!j.contains("name")) {
    return InvalidArgument(Field(given_path.empty() ? "queue" : given_path, "name") +
                           " is required");
  }
  HF_RETURN_IF_ERROR(
      ReadName(j["name"], Field(given_path.empty() ? "queue" : given_path, "name"), q.name));
  const std::string path = given_path.empty() ? "queues." + q.name : given_path;
  HF_RETURN_IF_ERROR(
      CheckKeys(j, path, {"name", "parent", "weight", "guaranteed", "max", "submitters"}));
  q.parent = q.name == kRoot ? "" : kRoot;
  for (const auto& [key, v] : j.items()) {
    const std::string f = Field(path, key);
    if (key == "parent") {
      if (v.is_null() && q.name == kRoot) continue;
      HF_RETURN_IF_ERROR(ReadName(v, f, q.parent));
    } else if (key == "weight") {
      if (!v.is_number()) return InvalidArgument(f + " must be a number, got " + TypeName(v));
      const double w = v.get<double>();
      if (!(w > 0) || w > kMaxWeight) {
        return InvalidArgument(f + " must be > 0 and <= 1000000, got " + v.dump());
      }
      q.weight = w;
    } else if (key == "guaranteed") {
      HF_RETURN_IF_ERROR(ReadQuota(v, f, q.guaranteed));
    } else if (key == "max") {
      HF_RETURN_IF_ERROR(ReadQuota(v, f, q.max));
    } else if (key == "submitters") {
      HF_RETURN_IF_ERROR(RequireObject(v, f));
      HF_RETURN_IF_ERROR(CheckKeys(v, f, {"roles", "tokens"}));
      if (v.contains("roles")) {
        HF_RETURN_IF_ERROR(ReadStringList(v["roles"], f + ".roles", true, kMaxSubmitters, q.roles));
      }
      if (v.contains("tokens")) {
        HF_RETURN_IF_ERROR(
            ReadStringList(v["tokens"], f + ".tokens", true, kMaxSubmitters, q.tokens));
      }
    }
  }
  return q;
}

json QuotaToJson(const Quota& q) {
  json j = json::object();
  if (!q.gpu_milli.empty()) {
    json g = json::object();
    for (const auto& [model, milli] : q.gpu_milli) g[model] = milli / kWholeGpuMilli;
    j["gpu"] = std::move(g);
  }
  if (q.cpu_milli) j["cpu_milli"] = *q.cpu_milli;
  if (q.memory_mib) j["memory_mib"] = *q.memory_mib;
  return j;
}

json QueueSpecToJson(const QueueSpec& q) {
  return {{"name", q.name},
          {"parent", q.parent.empty() ? json(nullptr) : json(q.parent)},
          {"weight", q.weight},
          {"guaranteed", QuotaToJson(q.guaranteed)},
          {"max", QuotaToJson(q.max)},
          {"submitters", {{"roles", q.roles}, {"tokens", q.tokens}}}};
}

std::vector<std::string> GpuModelsNamed(const QueueSpec& q) {
  std::set<std::string> models;
  for (const Quota* quota : {&q.guaranteed, &q.max}) {
    for (const auto& [model, milli] : quota->gpu_milli) {
      if (model != kEveryOtherModel) models.insert(model);
    }
  }
  return {models.begin(), models.end()};
}

QueueTree::QueueTree() {
  Result<QueueTree> t = Build({});
  HF_CHECK(t.ok());
  *this = std::move(*t);
}

QueueTree::QueueTree(Empty) {
  static std::atomic<uint64_t> next{1};
  generation_ = next.fetch_add(1, std::memory_order_relaxed);
}

size_t QueueTree::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? kNone : it->second;
}

std::vector<size_t> QueueTree::PathUp(size_t i) const {
  std::vector<size_t> path;
  for (; i != kNone && parent_[i] != kNone; i = parent_[i]) path.push_back(i);
  return path;
}

Result<QueueTree> QueueTree::Build(std::vector<QueueSpec> specs) {
  QueueTree t{Empty{}};
  if (specs.size() > kMaxQueues) {
    return InvalidArgument("queues: " + std::to_string(specs.size()) + " queues; at most " +
                           std::to_string(kMaxQueues));
  }
  // root first, then the others in the order given; default when absent.
  auto root =
      std::find_if(specs.begin(), specs.end(), [](const QueueSpec& q) { return q.name == kRoot; });
  if (root == specs.end()) {
    QueueSpec r;
    r.name = kRoot;
    specs.insert(specs.begin(), r);
  } else {
    std::rotate(specs.begin(), root, root + 1);
  }
  if (std::none_of(specs.begin(), specs.end(),
                   [](const QueueSpec& q) { return q.name == kDefaultQueue; })) {
    QueueSpec d;
    d.name = kDefaultQueue;
    d.parent = kRoot;
    specs.push_back(d);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const QueueSpec& q = specs[i];
    const std::string at = "queues." + q.name;
    if (!IsValidName(q.name))
      return InvalidArgument("queues[" + std::to_string(i) + "].name is not a valid name");
    if (!t.index_.emplace(q.name, i).second) return InvalidArgument(at + " is given twice");
    if (!(q.weight > 0) || q.weight > kMaxWeight) {
      return InvalidArgument(at + ".weight must be > 0 and <= 1000000");
    }
    if (q.name == kRoot) {
      if (!q.parent.empty()) return InvalidArgument(at + ".parent: root has no parent");
      if (!(q.guaranteed == Quota{}) || !(q.max == Quota{})) {
        return InvalidArgument(at + ": root stands for the whole cluster and has no quota");
      }
    } else if (q.parent.empty()) {
      return InvalidArgument(at + ".parent is required");
    }
  }
  t.specs_ = std::move(specs);
  const size_t n = t.specs_.size();
  t.parent_.assign(n, kNone);
  t.children_.assign(n, {});
  for (size_t i = 1; i < n; ++i) {
    const QueueSpec& q = t.specs_[i];
    const size_t p = t.Find(q.parent);
    if (p == kNone) {
      return InvalidArgument("queues." + q.name + ".parent: no queue named \"" + q.parent + "\"");
    }
    t.parent_[i] = p;
    t.children_[p].push_back(i);
  }
  // Every queue must reach root: a walk longer than the tree is a cycle.
  for (size_t i = 1; i < n; ++i) {
    size_t at = i;
    for (size_t steps = 0; at != 0; ++steps) {
      at = t.parent_[at];
      if (steps > n) {
        return InvalidArgument("queues." + t.specs_[i].name + ".parent makes a cycle (" +
                               t.specs_[i].name + " -> " + t.specs_[t.parent_[i]].name +
                               " -> ...) that never reaches root");
      }
    }
  }
  for (size_t i = 1; i < n; ++i) {
    const QueueSpec& q = t.specs_[i];
    const std::string at = "queues." + q.name;
    // max at least guaranteed, resource by resource.
    for (const std::string& k : GpuKeys(q.guaranteed, q.max)) {
      const std::optional<int64_t> g = GpuEntry(q.guaranteed, k), m = GpuEntry(q.max, k);
      if (g && m && *m < *g) {
        return InvalidArgument(at + ".max.gpu." + k + ": " + Gpus(*m) + " is below guaranteed " +
                               Gpus(*g));
      }
    }
    if (q.guaranteed.cpu_milli && q.max.cpu_milli && *q.max.cpu_milli < *q.guaranteed.cpu_milli) {
      return InvalidArgument(at + ".max.cpu_milli: " + std::to_string(*q.max.cpu_milli) +
                             " is below guaranteed " + std::to_string(*q.guaranteed.cpu_milli));
    }
    if (q.guaranteed.memory_mib && q.max.memory_mib &&
        *q.max.memory_mib < *q.guaranteed.memory_mib) {
      return InvalidArgument(at + ".max.memory_mib: " + std::to_string(*q.max.memory_mib) +
                             " is below guaranteed " + std::to_string(*q.guaranteed.memory_mib));
    }
    if (!(q.guaranteed == Quota{}) || !(q.max == Quota{})) t.trivial_ = false;
  }
  // Children's guarantees within their parent's (root's are the cluster's).
  for (size_t p = 1; p < n; ++p) {
    const std::vector<size_t>& kids = t.children_[p];
    if (kids.empty()) continue;
    const QueueSpec& parent = t.specs_[p];
    std::set<std::string> keys{kEveryOtherModel};
    for (size_t c : kids) {
      for (const std::string& k : GpuKeys(t.specs_[c].guaranteed, parent.guaranteed))
        keys.insert(k);
    }
    for (const std::string& k : keys) {
      int64_t sum = 0;
      for (size_t c : kids) sum += GpuEntry(t.specs_[c].guaranteed, k).value_or(0);
      const int64_t has = GpuEntry(parent.guaranteed, k).value_or(0);
      if (sum > has) {
        return InvalidArgument("queues." + parent.name + ".guaranteed.gpu." + k +
                               ": its children are guaranteed " + Gpus(sum) +
                               " GPUs, more than its " + Gpus(has));
      }
    }
    int64_t cpu = 0, mem = 0;
    for (size_t c : kids) {
      cpu += t.specs_[c].guaranteed.cpu_milli.value_or(0);
      mem += t.specs_[c].guaranteed.memory_mib.value_or(0);
    }
    if (cpu > parent.guaranteed.cpu_milli.value_or(0)) {
      return InvalidArgument("queues." + parent.name +
                             ".guaranteed.cpu_milli: its children are guaranteed " +
                             std::to_string(cpu) + ", more than its " +
                             std::to_string(parent.guaranteed.cpu_milli.value_or(0)));
    }
    if (mem > parent.guaranteed.memory_mib.value_or(0)) {
      return InvalidArgument("queues." + parent.name +
                             ".guaranteed.memory_mib: its children are guaranteed " +
                             std::to_string(mem) + ", more than its " +
                             std::to_string(parent.guaranteed.memory_mib.value_or(0)));
    }
  }
  size_t leaves = 0;
  for (size_t i = 1; i < n; ++i) leaves += t.children_[i].empty();
  if (leaves > 1) t.trivial_ = false;
  return t;
}

}  // namespace hf::queues
