#include "framework/args.h"

#include "framework/policy.h"

namespace hf::framework {

Result<ResourceWeights> ParseResourceWeights(const nlohmann::json& config, const std::string& plugin) {
  ResourceWeights w;
  if (!config.contains("resource_weights")) return w;
  const std::string field = "plugins." + plugin + ".resource_weights";
  const nlohmann::json& j = config["resource_weights"];
  if (!j.is_object()) return InvalidArgument(field + " must be a mapping of cpu, memory, gpu to weights");
  for (auto& [key, value] : j.items()) {
    double* target = key == "cpu" ? &w.cpu : key == "memory" ? &w.memory : key == "gpu" ? &w.gpu : nullptr;
    if (!target) return InvalidArgument(field + ": unknown resource \"" + key + "\" (cpu, memory, gpu)");
    if (!value.is_number()) return InvalidArgument(field + "." + key + " must be a number");
    *target = value.get<double>();
    HF_RETURN_IF_ERROR(ValidateWeight(*target, field + "." + key));
  }
  if (w.cpu == 0 && w.memory == 0 && w.gpu == 0) return InvalidArgument(field + " must not all be 0");
  return w;
}

}  // namespace hf::framework
