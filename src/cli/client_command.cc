#include "cli/client_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_session.h"
#include "cli/describe.h"
#include "cli/manifest.h"
#include "cli/output.h"
#include "cli/request_builders.h"

namespace hf::cli {
namespace {

using nlohmann::json;

constexpr int kOk = 0;
constexpr int kApiError = 1;
constexpr int kUsage = 2;

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "heteroflow %s: %s\n", command.c_str(), message.c_str());
  return kUsage;
}

void AddGlobalFlags(CLI::App& app, GlobalFlags& g) {
  app.add_option("--server", g.server,
                 "server URL http://HOST:PORT[/PREFIX] (else $HETEROFLOW_SERVER, the config "
                 "file's server:, http://127.0.0.1:3333)");
  app.add_option("--token", g.token,
                 "bearer token (else $HETEROFLOW_TOKEN, the config file's token:)");
  app.add_option("-o,--output", g.output, "output format: table, json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str();
  app.add_option("--timeout", g.timeout_s, "seconds to wait for the server")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.footer(
      "The config file is $XDG_CONFIG_HOME/heteroflow/config.yaml (default "
      "~/.config/heteroflow/config.yaml) with keys server: and token:.\n"
      "Exit codes: 0 success, 1 API or connection error, 2 usage error.");
}

// Parses argv into `app`; returns an exit code when the command must stop
// (help printed: 0; bad usage: 2).
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kOk : kUsage;
  }
  return std::nullopt;
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

