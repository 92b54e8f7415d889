// The client's manifest files (YAML or JSON: tasks, nodes, models,
// endpoints), as `heteroflow apply -f` reads them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hf::cli::ParseManifest(text, "manifest.yaml");
  return 0;
}
