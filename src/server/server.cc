#include "server/server.h"

#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "framework/registry.h"
#include "server/codec.h"

namespace hf::server {
namespace {

using nlohmann::json;

Response StatusError(const Status& s) { return JsonResponse(HttpStatusFor(s.code()), ErrorBody(s)); }

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

Result<framework::SchedulerConfig> SchedulerConfigFromJson(const json& j) {
  framework::SchedulerConfig c;
  if (!j.is_object()) return Internal("stored scheduler config is not an object");
  for (auto& [key, field] : {std::pair<const char*, double*>{"load_threshold", &c.load_threshold},
                             {"gpu_load_threshold", &c.gpu_load_threshold},
                             {"memory_threshold", &c.memory_threshold}}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number()) return Internal(std::string("stored scheduler.") + key + " is not a number");
    *field = it->get<double>();
  }
  Status s = c.Validate();
  if (!s.ok()) return s;
  return c;
}

// Restores a plugin's settings after a failed commit.
framework::PluginPatch PatchFromSettings(const framework::PluginSettings& s) {
  framework::PluginPatch p;
  p.enabled = s.enabled;
  p.weight = s.weight;
  if (!s.mode.empty()) p.mode = s.mode;
  p.config = s.config;
  return p;
}

}  // namespace

ControlPlane::ControlPlane(ServerOptions options) : options_(std::move(options)) {}

ControlPlane::~ControlPlane() { Stop(); }

Status ControlPlane::Init() {
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir, ec);
  if (ec) return Unavailable("cannot create data dir " + options_.data_dir + ": " + ec.message());
  store::StoreOptions so;
  so.clock = &clock_;
  Result<std::unique_ptr<store::Store>> st = store::Store::Open(options_.data_dir + "/heteroflow.db", so);
  if (!st.ok()) return st.status();
  store_ = std::move(st).value();
  Status s = BootstrapAdminToken();
  if (!s.ok()) return s;
  s = LoadPolicy();
  if (!s.ok()) return s;
  AddRoutes();
  return Status::Ok();
}

Status ControlPlane::BootstrapAdminToken() {
  bool has_tokens = false;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    Result<std::vector<store::TokenRecord>> t = tx.ListTokens();
    if (!t.ok()) return t.status();
    has_tokens = !t->empty();
    return Status::Ok();
  });
  if (!s.ok() || has_tokens) return s;
  const char* env = std::getenv("HETEROFLOW_ADMIN_TOKEN");
  const bool generated = env == nullptr || *env == '\0';
  const std::string token = generated ? GenerateToken() : std::string(env);
  s = store_->Write([&](store::Tx& tx) -> Status {
    Result<int64_t> id = tx.InsertToken("admin", RoleName(Role::kAdmin), HashToken(token), std::nullopt);
    return id.ok() ? Status::Ok() : id.status();
  });
  if (!s.ok() || !generated) return s;
  const std::string path = options_.data_dir + "/admin.token";
  {
    std::ofstream f(path, std::ios::trunc);
    f << token << "\n";
    if (!f) return Unavailable("cannot write " + path);
  }
  if (::chmod(path.c_str(), 0600) != 0) return Unavailable("cannot chmod " + path);
  std::printf("admin token: %s\n(also written to %s; it is shown only once)\n", token.c_str(),
              path.c_str());
  std::fflush(stdout);
  return Status::Ok();
}

