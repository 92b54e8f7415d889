// The files `heteroflow apply -f` reads: task submissions and node
// inventories (SPEC Appendix A), in YAML or JSON.
//
// The rule, as docs/CLIENT.md states it:
//   - A file is JSON when its first non-blank character is '{' or '[';
//     otherwise YAML, which may hold several documents separated by `---`.
//   - Each document (or JSON value) is one of:
//       a mapping whose only keys are `tasks:` and/or `nodes:` (lists): each
//         element of `tasks` is a task submission, each of `nodes` a node;
//       a list: each element is an object, classified as below;
//       an object, classified as below.
//   - An object is a node when its `kind` is `node` (any case), a task when
//     its `kind` is `task` (any case); in both cases `kind` is dropped before
//     the object is sent. Any other object is a task submission, and its
//     `kind` (if any) is the task's own field (`batch` or `inference`).
//     `kind: node` inside `tasks:` (or `kind: task` inside `nodes:`) is an
//     error.
//   - An object whose `kind` is `model` or `endpoint` (any case) is a model
//     deployment or an endpoint (docs/INFERENCE.md), `kind` dropped. Only
//     its `name` (and an endpoint's `model`) is checked here; the server
//     checks the rest strictly. They may not appear inside `tasks:`/`nodes:`.
//   - An object whose `kind` is `job` (any case) is a job (docs/JOBS.md),
//     `kind` dropped, checked with the server's parser.
//   - Every task and node is checked locally with the same strict parsers
//     the server uses (core/model_json.h), so a bad file is refused before
//     anything is sent, with the file, line (YAML) and field named.
//
// Threading: pure functions.
#ifndef HF_CLI_MANIFEST_H_
#define HF_CLI_MANIFEST_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf::cli {

struct Manifest {
  std::vector<nlohmann::json> nodes;      // node inventories, in file order
  std::vector<nlohmann::json> tasks;      // task submissions, in file order
  std::vector<nlohmann::json> models;     // model deployments, in file order
  std::vector<nlohmann::json> endpoints;  // inference endpoints, in file order
  std::vector<nlohmann::json> jobs;       // jobs (docs/JOBS.md), in file order
};

// Parses the text of one file; `source` names it in messages ("tasks.yaml",
// "<stdin>"). Errors are InvalidArgument: "tasks.yaml:12: tasks[1].requests.gpu
// must be an integer", "tasks.json: document has no tasks or nodes".
Result<Manifest> ParseManifest(std::string_view text, const std::string& source);

}  // namespace hf::cli

#endif  // HF_CLI_MANIFEST_H_
