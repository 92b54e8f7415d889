// The plugin registry: the explicit list of plugins a framework can build.
//
// The in-tree list lives in src/plugins/registry.cc. Registration order is the
// order in which plugins run at each extension point (Filter, Bind, ...), so
// it is part of the scheduler's behaviour and written down there.
#ifndef HF_FRAMEWORK_REGISTRY_H_
#define HF_FRAMEWORK_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "framework/plugin.h"
#include "framework/policy.h"

namespace hf::framework {

struct PluginFactory {
  std::string name;
  // Always-on plugins (resource fit, load thresholds): cannot be disabled.
  bool required = false;
  // Settings when the policy does not name the plugin.
  PluginSettings defaults;
  std::function<std::unique_ptr<Plugin>(const PluginDeps&)> make;
};

class Registry {
 public:
  // Fails with AlreadyExists on a duplicate name.
  Status Register(PluginFactory factory);
  const std::vector<PluginFactory>& entries() const { return entries_; }
  const PluginFactory* Find(const std::string& name) const;

 private:
  std::vector<PluginFactory> entries_;
};

}  // namespace hf::framework

namespace hf::plugins {
// Every built-in plugin, in execution order.
const framework::Registry& InTreeRegistry();
}  // namespace hf::plugins

#endif  // HF_FRAMEWORK_REGISTRY_H_
