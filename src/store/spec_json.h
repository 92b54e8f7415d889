// JSON forms of NodeSpec and Task as the store keeps them in its spec columns.
//
// Field names are exactly those of SPEC Appendix A (node: name, labels,
// cpu_milli, memory_mib, gpus[...], rdma[...], topology{zone, switch, rack};
// task: name, group, priority, kind, requests{...}, rdma_required, depends_on,
// preemptible, command, env). Reading is lenient about missing fields (they
// take the model's defaults, so rows written before a field was added still
// load) and strict about types. Task.key is not part of the JSON: it is the
// row id.
#ifndef HF_STORE_SPEC_JSON_H_
#define HF_STORE_SPEC_JSON_H_

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/status.h"

namespace hf::store {

nlohmann::json NodeSpecToJson(const NodeSpec& spec);
// InvalidArgument naming the field when a value has the wrong type.
Result<NodeSpec> NodeSpecFromJson(const nlohmann::json& j);

nlohmann::json TaskToJson(const Task& task);
// InvalidArgument naming the field when a value has the wrong type or kind is
// not "batch" or "inference".
Result<Task> TaskFromJson(const nlohmann::json& j);

const char* TaskKindName(TaskKind kind);

}  // namespace hf::store

#endif  // HF_STORE_SPEC_JSON_H_
