// A scheduling policy: which plugins are enabled, with which weights, modes and
// arguments, plus the scheduler's load thresholds (SPEC §4-§5).
//
// The YAML form is the `plugins:` block exactly as the product vision writes
// it, optionally with a `scheduler:` block:
//
//   plugins:
//     binpack:  {enabled: true,  weight: 1}
//     spread:   {enabled: false, weight: 1}
//     preempt:  {enabled: true,  mode: "scheduled", weight: 1}
//     rdma:     {enabled: true,  weight: 1}
//     topology: {enabled: true,  weight: 1, topology_config: "/etc/heteroflow/topology.yaml"}
//   scheduler:
//     load_threshold: 0.8
//     gpu_load_threshold: 0.9
//     memory_threshold: 0.85
//     score_weights: {binpack: 1.0}
//
// Keys other than enabled / weight / mode go into the plugin's config object.
// Plugins not named keep their defaults. A weight under score_weights is the
// plugin's weight, whichever block comes first; the same weight given
// differently in both places is an error naming both keys and lines.
#ifndef HF_FRAMEWORK_POLICY_H_
#define HF_FRAMEWORK_POLICY_H_

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/status.h"

namespace hf::framework {

struct PluginSettings {
  bool enabled = false;
  double weight = 1.0;  // >= 0 and finite; applied once, by the framework
  std::string mode;     // only for plugins with modes (preempt)
  nlohmann::json config = nlohmann::json::object();

  bool operator==(const PluginSettings&) const = default;
};

struct SchedulerConfig {
  double load_threshold = 0.8;       // measured CPU load above this: no new task
  double gpu_load_threshold = 0.9;   // measured GPU utilization above this: no new GPU task
  double memory_threshold = 0.85;    // measured memory use above this: no new task
  // How many feasible nodes a cycle scores, as a percentage of the nodes
  // (kube-scheduler's percentageOfNodesToScore): filtering stops once that
  // many feasible nodes are found, and the next cycle starts where it
  // stopped. 0: adaptive (FeasibleNodesToFind); 100: every node, always.
  // Integer in [0, 100].
  int percentage_of_nodes_to_score = 0;
  // Vendors whose GPUs are never shared between tasks: a request for part of
  // a GPU (gpu_milli < 1000) does not fit them (docs/ACCELERATORS.md,
  // "Sharing"). Vendor names (IsVendorName), at most kMaxExclusiveVendors.
  std::vector<std::string> exclusive_gpu_vendors = DefaultExclusiveVendors();
  static constexpr size_t kMaxExclusiveVendors = 16;

  // Each threshold must be in (0, 1]; the message names the field.
  Status Validate() const;
  nlohmann::json ToJson() const;
};

// Each entry a vendor name (IsVendorName), at most
// SchedulerConfig::kMaxExclusiveVendors; the message names `field`.
Status ValidateVendorList(const std::vector<std::string>& vendors, const std::string& field);

struct Policy {
  // Per plugin, only the keys the source named (enabled, weight, mode, or
  // config keys), so that a file naming only `weight` keeps the default
  // `enabled`. Types are checked here; names and values by the framework.
  std::map<std::string, nlohmann::json> plugins;
  SchedulerConfig scheduler;
  // Where each plugin entry came from, for messages about it
  // ("server.yaml:12: scheduler.score_weights.bogus"); empty for policies
  // built in code or read from the store.
  std::map<std::string, std::string> origin;
};

// Parses a YAML document that holds a `plugins:` and/or `scheduler:` block.
// `source` names the file in error messages.
Result<Policy> ParsePolicyYaml(const std::string& text, const std::string& source);
Result<Policy> LoadPolicyFile(const std::string& path);

// The JSON form of one top-level block of a server config file (e.g.
// `nodes:`), scalars typed as YAML reads them; null when the file has no such
// block. NotFound when the file cannot be opened; InvalidArgument (with the
// file name) when it is not YAML.
Result<nlohmann::json> LoadConfigBlock(const std::string& path, const std::string& key);

// Validates a weight value; `field` names it in the message.
Status ValidateWeight(double w, const std::string& field);

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_POLICY_H_
