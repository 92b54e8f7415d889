// The in-tree plugins, in execution order. At each extension point enabled
// plugins run in this order:
//   Filter: rdma, load_threshold, fit — cheap unresolvable checks first, and
//     resource fit last, so a node rejected for resources passed every other
//     filter (preemption relies on that).
//   Bind (devices): topology, binpack, spread, fragment; then the framework's default
//     GPU choice; then (attachments) rdma, which sees the chosen GPUs.
#include "framework/registry.h"

#include "plugins/binpack/binpack.h"
#include "plugins/fit/fit.h"
#include "plugins/fragment/fragment.h"
#include "plugins/preempt/preempt.h"
#include "plugins/rdma/rdma.h"
#include "plugins/spread/spread.h"
#include "plugins/thresholds/thresholds.h"
#include "plugins/topology/topology.h"

namespace hf::plugins {
namespace {

template <typename P>
framework::PluginFactory Entry(bool required, framework::PluginSettings defaults) {
  return {P::kName, required, std::move(defaults),
          [](const framework::PluginDeps& deps) { return std::make_unique<P>(deps); }};
}

framework::PluginSettings On(double weight = 1, std::string mode = "") {
  return {true, weight, std::move(mode), nlohmann::json::object()};
}
framework::PluginSettings Off() { return {false, 1, "", nlohmann::json::object()}; }

framework::Registry Build() {
  framework::Registry r;
  // Defaults are the product vision's policy; topology uses the nodes' own
  // positions until a topology_config is given.
  for (auto e : {Entry<Rdma>(false, On()), Entry<LoadThreshold>(true, On()),
                 Entry<Fit>(true, On()), Entry<Topology>(false, On()),
                 Entry<Binpack>(false, On()), Entry<Spread>(false, Off()),
                 Entry<Fragment>(false, Off()),
                 Entry<Preempt>(false, On(1, "scheduled"))}) {
    HF_CHECK(r.Register(std::move(e)).ok());
  }
  return r;
}

}  // namespace

const framework::Registry& InTreeRegistry() {
  static const framework::Registry registry = Build();
  return registry;
}

}  // namespace hf::plugins
