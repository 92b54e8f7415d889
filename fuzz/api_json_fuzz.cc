// The API's JSON: a request body through the codec, then every reader of a
// request document (tasks, batches, nodes, plugin and scheduler patches,
// previews, models, endpoints), and the agent's reader of assignments.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/assignment.h"
#include "core/json_body.h"
#include "inference/spec.h"
#include "server/codec.h"
#include "server/preview.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hf::server;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  hf::Result<nlohmann::json> j = hf::ParseJsonBody(body);
  if (!j.ok()) return 0;
  (void)ParseTaskSubmission(*j);
  (void)ParseTaskBatch(*j);
  (void)ParseNodeSpec(*j);
  (void)ParsePluginPatch(*j);
  (void)ParseSchedulerConfigPatch(*j);
  (void)ParsePreviewRequest(*j);
  (void)hf::inference::ModelSpecFromJson(*j);
  (void)hf::inference::EndpointSpecFromJson(*j);
  (void)hf::agent::ParseAssignments(*j);
  return 0;
}