bool IsTaskId(const std::string& s) {
  return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Prints `value` as JSON or YAML, or calls `table` for the table format.
template <typename TableFn>
void Print(const ApiSession& session, const json& value, TableFn table) {
  if (session.format() == OutputFormat::kTable) {
    std::fputs(table().c_str(), stdout);
  } else {
    std::fputs(Serialize(value, session.format()).c_str(), stdout);
  }
}

// The canonical resource name for what the user typed (kubectl accepts
// singular and plural); "" when unknown.
std::string Resource(const std::string& s) {
  if (s == "node" || s == "nodes" || s == "no") return "nodes";
  if (s == "task" || s == "tasks") return "tasks";
  if (s == "job" || s == "jobs") return "jobs";
  if (s == "queue" || s == "queues") return "queues";
  if (s == "plugin" || s == "plugins") return "plugins";
  if (s == "token" || s == "tokens") return "tokens";
  if (s == "model" || s == "models" || s == "mo") return "models";
  if (s == "endpoint" || s == "endpoints" || s == "ep") return "endpoints";
  return "";
}

bool IsInference(const std::string& resource) {
  return resource == "models" || resource == "endpoints";
}

// The collection's path: /api/v1/nodes, /api/v1/inference/models.
std::string CollectionPath(const std::string& resource) {
  return std::string("/api/v1/") + (IsInference(resource) ? "inference/" : "") + resource;
}

// "models" -> "model".
std::string Singular(const std::string& resource) {
  return resource.substr(0, resource.size() - 1);
}

// `get` ----------------------------------------------------------------------

int RunGet(int argc, char** argv) {
  CLI::App app{"List or show nodes, tasks, jobs, queues, plugins, tokens, models or endpoints.",
               "heteroflow get"};
  GlobalFlags g;
  std::string resource_arg, name;
  TaskFilters f;
  app.add_option("resource", resource_arg,
                 "nodes (no), tasks, jobs, queues, plugins, tokens, models (mo) or endpoints (ep)")
      ->required();
  app.add_option("name", name,
                 "one node name, task or job id, plugin name, token id, model or endpoint name");
  app.add_option("--state", f.state, "tasks: pending|scheduled|running|succeeded|failed|cancelled");
  app.add_option("--node", f.node, "tasks: on this node");
  app.add_option("--group", f.group, "tasks: of this group");
  app.add_option("--priority", f.priority, "tasks: of this priority");
  app.add_option("--limit", f.limit, "tasks: at most this many (1..1000, server default 100)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--after", f.after, "tasks: the page after this id (the last answer's next)");
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;

  const std::string resource = Resource(resource_arg);
  if (resource.empty()) {
    return UsageError("get", "unknown resource \"" + resource_arg +
                                 "\" (nodes, tasks, jobs, queues, plugins, tokens, models or endpoints)");
  }
  const bool filtered =
      !f.state.empty() || !f.node.empty() || !f.group.empty() || f.priority || f.limit || f.after;
  if (filtered && (resource != "tasks" || !name.empty())) {
    return UsageError("get",
                      "--state, --node, --group, --priority, --limit and --after "
                      "filter the task list only");
  }
  if ((resource == "tasks" || resource == "jobs") && !name.empty() && !IsTaskId(name)) {
    return UsageError("get", "a " + Singular(resource) + " id is a number, not \"" + name + "\"");
  }
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("get", session.status().message());
  const int64_t now = Now();

  if (resource == "nodes" || resource == "tasks" || resource == "jobs" || resource == "queues" ||
      IsInference(resource)) {
    const std::string target =
        name.empty() ? (resource == "tasks" ? TaskListTarget(f) : CollectionPath(resource))
                     : CollectionPath(resource) + "/" + UrlEncode(name);
    std::optional<json> answer = session->Call("GET", target);
    if (!answer) return kApiError;
    const json list = name.empty()
                          ? (answer->contains(resource) ? (*answer)[resource] : json::array())
                          : json::array({*answer});
    Print(*session, *answer, [&] {
      if (resource == "nodes") return NodesTable(list);
      if (resource == "models") return ModelsTable(list, now);
      if (resource == "endpoints") return EndpointsTable(list);
      if (resource == "jobs") return JobsTable(list, now);
      if (resource == "queues") return QueuesTable(list);
      return TasksTable(list, now);
    });
    if (resource == "tasks" && name.empty() && session->format() == OutputFormat::kTable &&
        answer->contains("next") && !(*answer)["next"].is_null()) {
      std::fprintf(stderr, "more tasks: heteroflow get tasks --after %s\n",
                   (*answer)["next"].dump().c_str());
    }
    return kOk;
  }

  // Plugins and tokens have no GET-one route: the list is filtered here.
  std::optional<json> answer = session->Call("GET", "/api/v1/" + resource);
  if (!answer) return kApiError;
  json list = answer->contains(resource) ? (*answer)[resource] : json::array();
  json shown = *answer;
  if (!name.empty()) {
    json match;
    for (const json& item : list) {
      const char* field = resource == "plugins" ? "name" : "id";
      if (!item.is_object() || !item.contains(field)) continue;
      const json& key = item[field];
      if ((key.is_string() && key.get<std::string>() == name) ||
          (!key.is_string() && key.dump() == name)) {
        match = item;
      }
    }
    if (match.is_null()) {
      std::fprintf(stderr, "error: not_found: no %s \"%s\"\n",
                   resource == "plugins" ? "plugin" : "token with id", name.c_str());
      return kApiError;
    }
    list = json::array({match});
    shown = match;
  }
  Print(*session, shown,
        [&] { return resource == "plugins" ? PluginsTable(list) : TokensTable(list, now); });
  return kOk;
}

// `describe` -------------------------------------------------------------------

int RunDescribe(int argc, char** argv) {
  CLI::App app{
      "Show one task (state, node, allocation, pending reason, events), job (state, "
      "members, events), node, model deployment (status, replicas, autoscaling) or endpoint.",
      "heteroflow describe"};
  GlobalFlags g;
  std::string resource_arg, name;
  app.add_option("resource", resource_arg, "task, job, node, model or endpoint")->required();
  app.add_option("name", name, "the task's or job's id, or the node's, model's or endpoint's name")
      ->required();
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;
  const std::string resource = Resource(resource_arg);
  if (resource != "tasks" && resource != "jobs" && resource != "nodes" && !IsInference(resource)) {
    return UsageError("describe", "can describe a task, job, node, model or endpoint, not \"" +
                                      resource_arg + "\"");
  }
  if ((resource == "tasks" || resource == "jobs") && !IsTaskId(name)) {
    return UsageError("describe",
                      "a " + Singular(resource) + " id is a number, not \"" + name + "\"");
  }
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("describe", session.status().message());
  std::optional<json> answer =
      session->Call("GET", CollectionPath(resource) + "/" + UrlEncode(name));
  if (!answer) return kApiError;
  Print(*session, *answer, [&] {
    if (resource == "tasks") return DescribeTask(*answer, Now());
    if (resource == "jobs") return DescribeJob(*answer, Now());
    if (resource == "models") return DescribeModel(*answer, Now());
    if (resource == "endpoints") return DescribeEndpoint(*answer, Now());
    return DescribeNode(*answer);
  });
  return kOk;
}

// `logs` -----------------------------------------------------------------------

int RunLogs(int argc, char** argv) {
  CLI::App app{"Print a task's output (stdout and stderr, as its agent shipped it).",
               "heteroflow logs"};
  GlobalFlags g;
  std::string id;
  bool follow = false;
  app.add_option("id", id, "the task's id")->required();
  app.add_flag("-f,--follow", follow, "keep printing new output until the task ends");
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;
  if (!IsTaskId(id)) return UsageError("logs", "a task id is a number, not \"" + id + "\"");
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("logs", session.status().message());
  uint64_t offset = 0;
  while (true) {
    // The state first: output that arrives before the task ends is then
    // read below, so nothing is missed when the loop stops.
    std::optional<json> task;
    if (follow) {
      task = session->Call("GET", "/api/v1/tasks/" + id);
      if (!task) return kApiError;
    }
    std::optional<std::string> chunk =
        session->CallText("GET", "/api/v1/tasks/" + id + "/logs?offset=" + std::to_string(offset));
    if (!chunk) return kApiError;
    std::fwrite(chunk->data(), 1, chunk->size(), stdout);
    std::fflush(stdout);
    offset += chunk->size();
    if (!follow) return kOk;
    const std::string state = task->value("state", "");
    if (state == "succeeded" || state == "failed" || state == "cancelled") return kOk;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// `apply` ----------------------------------------------------------------------

constexpr char kApplyHelp[] =
    "Submit tasks, register nodes, deploy models and create endpoints from a YAML or\n"
    "JSON file.\n\n"
    "FILE ('-' for stdin) is JSON when it starts with '{' or '[', else YAML (several\n"
    "documents may be separated by ---). Each document is one of:\n"
    "  - a mapping with only tasks: and/or nodes: lists;\n"
    "  - a list of objects;\n"
    "  - one object.\n"
    "An object with kind: node is a node inventory; kind: task, or any other kind\n"
    "(the task's own batch|inference) or none, makes it a task submission. A kind of\n"
    "node or task is removed before sending. Everything is checked locally first;\n"
    "then nodes are registered (POST /api/v1/nodes, one by one), then tasks are\n"
    "submitted: one task with POST /api/v1/tasks, several in one all-or-nothing\n"
    "POST /api/v1/tasks/batch (at most 1000).\n\n"
    "An object with kind: model is a model deployment: created (POST\n"
    "/api/v1/inference/models) or, when one of that name exists, replaced (PUT).\n"
    "An object with kind: endpoint is an endpoint (POST /api/v1/inference/endpoints;\n"
    "one that exists with the same model and public is left unchanged). A new\n"
    "endpoint's key secret is printed once. Models, then endpoints, come after tasks.\n"
    "An object with kind: job is a job (POST /api/v1/jobs, docs/JOBS.md): its members\n"
    "are placed as a gang. Jobs come after tasks.";

int RunApply(int argc, char** argv) {
  CLI::App app{kApplyHelp, "heteroflow apply"};
  GlobalFlags g;
  std::string file;
  bool dry_run = false;
  app.add_option("-f,--filename", file, "the YAML or JSON file, '-' for stdin")->required();
  app.add_flag("--dry-run", dry_run, "check the file and show what would be sent; send nothing");
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;

  std::string text;
  std::string source = file;
  if (file == "-") {
    source = "<stdin>";
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) return UsageError("apply", file + ": cannot open the file");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  Result<Manifest> manifest = ParseManifest(text, source);
  if (!manifest.ok()) return UsageError("apply", manifest.status().message());
  Result<OutputFormat> format = ParseOutputFormat(g.output);
  if (!format.ok()) return UsageError("apply", format.status().message());

  if (dry_run) {
    if (*format == OutputFormat::kTable) {
      for (const json& n : manifest->nodes) {
        std::printf("node/%s checked (dry run)\n", n["name"].get<std::string>().c_str());
      }
      for (const json& t : manifest->tasks) {
        std::printf("task %s checked (dry run)\n", t["name"].get<std::string>().c_str());
      }
      for (const json& m : manifest->models) {
        std::printf("model/%s checked (dry run)\n", m["name"].get<std::string>().c_str());
      }
      for (const json& e : manifest->endpoints) {
        std::printf("endpoint/%s checked (dry run)\n", e["name"].get<std::string>().c_str());
      }
      for (const json& j : manifest->jobs) {
        std::printf("job %s checked (dry run)\n", j["name"].get<std::string>().c_str());
      }
    } else {
      json out = {{"nodes", manifest->nodes}, {"tasks", manifest->tasks}};
      if (!manifest->models.empty()) out["models"] = manifest->models;
      if (!manifest->endpoints.empty()) out["endpoints"] = manifest->endpoints;
      if (!manifest->jobs.empty()) out["jobs"] = manifest->jobs;
      std::fputs(Serialize(out, *format).c_str(), stdout);
    }
    return kOk;
  }

  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("apply", session.status().message());
  const bool table = session->format() == OutputFormat::kTable;
  json applied = {{"nodes", json::array()}, {"tasks", json::array()}};
  if (!manifest->models.empty()) applied["models"] = json::array();
  if (!manifest->endpoints.empty()) applied["endpoints"] = json::array();
  if (!manifest->jobs.empty()) applied["jobs"] = json::array();
  // A failure stops here; what was printed before it was applied.
  auto finish = [&](int rc) {
    if (!table) std::fputs(Serialize(applied, session->format()).c_str(), stdout);
    return rc;
  };
  for (const json& node : manifest->nodes) {
    int status = 0;
    std::optional<json> answer = session->Call("POST", "/api/v1/nodes", &node, &status);
    if (!answer) return finish(kApiError);
    if (table) {
      std::printf("node/%s %s\n", node["name"].get<std::string>().c_str(),
                  status == 201 ? "created" : "configured");
    }
    applied["nodes"].push_back(std::move(*answer));
  }
  if (!manifest->tasks.empty()) {
    json created = json::array();
    if (manifest->tasks.size() == 1) {
      std::optional<json> answer = session->Call("POST", "/api/v1/tasks", &manifest->tasks[0]);
      if (!answer) return finish(kApiError);
      created.push_back(std::move(*answer));
    } else {
      const json body = {{"tasks", manifest->tasks}};
      std::optional<json> answer = session->Call("POST", "/api/v1/tasks/batch", &body);
      if (!answer) return finish(kApiError);
      if (answer->contains("tasks")) created = (*answer)["tasks"];
    }
    for (const json& t : created) {
      if (table) {
        std::printf("task/%s created (%s)\n", Text(t, "id").c_str(), Text(t, "name").c_str());
      }
      applied["tasks"].push_back(t);
    }
  }
  for (const json& job : manifest->jobs) {
    std::optional<json> answer = session->Call("POST", "/api/v1/jobs", &job);
    if (!answer) return finish(kApiError);
    if (table) {
      std::printf("job/%s created (%s, %s members)\n", Text(*answer, "id").c_str(),
                  Text(*answer, "name").c_str(), Text(*answer, "replicas").c_str());
    }
    applied["jobs"].push_back(std::move(*answer));
  }
  for (const json& model : manifest->models) {
    const std::string name = model["name"].get<std::string>();
    const std::string path = "/api/v1/inference/models/" + UrlEncode(name);
    std::optional<bool> exists = session->Exists(path);
    if (!exists) return finish(kApiError);
    std::optional<json> answer = *exists
                                     ? session->Call("PUT", path, &model)
                                     : session->Call("POST", "/api/v1/inference/models", &model);
    if (!answer) return finish(kApiError);
    if (table) {
      std::printf("model/%s %s (revision %s)\n", name.c_str(), *exists ? "configured" : "created",
                  Text(*answer, "revision").c_str());
    }
    applied["models"].push_back(std::move(*answer));
  }
  for (const json& endpoint : manifest->endpoints) {
    const std::string name = endpoint["name"].get<std::string>();
    const std::string path = "/api/v1/inference/endpoints/" + UrlEncode(name);
    std::optional<bool> exists = session->Exists(path);
    if (!exists) return finish(kApiError);
    if (*exists) {
      // Endpoints have no PUT: one that already routes as asked is left alone,
      // which keeps `apply` repeatable; any other difference needs a delete.
      std::optional<json> current = session->Call("GET", path);
      if (!current) return finish(kApiError);
      const bool same = current->value("model", "") == endpoint["model"] &&
                        current->value("public", false) == endpoint.value("public", false);
      if (!same) {
        std::fprintf(stderr,
                     "error: endpoint %s exists with another model or public setting; "
                     "delete it first (heteroflow delete endpoint %s)\n",
                     name.c_str(), name.c_str());
        return finish(kApiError);
      }
      if (table) std::printf("endpoint/%s unchanged\n", name.c_str());
      applied["endpoints"].push_back(std::move(*current));
      continue;
    }
    std::optional<json> answer = session->Call("POST", "/api/v1/inference/endpoints", &endpoint);
    if (!answer) return finish(kApiError);
    if (table) {
      std::printf("endpoint/%s created\n", name.c_str());
      if (answer->contains("key") && (*answer)["key"].is_object()) {
        const json& key = (*answer)["key"];
        std::printf(
            "endpoint/%s key %s (%s) secret: %s\n"
            "  (shown only once: save it now; clients send it as "
            "\"Authorization: Bearer <secret>\")\n",
            name.c_str(), Text(key, "id").c_str(), Text(key, "name").c_str(),
            Text(key, "secret").c_str());
      }
    }
    applied["endpoints"].push_back(std::move(*answer));
  }
  return finish(kOk);
}

// `delete`, `cordon`, `uncordon`, `drain` ----------------------------------------

int RunDelete(int argc, char** argv) {
  CLI::App app{
      "Cancel a task or a job, delete a node (it must have no tasks), revoke a token, or "
      "delete a model deployment (no endpoint may route to it) or an endpoint.",
      "heteroflow delete"};
  GlobalFlags g;
  std::string resource_arg, name;
  app.add_option("resource", resource_arg, "task, job, node, token, model or endpoint")->required();
  app.add_option("name", name,
                 "the task's, job's or token's id, or the node's, model's or endpoint's name")
      ->required();
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;
  const std::string resource = Resource(resource_arg);
  if (resource != "tasks" && resource != "jobs" && resource != "nodes" && resource != "tokens" &&
      !IsInference(resource)) {
    return UsageError("delete", "can delete a task, job, node, token, model or endpoint, not \"" +
                                    resource_arg + "\"");
  }
  if ((resource == "tasks" || resource == "jobs") && !IsTaskId(name)) {
    return UsageError("delete",
                      "a " + Singular(resource) + " id is a number, not \"" + name + "\"");
  }
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("delete", session.status().message());
  std::optional<json> answer =
      session->Call("DELETE", CollectionPath(resource) + "/" + UrlEncode(name));
  if (!answer) return kApiError;
  const char* done = resource == "tasks" || resource == "jobs" ? "cancelled"
                     : resource == "tokens"                    ? "revoked"
                                                               : "deleted";
  Print(*session, *answer, [&] { return Singular(resource) + "/" + name + " " + done + "\n"; });
  return kOk;
}

int RunNodeAction(const std::string& verb, int argc, char** argv) {
  const char* what =
      verb == "cordon"     ? "Mark a node Draining: it keeps its tasks, takes no new ones."
      : verb == "uncordon" ? "Mark a node Ready again."
                           : "Drain a node: no new tasks; its preemptible tasks are "
                             "evicted and queued again, the others run to their end.";
  CLI::App app{what, "heteroflow " + verb};
  GlobalFlags g;
  std::string name;
  app.add_option("node", name, "the node's name")->required();
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc, argv)) return *rc;
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError(verb, session.status().message());
  std::optional<json> answer =
      session->Call("POST", "/api/v1/nodes/" + UrlEncode(name) + "/" + verb);
  if (!answer) return kApiError;
  const std::string done = verb == "drain" ? "drained" : verb + "ed";
  Print(*session, *answer, [&] {
    std::string line = "node/" + name + " " + done;
    if (verb == "drain") {
      line += " (" + std::to_string(answer->value("evicted", json::array()).size()) +
              " task(s) evicted, " +
              std::to_string(answer->value("waiting_for", json::array()).size()) +
              " left to finish)";
    }
    return line + "\n";
  });
  return kOk;
}

// `plugins set` ----------------------------------------------------------------

int RunPlugins(int argc, char** argv) {
  const std::string sub = argc >= 2 ? argv[1] : "";
  if (sub != "set") {
    std::fprintf(stderr,
                 "usage: heteroflow plugins set NAME [--weight W] [--enabled true|false] "
                 "[--mode M] [--config JSON]\n(list them with 'heteroflow get plugins')\n");
    return sub == "--help" || sub == "-h" ? kOk : kUsage;
  }
  CLI::App app{"Change a plugin: only the given fields are sent (PUT /api/v1/plugins/NAME).",
               "heteroflow plugins set"};
  GlobalFlags g;
  std::string name;
  PluginSetArgs a;
  app.add_option("name", name, "the plugin's name")->required();
  app.add_option("--weight", a.weight, "score weight, a number >= 0");
  app.add_option("--enabled", a.enabled, "true or false")->check(CLI::IsMember({"true", "false"}));
  app.add_option("--mode", a.mode, "the plugin's mode (see 'get plugins -o yaml' for modes)");
  app.add_option("--config", a.config, "the plugin's config, a JSON object");
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc - 1, argv + 1)) return *rc;
  Result<json> body = PluginPatchBody(a);
  if (!body.ok()) return UsageError("plugins set", body.status().message());
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("plugins set", session.status().message());
  std::optional<json> answer = session->Call("PUT", "/api/v1/plugins/" + UrlEncode(name), &*body);
  if (!answer) return kApiError;
  Print(*session, *answer, [&] { return PluginsTable(json::array({*answer})); });
  return kOk;
}

