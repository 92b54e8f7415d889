// Command-line options from a YAML file: a CLI11 config formatter, so that
// `--config FILE` sets a command's options the way its flags do (CLI11's
// own precedence: a flag given on the command line wins over the file).
//
// The file is one mapping of option long names (`token-file` or
// `token_file`) to a scalar, or to a sequence of scalars for an option that
// takes several. Anything else (nesting, a document that is not a mapping,
// YAML that does not parse) is an error naming the key; which names are
// options is CLI11's to check (an unknown one is refused).
//
// Threading: stateless; safe from any thread.
#ifndef HF_CORE_YAML_CONFIG_H_
#define HF_CORE_YAML_CONFIG_H_

#include <CLI/CLI.hpp>
#include <istream>
#include <string>
#include <vector>

namespace hf {

class YamlConfig : public CLI::Config {
 public:
  // Writing a config back is not offered: `--config` only reads.
  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return {}; }
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
};

}  // namespace hf

#endif  // HF_CORE_YAML_CONFIG_H_