Status ControlPlane::LoadPolicy() {
  framework::Policy policy;
  bool stored = false;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    Result<std::map<std::string, json>> plugins = tx.ListPluginConfigs();
    if (!plugins.ok()) return plugins.status();
    Result<json> sched = tx.GetSchedulerConfig();
    if (!sched.ok() && sched.status().code() != StatusCode::kNotFound) return sched.status();
    stored = !plugins->empty() || sched.ok();
    policy.plugins = *plugins;
    if (sched.ok()) {
      Result<framework::SchedulerConfig> c = SchedulerConfigFromJson(*sched);
      if (!c.ok()) return c.status();
      policy.scheduler = *c;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (!stored && !options_.config_path.empty()) {
    Result<framework::Policy> p = framework::LoadPolicyFile(options_.config_path);
    if (!p.ok()) return p.status();
    policy = std::move(p).value();
  }
  Result<std::unique_ptr<framework::Framework>> fw =
      framework::Framework::Create(plugins::InTreeRegistry(), policy, &clock_);
  if (!fw.ok()) return fw.status();
  framework_ = std::move(fw).value();
  if (stored) return Status::Ok();
  const framework::Policy current = framework_->CurrentPolicy();
  return store_->Write([&](store::Tx& tx) -> Status {
    for (const auto& [name, settings] : current.plugins) {
      Status ps = tx.PutPluginConfig(name, settings);
      if (!ps.ok()) return ps;
    }
    return tx.PutSchedulerConfig(current.scheduler.ToJson());
  });
}

bool ControlPlane::Authorize(const Request& req, Action action, Caller& caller,
                             Response& denied) const {
  std::optional<std::string_view> header = req.Header("Authorization");
  std::optional<std::string> token = header ? BearerToken(*header) : std::nullopt;
  if (!token) {
    denied = JsonError(401, "unauthenticated", "missing or malformed bearer token");
    return false;
  }
  std::optional<store::TokenRecord> rec;
  Status s = store_->Read([&](const store::ReadTx& tx) -> Status {
    Result<store::TokenRecord> r = tx.FindTokenByHash(HashToken(*token));
    if (r.ok()) rec = std::move(r).value();
    return r.ok() || r.status().code() == StatusCode::kNotFound ? Status::Ok() : r.status();
  });
  if (!s.ok()) {
    denied = StatusError(s);
    return false;
  }
  std::optional<Role> role = rec ? ParseRole(rec->role) : std::nullopt;
  if (!rec || !rec->ActiveAt(clock_.NowMs()) || !role) {
    denied = JsonError(401, "unauthenticated", "invalid, expired or revoked token");
    return false;
  }
  if (!Allows(*role, action)) {
    denied = JsonError(403, "forbidden", std::string("role ") + RoleName(*role) +
                                             " may not " + ActionName(action));
    return false;
  }
  caller = {rec->name, *role};
  return true;
}

void ControlPlane::AddRoutes() {
  auto guarded = [this](Action action, auto method) -> Handler {
    return [this, action, method](const Request& req) {
      Caller caller;
      Response denied;
      if (!Authorize(req, action, caller, denied)) return denied;
      return method(req, caller);
    };
  };
  auto ok = [](const Request&) { return JsonResponse(200, json{{"status", "ok"}}); };
  HF_CHECK(router_.Add("GET", "/livez", ok).ok());
  HF_CHECK(router_.Add("GET", "/readyz", ok).ok());
  HF_CHECK(router_.Add("GET", "/api/v1/plugins",
                       guarded(Action::kRead, [this](const Request&, const Caller&) {
                         return ListPlugins();
                       })).ok());
  HF_CHECK(router_.Add("PUT", "/api/v1/plugins/{name}",
                       guarded(Action::kWriteConfig, [this](const Request& r, const Caller& c) {
                         return PutPlugin(r, c);
                       })).ok());
  HF_CHECK(router_.Add("GET", "/api/v1/scheduler/config",
                       guarded(Action::kRead, [this](const Request&, const Caller&) {
                         return GetSchedulerConfig();
                       })).ok());
  HF_CHECK(router_.Add("PUT", "/api/v1/scheduler/config",
                       guarded(Action::kWriteConfig, [this](const Request& r, const Caller& c) {
                         return PutSchedulerConfig(r, c);
                       })).ok());
}

Response ControlPlane::ListPlugins() const {
  json list = json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const framework::PluginInfo& p : framework_->Plugins()) list.push_back(PluginInfoToJson(p));
  return JsonResponse(200, json{{"plugins", std::move(list)}});
}

Response ControlPlane::PutPlugin(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<framework::PluginPatch> patch = ParsePluginPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  const std::string name(req.Param("name"));
  std::lock_guard<std::mutex> lock(mu_);
  Result<framework::PluginInfo> before = framework_->GetPlugin(name);
  if (!before.ok()) return StatusError(before.status());
  const json old_value = StoredPluginSettings(*framework_, name);
  Status s = framework_->UpdatePlugin(name, *patch);
  if (!s.ok()) return StatusError(s);
  const json new_value = StoredPluginSettings(*framework_, name);
  s = store_->Write([&](store::Tx& tx) -> Status {
    Status ps = tx.PutPluginConfig(name, new_value);
    if (!ps.ok()) return ps;
    return tx.AppendAudit(caller.name, "plugins." + name, old_value, new_value);
  });
  if (!s.ok()) {
    HF_CHECK(framework_->UpdatePlugin(name, PatchFromSettings(before->settings)).ok());
    return JsonError(s.code() == StatusCode::kUnavailable ? 503 : 500, StatusCodeToApiCode(s.code()),
                     "could not persist the change: " + s.message());
  }
  Result<framework::PluginInfo> after = framework_->GetPlugin(name);
  return JsonResponse(200, PluginInfoToJson(*after));
}

