// The policy and config YAML (plugins:/scheduler: blocks) and the topology
// file a topology_config names.
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/policy.h"
#include "plugins/topology/topology_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)hf::framework::ParsePolicyYaml(text, "policy.yaml");
  (void)hf::plugins::ParseTopology(text, "topology.yaml");
  return 0;
}
