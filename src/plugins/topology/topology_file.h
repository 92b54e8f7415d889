// The topology file (`topology_config`, SPEC Appendix A):
//
//   zones:
//     - name: z1
//       switches:
//         - name: s1
//           racks:
//             - {name: r1, nodes: [gpu-a1, gpu-a2]}
//
// Every name must be a non-empty string; a node may appear only once.
#ifndef HF_PLUGINS_TOPOLOGY_TOPOLOGY_FILE_H_
#define HF_PLUGINS_TOPOLOGY_TOPOLOGY_FILE_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/model.h"
#include "core/status.h"

namespace hf::plugins {

// Node name -> its position.
using TopologyMap = std::unordered_map<std::string, TopologyPosition>;

// Parses the YAML text; `source` names the file in errors ("FILE:LINE: ...").
Result<TopologyMap> ParseTopology(const std::string& text, const std::string& source);
// Files larger than this are refused.
inline constexpr int64_t kMaxTopologyFileBytes = 1 << 20;

// Parse errors name FILE:LINE:COL and the path of the entry
// (zones[0].switches[1]), never the file's text.
//
// Reads and parses a file. Unavailable if it cannot be read, is not a
// regular file, or is larger than kMaxTopologyFileBytes; InvalidArgument if
// it is malformed.
Result<TopologyMap> LoadTopologyFile(const std::string& path);

}  // namespace hf::plugins

#endif  // HF_PLUGINS_TOPOLOGY_TOPOLOGY_FILE_H_
