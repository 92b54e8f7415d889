// What an agent reads about its node: the inventory file and the usage file
// (YAML or JSON).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/inventory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hf::agent::ParseInventory(text, "inventory.yaml");
  (void)hf::agent::ParseUsage(text, "usage.yaml");
  return 0;
}
