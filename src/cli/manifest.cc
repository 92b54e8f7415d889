#include "cli/manifest.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <string>

#include "core/job.h"
#include "core/json_fields.h"
#include "core/model_json.h"
#include "core/yaml_json.h"

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
    if (kind == "job") {
      if (expect != Expect::kAny) {
        return fail(label + " has kind job inside a " + std::string(is_node ? "nodes:" : "tasks:") +
                    " list");
      }
      obj.erase(it);
      // Checked with the server's parser, as tasks are.
      Result<JobSpec> job = JobSpecFromJson(obj);
      if (!job.ok()) return fail(json_fields::Prefixed(job.status(), path).message());
      out.jobs.push_back(std::move(obj));
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

// A YAML document of the file, parsed on its own: its lines are counted from
// first_line + 1.
struct YamlDoc {
  YAML::Node root;
  int first_line = 0;
};

std::string Line(const std::string& source, const YAML::Node& n, int first_line) {
  return source + ":" + std::to_string(first_line + n.Mark().line + 1);
}

// Splits a YAML stream into its documents, at the lines that start with the
// "---" marker or are the "..." end marker (YAML forbids either at the start
// of a line inside a document). yaml-cpp 0.7's LoadAll can loop for ever,
// taking memory, on a malformed stream as short as `"",` (found by
// fuzz/manifest_fuzz.cc); Load reads one document and stops.
Result<std::vector<YamlDoc>> LoadYamlDocuments(std::string_view text, const std::string& source) {
  std::vector<YamlDoc> docs;
  size_t start = 0;
  int start_line = 0;
  int line = 0;
  auto load = [&](size_t end) -> Status {
    const std::string_view chunk = text.substr(start, end - start);
    if (chunk.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::Ok();
    try {
      docs.push_back({YAML::Load(std::string(chunk)), start_line});
    } catch (const YAML::Exception& e) {
      return InvalidArgument(source + ":" + std::to_string(start_line + e.mark.line + 1) + ": " +
                             e.msg);
    }
    return Status::Ok();
  };
  for (size_t pos = 0; pos <= text.size(); ++line) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(pos, eol - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const bool starts = l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
    const bool ends = l.substr(0, 3) == "..." && (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
    if (starts || ends) {
      HF_RETURN_IF_ERROR(load(pos));
      // A "---" line belongs to the document it opens (it may carry a value
      // or a tag); a "..." line to none.
      start = ends ? std::min(eol + 1, text.size()) : pos;
      start_line = ends ? line + 1 : line;
    }
    pos = eol + 1;
  }
  HF_RETURN_IF_ERROR(load(text.size()));
  return docs;
}

Status AddYamlObject(const YAML::Node& n, Expect expect, const std::string& source, int first_line,
                     const std::string& path, Manifest& out) {
  Result<json> value = YamlToJson(n, "", first_line);
  if (!value.ok()) return InvalidArgument(source + ": " + value.status().message());
  return AddObject(std::move(*value), expect, Line(source, n, first_line), path, out);
}

Status AddYamlDocument(const YAML::Node& doc, int first_line, const std::string& source,
                       Manifest& out) {
  if (doc.IsNull()) return Status::Ok();  // an empty document, e.g. after a trailing ---
  if (doc.IsSequence()) {
    for (size_t i = 0; i < doc.size(); ++i) {
      HF_RETURN_IF_ERROR(
          AddYamlObject(doc[i], Expect::kAny, source, first_line, json_fields::Index("", i), out));
    }
    return Status::Ok();
  }
  if (doc.IsMap()) {
    std::vector<std::string> keys;
    for (const auto& kv : doc) keys.push_back(kv.first.Scalar());
    if (!IsWrapper(keys)) return AddYamlObject(doc, Expect::kAny, source, first_line, "", out);
    if (keys.size() == 2 && keys[0] == keys[1]) {
      return InvalidArgument(Line(source, doc, first_line) + ": key \"" + keys[0] +
                             "\" given twice");
    }
    for (const char* list : {"nodes", "tasks"}) {
      const YAML::Node items = doc[list];
      if (!items) continue;
      if (!items.IsSequence()) {
        return InvalidArgument(Line(source, items, first_line) + ": " + list + " must be a list");
      }
      for (size_t i = 0; i < items.size(); ++i) {
        HF_RETURN_IF_ERROR(AddYamlObject(items[i], list[0] == 'n' ? Expect::kNode : Expect::kTask,
                                         source, first_line, json_fields::Index(list, i), out));
      }
    }
    return Status::Ok();
  }
  return InvalidArgument(Line(source, doc, first_line) +
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
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
      return InvalidArgument(source + ": invalid JSON: " + e.what());
    }
    HF_RETURN_IF_ERROR(AddJsonDocument(doc, source, out));
  } else {
    HF_ASSIGN_OR_RETURN(std::vector<YamlDoc> docs, LoadYamlDocuments(text, source));
    for (const YamlDoc& doc : docs) {
      HF_RETURN_IF_ERROR(AddYamlDocument(doc.root, doc.first_line, source, out));
    }
  }
  if (out.tasks.empty() && out.nodes.empty() && out.models.empty() && out.endpoints.empty() &&
      out.jobs.empty()) {
    return InvalidArgument(source + ": no tasks, jobs, nodes, models or endpoints in the file");
  }
  return out;
}

}  // namespace hf::cli