// `config get|set` -------------------------------------------------------------

int RunConfig(int argc, char** argv) {
  const std::string sub = argc >= 2 ? argv[1] : "";
  if (sub != "set" && sub != "get") {
    std::fprintf(stderr,
                 "usage: heteroflow config get\n"
                 "       heteroflow config set KEY=VALUE ...   (e.g. load_threshold=0.85 "
                 "score_weights.binpack=2)\n");
    return sub == "--help" || sub == "-h" ? kOk : kUsage;
  }
  const bool set = sub == "set";
  CLI::App app{set ? "Change the scheduler config: KEY=VALUE each; dotted keys nest "
                     "(score_weights.binpack=2); values are JSON when they parse as JSON, "
                     "else strings (PUT /api/v1/scheduler/config)."
                   : "Show the scheduler config (GET /api/v1/scheduler/config).",
               set ? "heteroflow config set" : "heteroflow config get"};
  GlobalFlags g;
  std::vector<std::string> assignments;
  if (set) app.add_option("assignments", assignments, "KEY=VALUE ...")->required();
  AddGlobalFlags(app, g);
  if (std::optional<int> rc = Parse(app, argc - 1, argv + 1)) return *rc;
  std::optional<json> body;
  if (set) {
    Result<json> parsed = ParseConfigAssignments(assignments);
    if (!parsed.ok()) return UsageError("config set", parsed.status().message());
    body = std::move(*parsed);
  }
  Result<ApiSession> session = ApiSession::Open(g);
  if (!session.ok()) return UsageError("config " + sub, session.status().message());
  std::optional<json> answer =
      session->Call(set ? "PUT" : "GET", "/api/v1/scheduler/config", body ? &*body : nullptr);
  if (!answer) return kApiError;
  Print(*session, *answer, [&] { return KeyValueTable(*answer); });
  return kOk;
}

}  // namespace

