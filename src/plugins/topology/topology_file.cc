#include "plugins/topology/topology_file.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace hf::plugins {
namespace {

// Walks the document keeping the file name, so every error says where it is.
class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}

  Status Parse(const YAML::Node& root, TopologyMap& out) {
    if (!root || root.IsNull()) return Error(root, "empty topology file; expected a zones: list");
    if (!root.IsMap()) return Error(root, "expected a mapping with a zones: list");
    HF_RETURN_IF_ERROR(OnlyKeys(root, {"zones"}, "the top level"));
    const YAML::Node zones = root["zones"];
    if (!zones) return Error(root, "missing zones: list");
    std::unordered_set<std::string> seen;
    return EachEntry(zones, "zones", [&](const YAML::Node& zone) { return Zone(zone, seen, out); });
  }

 private:
  Status Zone(const YAML::Node& zone, std::unordered_set<std::string>& seen, TopologyMap& out) {
    TopologyPosition pos;
    HF_RETURN_IF_ERROR(Name(zone, "zone", seen, pos.zone));
    HF_RETURN_IF_ERROR(OnlyKeys(zone, {"name", "switches"}, "zone " + pos.zone));
    std::unordered_set<std::string> switches;
    return EachEntry(zone["switches"], "zone " + pos.zone + " switches",
                     [&](const YAML::Node& sw) { return Switch(sw, pos, switches, out); });
  }

  // Switch and rack names need only be unique within their parent.
  Status Switch(const YAML::Node& sw, TopologyPosition pos, std::unordered_set<std::string>& seen,
                TopologyMap& out) {
    HF_RETURN_IF_ERROR(Name(sw, "switch", seen, pos.switch_name));
    HF_RETURN_IF_ERROR(OnlyKeys(sw, {"name", "racks"}, "switch " + pos.switch_name));
    std::unordered_set<std::string> racks;
    return EachEntry(sw["racks"], "switch " + pos.switch_name + " racks",
                     [&](const YAML::Node& rack) { return Rack(rack, pos, racks, out); });
  }

  Status Rack(const YAML::Node& rack, TopologyPosition pos, std::unordered_set<std::string>& seen,
              TopologyMap& out) {
    HF_RETURN_IF_ERROR(Name(rack, "rack", seen, pos.rack));
    HF_RETURN_IF_ERROR(OnlyKeys(rack, {"name", "nodes"}, "rack " + pos.rack));
    return Nodes(rack["nodes"], pos, out);
  }

  std::string Where(const YAML::Node& n) const {
    // A node that is absent or null carries no position; the caller passes the
    // nearest node that has one.
    const int line = (n && n.Mark().line >= 0) ? n.Mark().line + 1 : 1;
    return source_ + ":" + std::to_string(line);
  }
  Status Error(const YAML::Node& at, const std::string& message) const {
    return InvalidArgument(Where(at) + ": " + message);
  }

  Status OnlyKeys(const YAML::Node& map, std::initializer_list<const char*> keys,
                  const std::string& what) const {
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) return Error(kv.first, what + " has a key that is not a string");
      const std::string& key = kv.first.Scalar();
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) return Error(kv.first, "unknown key \"" + key + "\" in " + what);
    }
    return Status::Ok();
  }

  // Calls `each` for every entry of an optional list (absent or null: none).
  template <typename Fn>
  Status EachEntry(const YAML::Node& list, const std::string& what, Fn each) const {
    if (!list || list.IsNull()) return Status::Ok();
    if (!list.IsSequence()) return Error(list, what + " must be a list");
    for (const auto& entry : list) {
      if (!entry.IsMap()) {
        return Error(entry.IsNull() ? list : entry,
                     what + ": each entry must be a mapping with a name");
      }
      HF_RETURN_IF_ERROR(each(entry));
    }
    return Status::Ok();
  }

  Status Name(const YAML::Node& entry, const char* kind, std::unordered_set<std::string>& seen,
              std::string& name) const {
    const YAML::Node n = entry["name"];
    if (!n) return Error(entry, std::string(kind) + " without a name");
    if (!n.IsScalar()) {
      return Error(n.IsNull() ? entry : n, std::string(kind) + " name must be a string");
    }
    name = n.Scalar();
    if (name.empty()) return Error(n, std::string(kind) + " name must not be empty");
    if (!seen.insert(name).second) {
      return Error(n, std::string(kind) + " " + name + " is listed twice");
    }
    return Status::Ok();
  }

  Status Nodes(const YAML::Node& list, const TopologyPosition& pos, TopologyMap& out) {
    const std::string& rack_name = pos.rack;
    if (!list || list.IsNull()) return Status::Ok();
    if (!list.IsSequence()) {
      return Error(list, "rack " + rack_name + " nodes must be a list of node names");
    }
    for (const auto& n : list) {
      if (!n.IsScalar()) {
        return Error(n.IsNull() ? list : n, "rack " + rack_name + " nodes must be node names");
      }
      const std::string& name = n.Scalar();
      if (name.empty()) return Error(n, "rack " + rack_name + " lists an empty node name");
      const std::string here = Where(n);
      auto [it, fresh] = first_seen_.emplace(name, here);
      if (!fresh) {
        return Error(n, "node " + name + " is listed twice (first at " + it->second + ")");
      }
      out.emplace(name, pos);
    }
    return Status::Ok();
  }

  const std::string& source_;
  std::unordered_map<std::string, std::string> first_seen_;  // node name -> "FILE:LINE"
};

}  // namespace

Result<TopologyMap> ParseTopology(const std::string& text, const std::string& source) {
  TopologyMap out;
  try {
    const YAML::Node root = YAML::Load(text);
    HF_RETURN_IF_ERROR(Parser(source).Parse(root, out));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return InvalidArgument(source + ":" + std::to_string(line) + ": " + e.msg);
  }
  return out;
}

Result<TopologyMap> LoadTopologyFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Unavailable(path + ": cannot read topology file: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Unavailable(path + ": cannot read topology file: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable(path + ": cannot read topology file: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Unavailable(path + ": cannot read topology file: read error");
  return ParseTopology(text.str(), path);
}

}  // namespace hf::plugins
