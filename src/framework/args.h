// Parsers for plugin arguments that several plugins share. Each returns
// InvalidArgument naming the field ("plugins.<plugin>.<key>") on bad input.
#ifndef HF_FRAMEWORK_ARGS_H_
#define HF_FRAMEWORK_ARGS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "core/fit.h"
#include "core/status.h"

namespace hf::framework {

// Reads config["resource_weights"] = {cpu: w, memory: w, gpu: w} (each key
// optional, default 1; each weight finite and >= 0; not all 0). Absent: the
// defaults.
Result<ResourceWeights> ParseResourceWeights(const nlohmann::json& config, const std::string& plugin);

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_ARGS_H_
