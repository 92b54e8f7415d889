// The scheduling policy (docs/API.md, "Plugins", "Scheduler config",
// "Preview", "Audit").
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/time.h"
#include "framework/registry.h"
#include "server/api/api.h"
#include "server/codec.h"
#include "server/preview.h"

namespace hf::server::api {

using scheduler::ClusterSnapshot;

namespace {

// One plugin's stored form: its config keys plus enabled / weight / mode, as
// Framework::CurrentPolicy writes it (and Framework::Create reads it).
json StoredPluginSettings(const framework::Framework& fw, const std::string& name) {
  framework::Policy p = fw.CurrentPolicy();
  auto it = p.plugins.find(name);
  return it == p.plugins.end() ? json() : it->second;
}

std::map<std::string, double> ScoreWeights(const framework::Framework& fw) {
  std::map<std::string, double> w;
  for (const framework::PluginInfo& p : fw.Plugins()) {
    if (p.points & framework::kScorePoint) w[p.name] = p.settings.weight;
  }
  return w;
}

// A policy change that the store refused: nothing changed.
Response PersistError(const Status& s) {
  return JsonError(s.code() == StatusCode::kUnavailable ? 503 : 500, StatusCodeToApiCode(s.code()),
                   "could not persist the change: " + s.message());
}

// A view's serialised body as a 200 application/json answer.
Response ViewResponse(const std::shared_ptr<const std::string>& body) {
  // The control plane refreshes the views before it serves, so null means
  // a broken start-up order.
  HF_CHECK(body != nullptr);
  Response r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = *body;
  return r;
}

}  // namespace

void PolicyViews::Refresh(const framework::Framework& fw) {
  json list = json::array();
  for (const framework::PluginInfo& p : fw.Plugins()) list.push_back(PluginInfoToJson(p));
  // Written as JsonResponse writes a body, so the answer is byte for byte
  // what serialising per request gave.
  auto plugins = std::make_shared<const std::string>(
      JsonResponse(200, json{{"plugins", std::move(list)}}).body);
  auto config = std::make_shared<const std::string>(
      JsonResponse(200, SchedulerConfigToJson(fw.scheduler_config(), ScoreWeights(fw))).body);
  MutexLock lock(mu_);
  plugins_ = std::move(plugins);
  config_ = std::move(config);
}

std::shared_ptr<const std::string> PolicyViews::plugins() const {
  MutexLock lock(mu_);
  return plugins_;
}

std::shared_ptr<const std::string> PolicyViews::config() const {
  MutexLock lock(mu_);
  return config_;
}

Response PolicyApi::ListPlugins(const Request&, const Caller&) const {
  return ViewResponse(views_.plugins());
}

Response PolicyApi::GetSchedulerConfig(const Request&, const Caller&) const {
  return ViewResponse(views_.config());
}

Status PolicyApi::CheckPluginPaths(const framework::Framework& fw, const std::string& name,
                                   const json& config) const {
  if (file_root_.empty() || !config.is_object()) return Status::Ok();
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(file_root_, ec);
  for (const std::string& key : fw.PathConfigKeys(name)) {
    auto it = config.find(key);
    if (it == config.end() || !it->is_string() || it->get<std::string>().empty()) continue;
    // Resolved (links followed) before it is compared, so ../ and links
    // cannot leave the root.
    const std::filesystem::path file =
        std::filesystem::weakly_canonical(it->get<std::string>(), ec);
    const auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
    if (ec || r != root.end() || f == file.end()) {
      return InvalidArgument("plugins." + name + "." + key + " must name a file under " +
                             file_root_ + " (the server's --file-root)");
    }
  }
  return Status::Ok();
}

Response PolicyApi::PutPlugin(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<framework::PluginPatch> patch = ParsePluginPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  const std::string name(req.Param("name"));
  bool stored = false;  // the change was made, and failed only in the store
  json old_value, out;
  Status s = scheduler_.ChangePolicy(
      [&](framework::Framework& fw) -> Status {
        HF_ASSIGN_OR_RETURN(framework::PluginInfo before, fw.GetPlugin(name));
        if (patch->config) HF_RETURN_IF_ERROR(CheckPluginPaths(fw, name, *patch->config));
        old_value = StoredPluginSettings(fw, name);
        HF_RETURN_IF_ERROR(fw.UpdatePlugin(name, *patch));
        // A file the caller named that cannot be used is the caller's
        // mistake: 400, and nothing changes (a file that breaks later puts
        // the plugin in error).
        HF_ASSIGN_OR_RETURN(framework::PluginInfo now, fw.GetPlugin(name));
        if (patch->config && now.status == framework::PluginStatus::kError &&
            before.status != framework::PluginStatus::kError) {
          return InvalidArgument("plugins." + name + ": " + now.message);
        }
        return Status::Ok();
      },
      [&](const framework::Framework& fw) -> Status {
        stored = true;
        const json new_value = StoredPluginSettings(fw, name);
        HF_ASSIGN_OR_RETURN(framework::PluginInfo after, fw.GetPlugin(name));
        out = PluginInfoToJson(after);
        return store_.Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.PutPluginConfig(name, new_value));
          return tx.AppendAudit(caller.name, "plugins." + name, old_value, new_value);
        });
      });
  if (!s.ok()) return stored ? PersistError(s) : StatusError(s);
  events_.Publish("plugin",
                  json{{"action", "updated"}, {"name", name}, {"by", caller.name}, {"plugin", out}},
                  clock_.NowMs());
  return JsonResponse(200, out);
}