Response ControlPlane::GetSchedulerConfig() const {
  std::lock_guard<std::mutex> lock(mu_);
  return JsonResponse(200, SchedulerConfigToJson(framework_->scheduler_config(),
                                                 ScoreWeights(*framework_)));
}

Response ControlPlane::PutSchedulerConfig(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Result<SchedulerConfigPatch> patch = ParseSchedulerConfigPatch(*body);
  if (!patch.ok()) return StatusError(patch.status());
  std::lock_guard<std::mutex> lock(mu_);
  const framework::SchedulerConfig old_config = framework_->scheduler_config();
  const std::map<std::string, double> old_weights = ScoreWeights(*framework_);
  const json old_value = SchedulerConfigToJson(old_config, old_weights);
  std::map<std::string, double> weights;
  if (patch->score_weights) weights = *patch->score_weights;
  for (const auto& [name, w] : weights) {
    if (!framework_->GetPlugin(name).ok()) {
      return StatusError(NotFound("score_weights." + name + ": no plugin named " + name));
    }
    if (!old_weights.count(name)) {
      return StatusError(InvalidArgument("score_weights." + name + ": plugin " + name +
                                         " does not score"));
    }
  }
  auto rollback = [&] {
    HF_CHECK(framework_->SetSchedulerConfig(old_config).ok());
    for (const auto& [name, w] : old_weights) {
      framework::PluginPatch p;
      p.weight = w;
      HF_CHECK(framework_->UpdatePlugin(name, p).ok());
    }
  };
  Status s = framework_->SetSchedulerConfig(patch->ApplyTo(old_config));
  for (auto it = weights.begin(); s.ok() && it != weights.end(); ++it) {
    framework::PluginPatch p;
    p.weight = it->second;
    s = framework_->UpdatePlugin(it->first, p);
  }
  if (!s.ok()) {
    rollback();
    return StatusError(s);
  }
  const json new_value = SchedulerConfigToJson(framework_->scheduler_config(), ScoreWeights(*framework_));
  const framework::Policy current = framework_->CurrentPolicy();
  s = store_->Write([&](store::Tx& tx) -> Status {
    Status ws = tx.PutSchedulerConfig(current.scheduler.ToJson());
    for (auto it = weights.begin(); ws.ok() && it != weights.end(); ++it) {
      ws = tx.PutPluginConfig(it->first, current.plugins.at(it->first));
    }
    if (!ws.ok()) return ws;
    return tx.AppendAudit(caller.name, "scheduler", old_value, new_value);
  });
  if (!s.ok()) {
    rollback();
    return JsonError(s.code() == StatusCode::kUnavailable ? 503 : 500, StatusCodeToApiCode(s.code()),
                     "could not persist the change: " + s.message());
  }
  return JsonResponse(200, new_value);
}

Status ControlPlane::Start() {
  HttpServerOptions o;
  o.address = options_.address;
  o.port = options_.port;
  o.worker_threads = 4;
  http_ = std::make_unique<HttpServer>(o, router_.AsHandler());
  return http_->Start();
}

void ControlPlane::Stop() {
  if (http_) http_->Stop();
}

uint16_t ControlPlane::bound_port() const { return http_ ? http_->bound_port() : 0; }

int RunServerCommand(int argc, char** argv) {
  CLI::App app{"Run the HeteroFlow control-plane server", "heteroflow server"};
  ServerOptions options;
  std::string listen = "0.0.0.0:3333";
  app.add_option("--config", options.config_path, "YAML with plugins:/scheduler: blocks (first start)");
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--data-dir", options.data_dir, "where the database and admin.token live")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    size_t used = 0;
    if (colon != std::string::npos) port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (host.empty() || port < 0 || port > 65535) {
    std::fprintf(stderr, "heteroflow server: --listen must be HOST:PORT, got '%s'\n", listen.c_str());
    return 2;
  }
  options.address = host;
  options.port = static_cast<uint16_t>(port);

  // Block the stop signals before any thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ControlPlane cp(options);
  Status s = cp.Init();
  if (s.ok()) s = cp.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "heteroflow server: %s\n", s.ToString().c_str());
    return 1;
  }
  const bool v6 = host.find(':') != std::string::npos;
  std::printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", host.c_str(), v6 ? "]" : "",
              static_cast<unsigned>(cp.bound_port()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "heteroflow server: signal %d, stopping\n", sig);
  cp.Stop();
  return 0;
}

}  // namespace hf::server
