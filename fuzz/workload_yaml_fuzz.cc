// The simulator's workload YAML. A workload may name other files
// (usage_file), which are read as given; inputs with that key anywhere are
// skipped, so the fuzzer never reads the machine's files.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/yaml_workload.h"

namespace {

bool NamesAFile(const YAML::Node& n, int depth) {
  if (depth > 64) return true;  // deeper than any workload: not worth the walk
  if (n.IsSequence()) {
    for (const YAML::Node& e : n) {
      if (NamesAFile(e, depth + 1)) return true;
    }
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      if (kv.first.IsScalar() && kv.first.Scalar() == "usage_file") return true;
      if (NamesAFile(kv.first, depth + 1) || NamesAFile(kv.second, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (NamesAFile(YAML::Load(text), 0)) return 0;
  } catch (const std::exception&) {
    // Not YAML: the parser's own error path is what is fuzzed.
  }
  (void)hf::sim::ParseYamlWorkload(text, "workload.yaml", "/nonexistent");
  return 0;
}
