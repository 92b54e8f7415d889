#include "core/yaml_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <sstream>

namespace hf {

std::vector<CLI::ConfigItem> YamlConfig::from_config(std::istream& input) const {
  std::stringstream text;
  text << input.rdbuf();
  YAML::Node doc;
  try {
    doc = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw CLI::FileError("the config file is not YAML: " + std::string(e.what()));
  }
  if (doc.IsNull()) return {};  // an empty file sets nothing
  if (!doc.IsMap()) throw CLI::FileError("the config file must be a mapping of option names to values");
  std::vector<CLI::ConfigItem> items;
  for (const auto& kv : doc) {
    if (!kv.first.IsScalar()) throw CLI::FileError("the config file has a key that is not a name");
    CLI::ConfigItem item;
    item.name = kv.first.Scalar();
    std::replace(item.name.begin(), item.name.end(), '_', '-');
    const YAML::Node& v = kv.second;
    if (v.IsScalar()) {
      item.inputs.push_back(v.Scalar());
    } else if (v.IsSequence()) {
      for (const YAML::Node& e : v) {
        if (!e.IsScalar()) throw CLI::FileError("config key " + kv.first.Scalar() + ": a list of plain values only");
        item.inputs.push_back(e.Scalar());
      }
    } else {
      throw CLI::FileError("config key " + kv.first.Scalar() + ": a plain value or a list of them");
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace hf
