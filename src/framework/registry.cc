#include "framework/registry.h"

#include <algorithm>

namespace hf::framework {

Status Registry::Register(PluginFactory factory) {
  if (factory.name.empty() || !factory.make) return InvalidArgument("plugin needs a name and a factory");
  if (Find(factory.name)) return AlreadyExists("plugin " + factory.name + " is registered twice");
  entries_.push_back(std::move(factory));
  return Status::Ok();
}

const PluginFactory* Registry::Find(const std::string& name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string ExtensionPointNames(uint32_t points) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {kFilterPoint, "Filter"}, {kPostFilterPoint, "PostFilter"}, {kPreScorePoint, "PreScore"},
      {kScorePoint, "Score"},   {kBindPoint, "Bind"}};
  std::string out;
  for (auto [bit, name] : kNames) {
    if (points & bit) {
      if (!out.empty()) out += ",";
      out += name;
    }
  }
  return out;
}

void Rejections::Reset(size_t node_count, size_t reason_count, bool recording) {
  recording_ = recording;
  if (reason_by_node_.size() != node_count) {
    reason_by_node_.assign(node_count, 0);
    stamp_.assign(node_count, 0);
  }
  if (++epoch_ == 0) {  // wrapped: no stamp may look current
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  count_by_reason_.assign(reason_count, 0);
  rejected_.clear();
}

bool FilterPlugin::PassesWithout(const Task& task, const ClusterState& cluster,
                                 const NodeWithout& without) {
  one_node_.assign(1, without.node);
  not_recording_.Reset(0, 0, /*recording=*/false);
  Filter(task, cluster, one_node_, not_recording_);
  return !one_node_.empty();
}

}  // namespace hf::framework
