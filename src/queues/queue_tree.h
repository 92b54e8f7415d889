// Queues (docs/QUEUES.md): the tree of queues teams submit to, and their
// quotas.
//
// Every task and job names a leaf queue (Task::queue, "default" when it
// names none). A queue has a weight (its share of what lies beyond the
// guarantees, among its siblings), a guaranteed and a max quota, and the
// roles or tokens that may submit to it. `root` is the top of the tree and
// stands for the whole cluster: it has no quota of its own. `default` hangs
// from it unless the tree says otherwise. Only leaves hold work.
//
// Quotas name GPUs by model ("A100-80G": 32), "*" for each model not named,
// and cpu_milli and memory_mib. A quantity a guarantee does not name is 0;
// one a max does not name has no limit. The API speaks whole GPUs; inside,
// GPUs are milli-GPUs as everywhere else.
//
// A tree is checked whole (QueueTree::Build): a parent that exists, no
// cycle, a weight > 0, max at least guaranteed, and children's guarantees
// within their parent's (root's children: within the cluster, which is
// not checked, as nodes come and go). Errors are InvalidArgument naming the
// queue and its field: "queues.team-a.max.gpu.A100: 4 is below guaranteed 8".
//
// Threading: values; no shared state.
#ifndef HF_QUEUES_QUEUE_TREE_H_
#define HF_QUEUES_QUEUE_TREE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace hf::queues {

inline constexpr char kRoot[] = "root";
// A quota's entry for every GPU model it does not name.
inline constexpr char kEveryOtherModel[] = "*";
// A tree holds at most this many queues (docs/API.md, "Limits").
inline constexpr size_t kMaxQueues = 1024;
inline constexpr double kMaxWeight = 1e6;

// Amounts of the quota resources.
struct Quota {
  std::map<std::string, int64_t> gpu_milli;  // by model name, or "*"
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_mib;

  // The amount for GPUs of `model`: its own entry, else "*", else none.
  std::optional<int64_t> Gpu(const std::string& model) const;
  bool operator==(const Quota&) const = default;
};

struct QueueSpec {
  std::string name;
  std::string parent;  // empty for root only
  double weight = 1;
  Quota guaranteed;  // what is not named is 0
  Quota max;         // what is not named has no limit
  // Who may submit to it: tokens with one of `roles`, or named in `tokens`.
  // Both empty: every token that may submit at all.
  std::vector<std::string> roles;
  std::vector<std::string> tokens;
  bool operator==(const QueueSpec&) const = default;
};

// {"name", "parent", "weight", "guaranteed": {"gpu": {MODEL|"*": GPUs},
// "cpu_milli", "memory_mib"}, "max": {...}, "submitters": {"roles": [...],
// "tokens": [...]}}; every field but name optional (parent: root). Strict:
// unknown fields, wrong types and negative quotas are InvalidArgument
// naming `path`.FIELD (path "queues.NAME" when empty).
Result<QueueSpec> QueueSpecFromJson(const nlohmann::json& j, const std::string& path = "");
nlohmann::json QuotaToJson(const Quota& q);
nlohmann::json QueueSpecToJson(const QueueSpec& q);
// The GPU model names a spec's quotas name ("*" left out).
std::vector<std::string> GpuModelsNamed(const QueueSpec& q);

class QueueTree {
 public:
  static constexpr size_t kNone = SIZE_MAX;

  // The tree of `specs`, with root and default added when absent, checked
  // whole (see the file comment). Queues keep the order given (root first).
  static Result<QueueTree> Build(std::vector<QueueSpec> specs);
  // root and default alone.
  QueueTree();

  size_t size() const { return specs_.size(); }
  const QueueSpec& spec(size_t i) const { return specs_[i]; }
  const std::vector<QueueSpec>& specs() const { return specs_; }
  size_t Find(std::string_view name) const;  // kNone when there is none
  size_t parent(size_t i) const { return parent_[i]; }
  const std::vector<size_t>& children(size_t i) const { return children_[i]; }
  bool leaf(size_t i) const { return children_[i].empty(); }
  // i, its parent, ..., up to (not including) root.
  std::vector<size_t> PathUp(size_t i) const;
  // No queue has a quota and there is one leaf: nothing to decide.
  bool trivial() const { return trivial_; }
  // Differs between trees built apart, the same in copies: what a cache of
  // a tree's contents (Ledger's quotas) is keyed by.
  uint64_t generation() const { return generation_; }

 private:
  struct Empty {};
  explicit QueueTree(Empty);

  std::vector<QueueSpec> specs_;
  // Finds by string_view without building a string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> index_;
  std::vector<size_t> parent_;
  std::vector<std::vector<size_t>> children_;
  bool trivial_ = true;
  uint64_t generation_ = 0;
};

}  // namespace hf::queues

#endif  // HF_QUEUES_QUEUE_TREE_H_
