#include "plugins/topology/topology_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace hf::plugins {
namespace {

// Walks the document keeping the file name and the path to each entry, so
// every error says where it is: "FILE:LINE:COL: zones[0].switches[1]: ...".
// Messages never quote the file's text (keys, names, values): the file is
// one an admin named, and the server may be able to read files the admin
// cannot (docs/SECURITY.md).
class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}

  Status Parse(const YAML::Node& root, TopologyMap& out) {
    if (!root || root.IsNull()) return Error(root, "empty topology file; expected a zones: list");
    if (!root.IsMap()) return Error(root, "expected a mapping with a zones: list");
    HF_RETURN_IF_ERROR(OnlyKeys(root, {"zones"}, "the top level"));
    const YAML::Node zones = root["zones"];
    if (!zones) return Error(root, "missing zones: list");
    std::unordered_map<std::string, std::string> seen;
    return EachEntry(zones, "zones", [&](const YAML::Node& zone, const std::string& at) {
      return Zone(zone, at, seen, out);
    });
  }

 private:
  Status Zone(const YAML::Node& zone, const std::string& at,
              std::unordered_map<std::string, std::string>& seen, TopologyMap& out) {
    TopologyPosition pos;
    HF_RETURN_IF_ERROR(Name(zone, at, seen, pos.zone));
    HF_RETURN_IF_ERROR(OnlyKeys(zone, {"name", "switches"}, at));
    std::unordered_map<std::string, std::string> switches;
    return EachEntry(zone["switches"], at + ".switches",
                     [&](const YAML::Node& sw, const std::string& sw_at) {
                       return Switch(sw, sw_at, pos, switches, out);
                     });
  }

  // Switch and rack names need only be unique within their parent.
  Status Switch(const YAML::Node& sw, const std::string& at, TopologyPosition pos,
                std::unordered_map<std::string, std::string>& seen, TopologyMap& out) {
    HF_RETURN_IF_ERROR(Name(sw, at, seen, pos.switch_name));
    HF_RETURN_IF_ERROR(OnlyKeys(sw, {"name", "racks"}, at));
    std::unordered_map<std::string, std::string> racks;
    return EachEntry(sw["racks"], at + ".racks",
                     [&](const YAML::Node& rack, const std::string& rack_at) {
                       return Rack(rack, rack_at, pos, racks, out);
                     });
  }

  Status Rack(const YAML::Node& rack, const std::string& at, TopologyPosition pos,
              std::unordered_map<std::string, std::string>& seen, TopologyMap& out) {
    HF_RETURN_IF_ERROR(Name(rack, at, seen, pos.rack));
    HF_RETURN_IF_ERROR(OnlyKeys(rack, {"name", "nodes"}, at));
    return Nodes(rack["nodes"], at + ".nodes", pos, out);
  }

  std::string Where(const YAML::Node& n) const {
    // A node that is absent or null carries no position; the caller passes the
    // nearest node that has one.
    const bool known = n && n.Mark().line >= 0;
    return source_ + ":" + std::to_string(known ? n.Mark().line + 1 : 1) + ":" +
           std::to_string(known ? n.Mark().column + 1 : 1);
  }
  Status Error(const YAML::Node& at, const std::string& message) const {
    return InvalidArgument(Where(at) + ": " + message);
  }

  Status OnlyKeys(const YAML::Node& map, std::initializer_list<const char*> keys,
                  const std::string& what) const {
    std::string expected;
    for (const char* k : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
    for (const auto& kv : map) {
      bool known = false;
      if (kv.first.IsScalar()) {
        for (const char* k : keys) known = known || kv.first.Scalar() == k;
      }
      if (!known) return Error(kv.first, "unknown key in " + what + " (expected: " + expected + ")");
    }
    return Status::Ok();
  }

  // Calls `each(entry, "what[i]")` for every entry of an optional list
  // (absent or null: none).
  template <typename Fn>
  Status EachEntry(const YAML::Node& list, const std::string& what, Fn each) const {
    if (!list || list.IsNull()) return Status::Ok();
    if (!list.IsSequence()) return Error(list, what + " must be a list");
    size_t i = 0;
    for (const auto& entry : list) {
      const std::string at = what + "[" + std::to_string(i++) + "]";
      if (!entry.IsMap()) {
        return Error(entry.IsNull() ? list : entry, at + " must be a mapping with a name");
      }
      HF_RETURN_IF_ERROR(each(entry, at));
    }
    return Status::Ok();
  }

  // `seen`: the names of the entry's siblings, each with where it stands.
  Status Name(const YAML::Node& entry, const std::string& at,
              std::unordered_map<std::string, std::string>& seen, std::string& name) const {
    const YAML::Node n = entry["name"];
    if (!n) return Error(entry, at + " has no name");
    if (!n.IsScalar()) return Error(n.IsNull() ? entry : n, at + ".name must be a string");
    name = n.Scalar();
    if (name.empty()) return Error(n, at + ".name must not be empty");
    auto [it, fresh] = seen.emplace(name, Where(n));
    if (!fresh) return Error(n, at + ".name repeats the name at " + it->second);
    return Status::Ok();
  }

  Status Nodes(const YAML::Node& list, const std::string& at, const TopologyPosition& pos,
               TopologyMap& out) {
    if (!list || list.IsNull()) return Status::Ok();
    if (!list.IsSequence()) return Error(list, at + " must be a list of node names");
    size_t i = 0;
    for (const auto& n : list) {
      const std::string here_at = at + "[" + std::to_string(i++) + "]";
      if (!n.IsScalar()) return Error(n.IsNull() ? list : n, here_at + " must be a node name");
      const std::string& name = n.Scalar();
      if (name.empty()) return Error(n, here_at + " is empty");
      auto [it, fresh] = first_seen_.emplace(name, Where(n));
      if (!fresh) return Error(n, here_at + " repeats the node listed at " + it->second);
      out.emplace(name, pos);
    }
    return Status::Ok();
  }

  const std::string& source_;
  std::unordered_map<std::string, std::string> first_seen_;  // node name -> "FILE:LINE:COL"
};

}  // namespace

Result<TopologyMap> ParseTopology(const std::string& text, const std::string& source) {
  TopologyMap out;
  try {
    const YAML::Node root = YAML::Load(text);
    HF_RETURN_IF_ERROR(Parser(source).Parse(root, out));
  } catch (const YAML::Exception& e) {
    // yaml-cpp's messages may quote the text (an unknown escape, a key):
    // the position is enough to find the fault.
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    const int column = e.mark.column >= 0 ? e.mark.column + 1 : 1;
    return InvalidArgument(source + ":" + std::to_string(line) + ":" + std::to_string(column) +
                           ": not valid YAML");
  }
  return out;
}

Result<TopologyMap> LoadTopologyFile(const std::string& path) {
  // Regular files only, and not too large: a FIFO would hang the reader,
  // /dev/zero would fill the memory. O_NONBLOCK keeps the open of a FIFO
  // from waiting for a writer before fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Unavailable(path + ": cannot read topology file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Unavailable(path + ": cannot read topology file: not a regular file");
  }
  if (st.st_size > kMaxTopologyFileBytes) {
    ::close(fd);
    return Unavailable(path + ": cannot read topology file: larger than " +
                       std::to_string(kMaxTopologyFileBytes >> 20) + " MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  const int err = errno;
  ::close(fd);
  if (got != text.size()) {
    return Unavailable(path + ": cannot read topology file: " + std::strerror(err));
  }
  return ParseTopology(text, path);
}

}  // namespace hf::plugins
