// YAML <-> JSON for the client: `apply -f` reads YAML into the API's JSON,
// and `-o yaml` writes the API's JSON as YAML (through yaml-cpp's emitter).
//
// Scalars are typed the way YAML 1.2's core schema reads them, so that
// `gpu: 2` is a number and `preemptible: false` a boolean:
//   - quoted scalars (and any with an explicit tag) are strings;
//   - plain `~`, `null`, `Null`, `NULL` and the empty scalar are null;
//   - plain true/false (also True/TRUE/False/FALSE) are booleans;
//   - plain decimal integers are integers; plain decimal numbers with a
//     fraction or exponent, and .inf/.nan, are floats;
//   - anything else is a string.
// A field the API defines as a string stays a string even when it looks like
// a number (`command: [python, train.py, --lr, 0.1]`, `env: {DEBUG: 1}`):
// see IsStringField.
//
// Threading: pure functions.
#ifndef HF_CORE_YAML_JSON_H_
#define HF_CORE_YAML_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace YAML {
class Node;
}

namespace hf {

// Whether `pattern` names a string field of a task submission or a node
// inventory. Patterns are keys joined by '.', "[]" standing for any list
// element: "name", "command[]", "requests.gpu_models[]", "gpus[].model",
// "env.SOME_KEY", "labels.example.com/x".
bool IsStringField(std::string_view pattern);

// A YAML node as JSON; `pattern` is the node's own pattern ("" for a
// document's root). Errors (InvalidArgument, with the line, counted from
// `first_line` + 1: the line the node's document starts at in its file): a
// key given twice in one mapping, a key that is not a scalar.
Result<nlohmann::json> YamlToJson(const YAML::Node& node, const std::string& pattern = "",
                                  int first_line = 0);

// The JSON value as a YAML document (block style; empty maps and lists as {}
// and []). Strings that a reader would take for another type ("true", "1",
// "", "null") are double-quoted, so the YAML reads back as the same JSON.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace hf

#endif  // HF_CORE_YAML_JSON_H_