bool IsClientVerb(std::string_view v) {
  return v == "get" || v == "describe" || v == "logs" || v == "apply" || v == "delete" ||
         v == "cordon" || v == "uncordon" || v == "drain" || v == "plugins" || v == "config";
}

int RunClientCommand(int argc, char** argv) {
  const std::string verb = argv[0];
  if (verb == "get") return RunGet(argc, argv);
  if (verb == "describe") return RunDescribe(argc, argv);
  if (verb == "logs") return RunLogs(argc, argv);
  if (verb == "apply") return RunApply(argc, argv);
  if (verb == "delete") return RunDelete(argc, argv);
  if (verb == "cordon" || verb == "uncordon" || verb == "drain") {
    return RunNodeAction(verb, argc, argv);
  }
  if (verb == "plugins") return RunPlugins(argc, argv);
  if (verb == "config") return RunConfig(argc, argv);
  return UsageError(verb, "not a client command");
}

const char* ClientUsage() {
  return "  get        list or show nodes, tasks, plugins, tokens, models or endpoints\n"
         "  describe   show a task (state, allocation, pending reason, events), a node,\n"
         "             a model deployment (status, replicas, autoscaling) or an endpoint\n"
         "  logs       print a task's output (-f: until it ends)\n"
         "  apply      submit tasks, register nodes, deploy models, create endpoints from\n"
         "             a YAML or JSON file (-f FILE)\n"
         "  delete     cancel a task, delete a node, model or endpoint, revoke a token\n"
         "  cordon     stop placing new tasks on a node\n"
         "  uncordon   let a cordoned or drained node take tasks again\n"
         "  drain      cordon a node, evict its preemptible tasks (queued again)\n"
         "  plugins    plugins set NAME [--weight W] [--enabled true|false] [--mode M]\n"
         "  config     config get | config set KEY=VALUE ... (scheduler config)\n";
}

}  // namespace hf::cli