Response PolicyApi::ReloadPlugin(const Request& req, const Caller& caller) {
  // The file is read without the scheduler's lock. A file that is broken
  // now is the server's trouble, not the caller's: 503, the plugin in error.
  Result<framework::PluginInfo> info =
      scheduler_.ReloadPlugin(std::string(req.Param("name")), caller.name);
  if (!info.ok()) return StatusError(info.status());
  return JsonResponse(200, PluginInfoToJson(*info));
}

Response PolicyApi::PutSchedulerConfig(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<SchedulerConfigPatch> patch = ParseSchedulerConfigPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  std::map<std::string, double> weights;
  if (patch->score_weights) weights = *patch->score_weights;
  bool stored = false;  // the change was made, and failed only in the store
  json old_value, new_value;
  Status s = scheduler_.ChangePolicy(
      [&](framework::Framework& fw) -> Status {
        const framework::SchedulerConfig old_config = fw.scheduler_config();
        old_value = SchedulerConfigToJson(old_config, ScoreWeights(fw));
        HF_RETURN_IF_ERROR(fw.SetScoreWeights(weights));
        return fw.SetSchedulerConfig(patch->ApplyTo(old_config));
      },
      [&](const framework::Framework& fw) -> Status {
        stored = true;
        new_value = SchedulerConfigToJson(fw.scheduler_config(), ScoreWeights(fw));
        const framework::Policy current = fw.CurrentPolicy();
        return store_.Write([&](store::Tx& tx) -> Status {
          HF_RETURN_IF_ERROR(tx.PutSchedulerConfig(current.scheduler.ToJson()));
          for (const auto& [name, w] : weights) {
            HF_RETURN_IF_ERROR(tx.PutPluginConfig(name, current.plugins.at(name)));
          }
          return tx.AppendAudit(caller.name, "scheduler", old_value, new_value);
        });
      });
  if (!s.ok()) return stored ? PersistError(s) : StatusError(s);
  events_.Publish("config", json{{"action", "updated"}, {"by", caller.name}, {"config", new_value}},
                  clock_.NowMs());
  return JsonResponse(200, new_value);
}

Response PolicyApi::Preview(const Request& req, const Caller&) const {
  Result<json> body = ParseJsonBody(req.body.empty() ? std::string_view("{}") : req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<PreviewRequest> preq = ParsePreviewRequest(*body);
  if (!preq.ok()) return StatusError(preq.status());
  // A candidate's files are confined as a PUT's are.
  const Status paths = scheduler_.ReadPolicy([&](const framework::Framework& fw) {
    for (const auto& [name, patch] : preq->plugins) {
      if (!patch.config) continue;
      HF_RETURN_IF_ERROR(CheckPluginPaths(fw, name, *patch.config));
    }
    return Status::Ok();
  });
  if (!paths.ok()) return StatusError(paths);
  // Only the whole-cluster workload needs the placed tasks' specs.
  ClusterSnapshot snap = scheduler_.Snapshot(!preq->tasks && preq->workload == "cluster");
  Result<json> out = RunPreview(*preq, snap, plugins::InTreeRegistry(), &clock_);
  if (!out.ok()) return StatusError(out.status());
  return JsonResponse(200, *out);
}

Response PolicyApi::ListAudit(const Request& req, const Caller&) const {
  int limit = 100;
  for (const auto& [key, value] : req.query) {
    if (key != "limit")
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    Result<int64_t> v = ParseIntParam("limit", value, 1, 1000);
    if (!v.ok()) return StatusError(v.status());
    limit = static_cast<int>(*v);
  }
  json out = json::array();
  Status s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(std::vector<store::AuditEntry> entries, tx.ListAudit(limit));
    for (const auto& e : entries) {
      out.push_back({{"id", e.id},
                     {"time", FormatTimeMs(e.time_ms)},
                     {"actor", e.actor},
                     {"key", e.key},
                     {"old", e.old_value},
                     {"new", e.new_value}});
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  return JsonResponse(200, json{{"entries", std::move(out)}});
}

}  // namespace hf::server::api
