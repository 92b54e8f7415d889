#include "cli/manifest.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <string>

#include "cli/yaml_json.h"
#include "core/json_fields.h"
#include "core/model_json.h"

namespace hf::cli {
namespace {

using nlohmann::json;

// What the document's structure says an object must be.
enum class Expect { kAny, kTask, kNode };

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Applies the `kind` rule to one object and checks it with the server's
// parser. `where` is "file" or "file:line"; `path` is "", "[2]", "tasks[1]".
Status AddObject(json obj, Expect expect, const std::string& where, const std::string& path,
                 Manifest& out) {
  auto fail = [&](const std::string& message) { return InvalidArgument(where + ": " + message); };
  const std::string label = path.empty() ? "the document" : path;
  if (!obj.is_object()) {
    return fail(label + " must be a task or node object, got " + json_fields::TypeName(obj));
  }
  bool is_node = expect == Expect::kNode;
  if (auto it = obj.find("kind"); it != obj.end() && it->is_string()) {
    const std::string kind = Lower(it->get<std::string>());
    if (kind == "model" || kind == "endpoint") {
      if (expect != Expect::kAny) {
        return fail(label + " has kind " + kind + " inside a " + (is_node ? "nodes:" : "tasks:") +
                    " list");
      }
      obj.erase(it);
      for (const char* field : {"name", "model"}) {
        if (field[0] == 'm' && kind == "model") continue;  // a model's id defaults to its name
        auto f = obj.find(field);
        if (f == obj.end() || !f->is_string() || f->get<std::string>().empty()) {
          return fail(
              json_fields::Prefixed(InvalidArgument(std::string(field) + " is required (a " + kind +
                                                    " needs a non-empty string " + field + ")"),
                                    path)
                  .message());
        }
      }
      (kind == "model" ? out.models : out.endpoints).push_back(std::move(obj));
      return Status::Ok();
    }
    if (kind == "node" || kind == "task") {
      const bool says_node = kind == "node";
      if (expect != Expect::kAny && says_node != is_node) {
        return fail(label + " has kind " + kind + " inside a " + (is_node ? "nodes:" : "tasks:") +
                    " list");
      }
      is_node = says_node;
      obj.erase(it);
    }
  }
  if (is_node) {
    Result<NodeSpec> node = NodeSpecFromJson(obj);
    if (!node.ok()) return fail(json_fields::Prefixed(node.status(), path).message());
    out.nodes.push_back(std::move(obj));
  } else {
    Result<Task> task = TaskFromJson(obj, path);
    if (!task.ok()) return fail(task.status().message());
    out.tasks.push_back(std::move(obj));
  }
  return Status::Ok();
}

// Whether a mapping is the {tasks: [...], nodes: [...]} wrapper.
template <typename Keys>
bool IsWrapper(const Keys& keys) {
  if (keys.empty()) return false;
  for (const std::string& k : keys) {
    if (k != "tasks" && k != "nodes") return false;
  }
  return true;
}

Status AddJsonDocument(const json& doc, const std::string& source, Manifest& out) {
  if (doc.is_array()) {
    for (size_t i = 0; i < doc.size(); ++i) {
      HF_RETURN_IF_ERROR(AddObject(doc[i], Expect::kAny, source, json_fields::Index("", i), out));
    }
    return Status::Ok();
  }
  if (doc.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : doc.items()) keys.push_back(k);
    if (!IsWrapper(keys)) return AddObject(doc, Expect::kAny, source, "", out);
    for (const char* list : {"nodes", "tasks"}) {
      if (!doc.contains(list)) continue;
      const json& items = doc[list];
      if (!items.is_array()) return InvalidArgument(source + ": " + list + " must be a list");
      for (size_t i = 0; i < items.size(); ++i) {
        HF_RETURN_IF_ERROR(AddObject(items[i], list[0] == 'n' ? Expect::kNode : Expect::kTask,
                                     source, json_fields::Index(list, i), out));
      }
    }
    return Status::Ok();
  }
  return InvalidArgument(source +
                         ": expected a task, a node, a list of them or {\"tasks\": [...]}");
}

std::string Line(const std::string& source, const YAML::Node& n) {
  return source + ":" + std::to_string(n.Mark().line + 1);
}

Status AddYamlObject(const YAML::Node& n, Expect expect, const std::string& source,
                     const std::string& path, Manifest& out) {
  Result<json> value = YamlToJson(n);
  if (!value.ok()) return InvalidArgument(source + ": " + value.status().message());
  return AddObject(std::move(*value), expect, Line(source, n), path, out);
}

Status AddYamlDocument(const YAML::Node& doc, const std::string& source, Manifest& out) {
  if (doc.IsNull()) return Status::Ok();  // an empty document, e.g. after a trailing ---
  if (doc.IsSequence()) {
    for (size_t i = 0; i < doc.size(); ++i) {
      HF_RETURN_IF_ERROR(
          AddYamlObject(doc[i], Expect::kAny, source, json_fields::Index("", i), out));
    }
    return Status::Ok();
  }
  if (doc.IsMap()) {
    std::vector<std::string> keys;
    for (const auto& kv : doc) keys.push_back(kv.first.Scalar());
    if (!IsWrapper(keys)) return AddYamlObject(doc, Expect::kAny, source, "", out);
    if (keys.size() == 2 && keys[0] == keys[1]) {
      return InvalidArgument(Line(source, doc) + ": key \"" + keys[0] + "\" given twice");
    }
    for (const char* list : {"nodes", "tasks"}) {
      const YAML::Node items = doc[list];
      if (!items) continue;
      if (!items.IsSequence()) {
        return InvalidArgument(Line(source, items) + ": " + list + " must be a list");
      }
      for (size_t i = 0; i < items.size(); ++i) {
        HF_RETURN_IF_ERROR(AddYamlObject(items[i], list[0] == 'n' ? Expect::kNode : Expect::kTask,
                                         source, json_fields::Index(list, i), out));
      }
    }
    return Status::Ok();
  }
  return InvalidArgument(Line(source, doc) +
                         ": expected a task, a node, a list of them or tasks: [...]");
}

}  // namespace

Result<Manifest> ParseManifest(std::string_view text, const std::string& source) {
  Manifest out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return InvalidArgument(source + ": the file is empty");
  if (text[first] == '{' || text[first] == '[') {
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      return InvalidArgument(source + ": invalid JSON: " + e.what());
    }
    HF_RETURN_IF_ERROR(AddJsonDocument(doc, source, out));
  } else {
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& e) {
      return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    for (const YAML::Node& doc : docs) HF_RETURN_IF_ERROR(AddYamlDocument(doc, source, out));
  }
  if (out.tasks.empty() && out.nodes.empty() && out.models.empty() && out.endpoints.empty()) {
    return InvalidArgument(source + ": no tasks, nodes, models or endpoints in the file");
  }
  return out;
}

}  // namespace hf::cli
