// The Alibaba openb trace's CSV files: the node list and the pod list.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/openb_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hf::sim::ParseOpenbNodes(text, "nodes.csv");
  (void)hf::sim::ParseOpenbPods(text, "pods.csv");
  return 0;
}
