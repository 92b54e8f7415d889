#include "agent/agent.h"

#include <spdlog/spdlog.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "agent/lease.h"
#include "agent/task_supervisor.h"
#include "core/clock.h"
#include "core/model_json.h"
#include "core/private_files.h"

namespace hf::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kApi = "/api/v1/agent";

void Log(const std::string& line) { spdlog::info("agent: {}", line); }

// The API's error message from an error body, else the raw body (cut short).
std::string ErrorText(const http::HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return r.body.substr(0, 300);
}

bool RouteMissing(const http::HttpResponse& r) {
  return r.status == 404 && ErrorText(r).rfind("no route", 0) == 0;
}

std::string SignalName(int sig) {
  const char* d = sigabbrev_np(sig);
  return d != nullptr ? std::string("SIG") + d : std::to_string(sig);
}

constexpr size_t kLogChunk = 256 * 1024;
// output.log beyond this is rotated to output.log.1 (one old copy).
constexpr uint64_t kMaxLocalLog = 64ull << 20;

// Length of the valid UTF-8 sequence at s[i..n), 0 when invalid, -1 when it
// is a valid but incomplete prefix cut by the end of the buffer.
int Utf8Len(const unsigned char* s, size_t i, size_t n) {
  const unsigned char c = s[i];
  int len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k < len; ++k) {
    if (i + k >= n) return -1;
    const unsigned char b = s[i + k];
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return len;
}

// `raw` as valid UTF-8, invalid bytes replaced by U+FFFD. Unless `final`, a
// sequence cut by the end of `raw` is left for the next chunk; `consumed`
// says how many bytes of `raw` the text covers.
std::string ToUtf8(const std::string& raw, bool final, size_t& consumed) {
  const auto* s = reinterpret_cast<const unsigned char*>(raw.data());
  const size_t n = raw.size();
  std::string out;
  out.reserve(n);
  size_t i = 0;
  while (i < n) {
    const int len = Utf8Len(s, i, n);
    if (len > 0) {
      out.append(raw, i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else if (len < 0 && !final) {
      break;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  consumed = i;
  return out;
}

// The allocation in a task's `allocation` file (written by Launch); nullopt
// when the file is missing or unreadable.
std::optional<Allocation> ReadAllocationFile(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  json j = json::parse(f, nullptr, false);
  Result<Allocation> a = ParseAllocation(j);
  if (j.is_discarded() || !a.ok()) return std::nullopt;
  return std::move(a).value();
}

// The port in a task's `port` file (written by Launch); nullopt when the
// file is missing or does not hold a port.
std::optional<uint16_t> ReadPortFile(const std::filesystem::path& path) {
  std::ifstream f(path);
  long port = 0;
  if (!f || !(f >> port) || port < 1 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

}  // namespace

Agent::Agent(AgentOptions options)
    : opt_(std::move(options)),
      supervisor_command_(TaskSupervisorCommand()),
      supervisor_(supervisor_command_.size() == 1 ? supervisor_command_[0] : std::string()),
      base_env_(ProcessEnv()),
      node_devices_{.gpus = opt_.inventory.spec.gpus,
                    .bind_ids = opt_.inventory.discovered.bind_ids,
                    .vendor_index = opt_.inventory.discovered.vendor_index,
                    .advertise_address = opt_.advertise_address} {}

void Agent::RequestStop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  reports_cv_.notify_all();
  supervisor_.Interrupt();
}

bool Agent::SleepFor(milliseconds d) {
  MutexLock lock(mu_);
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop_.load() && lock.WaitUntil(cv_, until) == std::cv_status::no_timeout) {
  }
  return !stop_.load();
}

Agent::RegisterOutcome Agent::Register(const http::HttpClient& client) {
  json request = {{"node", NodeSpecToJson(opt_.inventory.spec)}};
  // Where this node's tasks are reached (a job's MASTER_ADDR).
  if (!opt_.advertise_address.empty()) request["address"] = opt_.advertise_address;
  const std::string body = request.dump();
  milliseconds backoff(1000);
  while (!stopping()) {
    const int64_t sent_at = MonotonicMs();
    Result<http::HttpResponse> r = client.Send("POST", std::string(kApi) + "/register", body);
    std::string why;
    if (!r.ok()) {
      why = r.status().message();
    } else if (r->status == 200 || r->status == 201) {
      TakeTimings(r->body);
      RenewLease(sent_at);
      Log("registered node " + opt_.inventory.spec.name + " (" +
          std::to_string(opt_.inventory.spec.gpus.size()) + " GPUs, heartbeat every " +
          std::to_string(heartbeat_interval_s_.load()) + " s)");
      return RegisterOutcome::kOk;
    } else if (r->status == 401 || r->status == 403) {
      Log("the server refused the agent token (HTTP " + std::to_string(r->status) +
          "): " + ErrorText(*r) + "; the token needs role agent or admin");
      fatal_ = true;
      return RegisterOutcome::kFatal;
    } else if (r->status >= 500 || r->status == 429 || RouteMissing(*r)) {
      why = "HTTP " + std::to_string(r->status) + ": " + ErrorText(*r);
    } else {
      Log("the server refused node " + opt_.inventory.spec.name + " (HTTP " +
          std::to_string(r->status) + "): " + ErrorText(*r));
      fatal_ = true;
      return RegisterOutcome::kFatal;
    }
    Log("cannot register yet (" + why + "); retrying in " + std::to_string(backoff.count() / 1000) +
        " s");
    if (!SleepFor(backoff)) break;
    backoff = std::min<milliseconds>(backoff * 2, seconds(30));
  }
  return RegisterOutcome::kStopped;
}

void Agent::AdoptLeftovers() {
  const std::filesystem::path tasks = std::filesystem::path(opt_.work_dir) / "tasks";
  std::error_code ec;
  MutexLock lock(mu_);
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    const std::filesystem::path pid_file = entry.path() / "pid";
    uint64_t id = 0;
    try {
      size_t used = 0;
      id = std::stoull(entry.path().filename().string(), &used);
      if (used != entry.path().filename().string().size()) continue;
    } catch (...) {
      continue;
    }
    std::ifstream f(pid_file);
    if (!f) continue;
    long long pid = 0;
    uint64_t start = 0;
    f >> pid >> start;
    f.close();
    std::error_code rm;
    if (pid > 0 && start != 0 && kill(static_cast<pid_t>(pid), 0) == 0 &&
        ProcStartTime(static_cast<pid_t>(pid)) == start &&
        supervisor_.Adopt(id, static_cast<pid_t>(pid), start).ok()) {
      held_[id] = ReadAllocationFile(entry.path() / "allocation");
      // Its time limit still counts from its start.
      if (std::ifstream df(entry.path() / "deadline"); df) {
        int64_t until_ms = 0, limit_s = 0;
        if (df >> until_ms >> limit_s && limit_s > 0) {
          const int64_t now_ms = SystemClock().NowMs();
          deadlines_[id] = {std::chrono::steady_clock::now() +
                                milliseconds(std::max<int64_t>(until_ms - now_ms, 0)),
                            limit_s};
        }
      }
      std::string with_port;
      if (std::optional<uint16_t> port = ReadPortFile(entry.path() / "port")) {
        ports_[id] = *port;
        with_port = " (port " + std::to_string(*port) + ")";
        // The server may have lost the service's address (it restarted, or
        // the earlier report never arrived): say it again.
        Enqueue(id, RunningReport(id));
      }
      Log("task " + std::to_string(id) + ": adopted its process " + std::to_string(pid) +
          with_port + ", left running by an earlier agent");
      continue;
    }
    // Its supervisor leaves `fenced` when it stopped the task because this
    // agent no longer renewed the node's lease.
    const bool fenced = std::filesystem::exists(entry.path() / "fenced", rm);
    const std::string how = fenced ? "stopped by its supervisor (fenced): the agent did not renew "
                                     "the node's lease"
                                   : "died while the agent was down";
    Log("task " + std::to_string(id) + ": its process " + how);
    finished_[id] = json{{"node", opt_.inventory.spec.name},
                         {"id", id},
                         {"state", "failed"},
                         {"message", how}};
    if (fenced) finished_[id]["fenced"] = true;
    std::filesystem::remove(pid_file, rm);
    std::filesystem::remove(entry.path() / "port", rm);
  }
}

int Agent::Run() {
  // The tasks' folders hold their output and what the agent keeps of them:
  // its owner's only, as the server's data dir (docs/SECURITY.md).
  const Status private_dir = MakePrivateDir(opt_.work_dir);
  std::error_code ec;
  if (private_dir.ok()) {
    std::filesystem::create_directories(std::filesystem::path(opt_.work_dir) / "tasks", ec);
  }
  if (!private_dir.ok() || ec) {
    Log("work dir " + opt_.work_dir + ": " +
        (private_dir.ok() ? ec.message() : private_dir.message()));
    return 1;
  }
  const http::HttpClient client(opt_.servers, opt_.token, opt_.request_timeout);
  // The long polls and the reaper's requests (reports, output) follow each
  // other closely: they keep their connections open (a repeat after a
  // broken connection is harmless, see SendReport and ShipLogs).
  const http::HttpClient poll_client(opt_.servers, opt_.token,
                                    seconds(opt_.wait_s) + opt_.request_timeout,
                                    /*keep_alive=*/true);
  Log("tasks run under " + supervisor_command_.front() +
      (supervisor_command_.size() > 1 ? " " + supervisor_command_[1] : std::string()));
  AdoptLeftovers();
  switch (Register(client)) {
    case RegisterOutcome::kFatal:
      return 1;
    case RegisterOutcome::kStopped:
      return 0;
    case RegisterOutcome::kOk:
      break;
  }
  std::thread heartbeat([this] { HeartbeatLoop(); });
  std::thread reaper([this] { ReaperLoop(); });
  std::thread exits([this] { ExitWatchLoop(); });
  std::vector<std::thread> reporters;
  for (int i = 0; i < kReporters; ++i) reporters.emplace_back([this] { ReporterLoop(); });

  const std::string node = opt_.inventory.spec.name;
  int64_t version = 0;
  int failures = 0;
  while (!stopping()) {
    const std::string target = std::string(kApi) + "/assignments?node=" + node +
                               "&version=" + std::to_string(version) +
                               "&wait_s=" + std::to_string(opt_.wait_s);
    Result<http::HttpResponse> r = poll_client.Send("GET", target);
    if (stopping()) break;
    std::string problem;
    if (!r.ok()) {
      problem = r.status().message();
    } else if (r->status == 401 || r->status == 403) {
      Log("the server refused the agent token (HTTP " + std::to_string(r->status) +
          "): " + ErrorText(*r));
      fatal_ = true;
      break;
    } else if (r->status == 404 && !RouteMissing(*r)) {
      Log("the server does not know node " + node + ": registering again");
      if (Register(client) != RegisterOutcome::kOk) break;
      version = 0;
      continue;
    } else if (r->status != 200) {
      problem = "HTTP " + std::to_string(r->status) + ": " + ErrorText(*r);
    } else {
      json j = json::parse(r->body, nullptr, false);
      Result<AssignmentList> list = ParseAssignments(j);
      if (list.ok()) {
        failures = 0;
        version = list->version;
        Reconcile(*list);
        continue;
      }
      problem = list.status().message();
    }
    // One line for the first failure and then every minute, not every second.
    if (failures++ % 60 == 0) Log("assignments: " + problem + "; retrying");
    SleepFor(seconds(1));
  }
  RequestStop();
  heartbeat.join();
  reaper.join();
  exits.join();
  for (std::thread& t : reporters) t.join();
  const size_t left = supervisor_.Ids().size();
  if (left > 0) Log("stopped; " + std::to_string(left) + " task(s) left running");
  return fatal_ ? 1 : 0;
}

void Agent::HeartbeatLoop() {
  const http::HttpClient client(opt_.servers, opt_.token, opt_.request_timeout);
  int failures = 0;
  bool usage_error_logged = false;
  do {
    // Taken before measuring: these ran through the whole measurement.
    const std::vector<uint64_t> running = supervisor_.Ids();
    Result<NodeUsage> usage = CurrentUsage(opt_.inventory);
    if (!usage.ok()) {
      if (!usage_error_logged) Log("usage: " + usage.status().message() + "; measuring instead");
      usage_error_logged = true;
      usage = MeasureUsage(opt_.inventory.spec.cpu_milli, opt_.inventory.discovered);
    } else {
      usage_error_logged = false;
    }
    json body = {{"node", opt_.inventory.spec.name}, {"usage", UsageToJson(*usage)}};
    body["usage"]["running_tasks"] = running;
    const int64_t sent_at = MonotonicMs();
    Result<http::HttpResponse> r =
        client.Send("POST", std::string(kApi) + "/heartbeat", body.dump());
    if (!r.ok()) {
      if (failures++ % 12 == 0) Log("heartbeat: " + r.status().message());
    } else if (r->status == 200) {
      failures = 0;
      TakeTimings(r->body);
      // The server heard the node as of `sent_at`: the tasks' supervisors
      // may count from there.
      RenewLease(sent_at);
    } else if (r->status == 404 && !RouteMissing(*r)) {
      Log("heartbeat: the server does not know node " + opt_.inventory.spec.name +
          ": registering again");
      if (Register(client) == RegisterOutcome::kFatal) RequestStop();
    } else if (r->status == 401 || r->status == 403) {
      Log("heartbeat: the server refused the agent token: " + ErrorText(*r));
      fatal_ = true;
      RequestStop();
    } else if (failures++ % 12 == 0) {
      Log("heartbeat: HTTP " + std::to_string(r->status) + ": " + ErrorText(*r));
    }
  } while (SleepFor(seconds(heartbeat_interval_s_.load())));
}

void Agent::TakeTimings(const std::string& answer) {
  json j = json::parse(answer, nullptr, false);
  if (!j.is_object()) return;
  if (j.contains("heartbeat_interval_s") && j["heartbeat_interval_s"].is_number()) {
    heartbeat_interval_s_ = std::clamp(j["heartbeat_interval_s"].get<int>(), 1, 3600);
  }
  if (j.contains("fence_after_s") && j["fence_after_s"].is_number() &&
      j["fence_after_s"].get<double>() >= 1) {
    fence_after_ms_ = static_cast<int64_t>(j["fence_after_s"].get<double>() * 1000);
  }
  if (j.contains("fence_grace_s") && j["fence_grace_s"].is_number() &&
      j["fence_grace_s"].get<double>() >= 0) {
    fence_grace_ms_ = static_cast<int64_t>(j["fence_grace_s"].get<double>() * 1000);
  }
}

void Agent::RenewLease(int64_t sent_at) {
  Status s = WriteLease(LeasePath(), sent_at);
  if (!s.ok()) Log("lease: " + s.message());
}

std::string Agent::LeasePath() const {
  return (std::filesystem::path(opt_.work_dir) / "lease").string();
}

std::string Agent::TaskDir(uint64_t id) const {
  return (std::filesystem::path(opt_.work_dir) / "tasks" / std::to_string(id)).string();
}

void Agent::ReaperLoop() {
  const http::HttpClient client(opt_.servers, opt_.token, opt_.request_timeout,
                                /*keep_alive=*/true);
  const std::string node = opt_.inventory.spec.name;
  auto next_ship = std::chrono::steady_clock::now();
  while (true) {
    std::vector<std::pair<uint64_t, json>> ended;  // body null: not reported
    {
      MutexLock lock(mu_);
      // A task past its time limit is stopped as a victim is (SIGTERM, the
      // grace period, SIGKILL) and reported failed, timed out.
      const auto now = std::chrono::steady_clock::now();
      for (auto it = deadlines_.begin(); it != deadlines_.end();) {
        if (now < it->second.first || !supervisor_.Has(it->first)) {
          ++it;
          continue;
        }
        Log("task " + std::to_string(it->first) + " reached its time limit of " +
            std::to_string(it->second.second) + " s; stopping it");
        supervisor_.Stop(it->first, opt_.grace_period);
        timed_out_[it->first] = it->second.second;
        it = deadlines_.erase(it);
      }
      for (const ExitInfo& e : supervisor_.Reap()) {
        // Both tests run: a stopped task must leave unreported_, or a later
        // copy of it here would never be stopped.
        const bool unreported = unreported_.erase(e.id) > 0;
        ports_.erase(e.id);
        held_.erase(e.id);
        deadlines_.erase(e.id);
        if (auto t = timed_out_.find(e.id); t != timed_out_.end() && !unreported) {
          const std::string how = "time limit of " + std::to_string(t->second) + " s reached";
          timed_out_.erase(t);
          json body = {{"node", node}, {"id", e.id}, {"state", "failed"}, {"timed_out", true},
                       {"message", how}};
          if (e.signal != 0) body["signal"] = e.signal;
          Log("task " + std::to_string(e.id) + " ended: " + how);
          finished_[e.id] = body;
          taken_.erase(e.id);
          final_pending_.insert(e.id);
          ended.emplace_back(e.id, std::move(body));
          continue;
        }
        timed_out_.erase(e.id);
        if (e.stopped || unreported) {
          Log("task " + std::to_string(e.id) + " stopped");
          ended.emplace_back(e.id, json());
          continue;
        }
        // `message` carries only what the exit code or signal does not say:
        // the server words the report from those fields.
        json body = {{"node", node}, {"id", e.id}};
        std::string how;
        if (e.unknown) {
          body["state"] = "failed";
          body["message"] = how = "exit status unknown: the agent restarted";
        } else if (e.signal != 0) {
          body["state"] = "failed";
          body["signal"] = e.signal;
          body["message"] = SignalName(e.signal);
          how = "killed by signal " + std::to_string(e.signal) + " (" + SignalName(e.signal) + ")";
        } else {
          body["state"] = e.exit_code == 0 ? "succeeded" : "failed";
          body["exit_code"] = e.exit_code;
          how = "exit code " + std::to_string(e.exit_code);
        }
        // Its supervisor leaves `fenced` when it stopped the task because
        // this agent could not renew the node's lease: not the task's fault.
        std::error_code fenced_ec;
        if (body["state"] == "failed" &&
            std::filesystem::exists(std::filesystem::path(TaskDir(e.id)) / "fenced", fenced_ec)) {
          body["fenced"] = true;
          body["message"] = "stopped by its supervisor (fenced): the agent could not renew the "
                            "node's lease";
          how += " (fenced)";
        }
        Log("task " + std::to_string(e.id) + " ended: " + how);
        finished_[e.id] = body;
        taken_.erase(e.id);
        final_pending_.insert(e.id);
        ended.emplace_back(e.id, std::move(body));
      }
      // What the ended processes held is free: the tasks waiting for them
      // start now, not after the output is shipped. (A new copy of an ended
      // task itself waits for the second pass below: it shares the folder.)
      if (!ended.empty() && !waiting_.empty()) {
        std::set<uint64_t> ended_ids;
        for (const auto& e : ended) ended_ids.insert(e.first);
        StartWaiting(ended_ids);
      }
    }
    // The last output is shipped before the final report, so that the
    // server has all of it once the task is done.
    for (const auto& [id, body] : ended) {
      ShipLogs(client, id, true);
      ships_.erase(id);
      std::error_code ec;
      std::filesystem::remove(std::filesystem::path(TaskDir(id)) / "pid", ec);
      std::filesystem::remove(std::filesystem::path(TaskDir(id)) / "port", ec);
    }
    if (!ended.empty()) {
      MutexLock lock(mu_);
      for (auto& [id, body] : ended) {
        if (final_pending_.erase(id) > 0 && !body.is_null()) Enqueue(id, std::move(body));
      }
      // Assigned back here while it was stopping: the new copy starts now
      // that the old one is gone (its pid file is removed above).
      if (!waiting_.empty()) StartWaiting();
    }
    if (std::chrono::steady_clock::now() >= next_ship) {
      for (uint64_t id : supervisor_.Ids()) ShipLogs(client, id, false);
      next_ship = std::chrono::steady_clock::now() + seconds(1);
    }
    // An exit (the exit watcher) wakes the loop at once. It also runs every
    // 100 ms, for due SIGKILLs and time limits, and every 10 ms while a task
    // waits for another to exit, should the kernel announce no exits (no
    // pidfds).
    MutexLock lock(mu_);
    const milliseconds poll(waiting_.empty() ? 100 : 10);
    const auto until = std::chrono::steady_clock::now() + poll;
    while (!stop_.load() && !wake_reaper_ &&
           lock.WaitUntil(cv_, until) == std::cv_status::no_timeout) {
    }
    if (stop_.load()) break;
    wake_reaper_ = false;
  }
}

void Agent::ExitWatchLoop() {
  while (!stopping()) {
    // The timeout only bounds how long a stop may go unnoticed should the
    // wake-up be lost; RequestStop interrupts the wait.
    if (!supervisor_.WaitForExit(seconds(1))) continue;
    {
      MutexLock lock(mu_);
      wake_reaper_ = true;
    }
    cv_.notify_all();
  }
}

void Agent::ShipLogs(const http::HttpClient& client, uint64_t id, bool final) {
  LogShip& ship = ships_[id];
  if (ship.done) return;
  const std::string path = (std::filesystem::path(TaskDir(id)) / "output.log").string();
  for (int round = 0; round < 64 && !stopping(); ++round) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return;
    f.seekg(0, std::ios::end);
    const uint64_t size = static_cast<uint64_t>(f.tellg());
    if (size < ship.local) ship.local = 0;  // truncated or replaced
    if (size == ship.local) {
      // Everything shipped: rotate a file over the cap (copy, then truncate,
      // because the task keeps writing to its open descriptor, O_APPEND).
      if (size > kMaxLocalLog) {
        std::error_code ec;
        std::filesystem::copy_file(path, path + ".1",
                                   std::filesystem::copy_options::overwrite_existing, ec);
        if (!ec) std::filesystem::resize_file(path, 0, ec);
        if (!ec) ship.local = 0;
      }
      return;
    }
    std::string raw(static_cast<size_t>(std::min<uint64_t>(kLogChunk, size - ship.local)), '\0');
    f.seekg(static_cast<std::streamoff>(ship.local));
    f.read(raw.data(), static_cast<std::streamsize>(raw.size()));
    raw.resize(static_cast<size_t>(f.gcount()));
    const bool at_end = ship.local + raw.size() >= size;
    size_t consumed = 0;
    const std::string text = ToUtf8(raw, final && at_end, consumed);
    if (consumed == 0) return;
    const json body = {{"node", opt_.inventory.spec.name},
                       {"id", id},
                       {"offset", ship.sent},
                       {"data", text}};
    Result<http::HttpResponse> r = client.Send("POST", std::string(kApi) + "/logs", body.dump());
    if (!r.ok() || r->status >= 500 || r->status == 429 || RouteMissing(*r)) return;  // later
    json j = json::parse(r->body, nullptr, false);
    const bool has_size =
        j.is_object() && j.contains("size") && j["size"].is_number_unsigned();
    if (r->status == 200) {
      ship.sent = has_size ? j["size"].get<uint64_t>() : ship.sent + text.size();
      ship.local += consumed;
    } else if (r->status == 409 && has_size) {
      // The server holds a different amount (a retried chunk, or an agent
      // restart): resume where it is, mapping bytes one to one.
      const uint64_t held = j["size"].get<uint64_t>();
      if (held >= ship.sent) {
        ship.local = std::min<uint64_t>(size, ship.local + (held - ship.sent));
      } else {
        ship.local -= std::min<uint64_t>(ship.local, ship.sent - held);
      }
      ship.sent = held;
    } else if (r->status == 422 || r->status == 404) {
      ship.done = true;  // the task is gone
      return;
    } else {
      Log("output of task " + std::to_string(id) + " refused (HTTP " +
          std::to_string(r->status) + "): " + ErrorText(*r));
      ship.done = true;
      return;
    }
  }
}

void Agent::Enqueue(uint64_t id, json body) {
  outbox_.push_back(Report{id, std::move(body)});
  reports_cv_.notify_one();
}

void Agent::ReporterLoop() {
  const http::HttpClient client(opt_.servers, opt_.token, opt_.request_timeout,
                                /*keep_alive=*/true);
  while (true) {
    Report report;
    {
      MutexLock lock(mu_);
      // The first report of a task none of whose reports is in flight: a
      // task's reports go one after another, in order; different tasks'
      // go side by side, on each reporter's connection.
      auto next = outbox_.end();
      auto sendable = [&]() HF_REQUIRES(mu_) {
        if (std::chrono::steady_clock::now() < reports_paused_until_) return false;
        for (next = outbox_.begin(); next != outbox_.end(); ++next) {
          if (sending_.count(next->id) == 0) return true;
        }
        return false;
      };
      while (!stop_.load() && !sendable()) {
        // Idle for a second: the connection goes back to the server.
        const auto until = std::max(std::chrono::steady_clock::now() + seconds(1),
                                    reports_paused_until_);
        if (lock.WaitUntil(reports_cv_, until) == std::cv_status::timeout && outbox_.empty()) {
          client.Close();
        }
      }
      if (stop_.load()) return;
      report = std::move(*next);
      outbox_.erase(next);
      sending_.insert(report.id);
    }
    SendReport(client, report);
    {
      MutexLock lock(mu_);
      sending_.erase(report.id);
    }
    reports_cv_.notify_one();  // the task's next report may go now
  }
}

void Agent::SendReport(const http::HttpClient& client, Report& report) {
  Result<http::HttpResponse> r =
      client.Send("POST", std::string(kApi) + "/status", report.body.dump());
  const bool retry = !r.ok() || r->status >= 500 || r->status == 429 || RouteMissing(*r);
  if (retry) {
    Log("status of task " + std::to_string(report.id) + ": " +
        (r.ok() ? "HTTP " + std::to_string(r->status) + ": " + ErrorText(*r)
                : r.status().message()) +
        "; will retry");
    // Back at the head, before the task's later reports; every reporter
    // waits a second.
    MutexLock lock(mu_);
    outbox_.push_front(report);
    reports_paused_until_ = std::chrono::steady_clock::now() + seconds(1);
    return;
  }
  if (r->status == 409) {
    // A stale copy: the server has the task elsewhere or ended.
    MutexLock lock(mu_);
    if (supervisor_.Has(report.id)) {
      Log("task " + std::to_string(report.id) + " is not assigned here: stopping it");
      unreported_.insert(report.id);
      supervisor_.Stop(report.id, opt_.grace_period);
    }
    finished_.erase(report.id);
    taken_.erase(report.id);
  } else if (r->status != 200 && r->status != 201) {
    Log("status of task " + std::to_string(report.id) + " refused (HTTP " +
        std::to_string(r->status) + "): " + ErrorText(*r));
  } else if (const std::string state = report.body.value("state", "");
             state == "succeeded" || state == "failed") {
    const json answer = json::parse(r->body, nullptr, false);
    if (answer.is_object() && answer.contains("version") &&
        answer["version"].is_number_integer()) {
      MutexLock lock(mu_);
      const int64_t version = answer["version"].get<int64_t>();
      if (finished_.count(report.id) != 0) taken_[report.id] = version;
      // The last list came while this was being sent; if it is newer than
      // the report and names the task, the task was placed here anew.
      if (last_list_.version >= version && taken_.count(report.id) != 0) {
        for (const Assignment& a : last_list_.tasks) {
          if (a.id != report.id) continue;
          taken_.erase(a.id);
          finished_.erase(a.id);
          StartOrWait(a);
          break;
        }
      }
    }
  }
}

void Agent::Reconcile(const AssignmentList& list) {
  MutexLock lock(mu_);
  last_list_ = list;
  std::set<uint64_t> assigned;
  for (const Assignment& a : list.tasks) assigned.insert(a.id);
  for (const auto& [id, why] : list.bad) {
    if (id == 0) {
      Log("ignoring an assignment without an id: " + why);
      continue;
    }
    assigned.insert(id);
    if (supervisor_.Has(id) || finished_.count(id) != 0) continue;
    json body = {{"node", opt_.inventory.spec.name},
                 {"id", id},
                 {"state", "failed"},
                 {"message", "cannot read the assignment: " + why}};
    finished_[id] = body;
    taken_.erase(id);
    Enqueue(id, std::move(body));
  }
  // Stops first: what they hold is what the new tasks below may wait for.
  for (uint64_t id : supervisor_.Ids()) {
    if (assigned.count(id) == 0 && unreported_.count(id) == 0) {
      Log("task " + std::to_string(id) + " is no longer assigned here: stopping it");
      unreported_.insert(id);
      supervisor_.Stop(id, opt_.grace_period);
    }
  }
  // Rebuilt from this list: a task no longer assigned does not start.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (assigned.count(it->first) == 0) waiting_reported_.erase(it->first);
    it = assigned.count(it->first) == 0 ? waiting_.erase(it) : std::next(it);
  }
  for (const Assignment& a : list.tasks) {
    if (supervisor_.Has(a.id) && unreported_.count(a.id) != 0) {
      // Being stopped (it was unassigned, or preempted) and assigned here
      // again: a fresh copy starts once the old one has exited, so two
      // never run at once and none is left unstarted.
      StartOrWait(a);
      continue;
    }
    if (supervisor_.Has(a.id)) {
      held_[a.id] = a.allocation;
      // The server still has it scheduled: the "running" report was lost
      // or not yet sent. Report it (again), unless a report is queued or
      // being sent.
      const bool queued = sending_.count(a.id) != 0 ||
                          std::any_of(outbox_.begin(), outbox_.end(),
                                      [&](const Report& r) { return r.id == a.id; });
      if (a.state == "scheduled" && !queued) Enqueue(a.id, RunningReport(a.id));
      continue;
    }
    if (auto f = finished_.find(a.id); f != finished_.end()) {
      if (auto t = taken_.find(a.id); t != taken_.end()) {
        // The server took the report: an earlier list is stale; a later one
        // places the task here again (the old copy has ended), so it starts.
        if (list.version < t->second) continue;
        taken_.erase(t);
        finished_.erase(f);
        StartOrWait(a);
        continue;
      }
      // Ended here, but the server has not taken the report yet: re-send it
      // unless it is still queued.
      const bool queued = final_pending_.count(a.id) != 0 || sending_.count(a.id) != 0 ||
                          std::any_of(outbox_.begin(), outbox_.end(),
                                      [&](const Report& r) { return r.id == a.id; });
      if (!queued) Enqueue(a.id, f->second);
      continue;
    }
    StartOrWait(a);
  }
  // Members still held are reported ready again with every list: a server
  // that restarted, or lost the report, learns it (it ignores a repeat).
  for (const auto& [id, why] : waiting_reported_) {
    if (why != kReadyMessage || waiting_.count(id) == 0) continue;
    const bool queued = std::any_of(outbox_.begin(), outbox_.end(),
                                    [&, id = id](const Report& r) { return r.id == id; });
    if (!queued) Enqueue(id, WaitingReport(id, why));
  }
  for (auto it = finished_.begin(); it != finished_.end();) {
    if (assigned.count(it->first) != 0) {
      ++it;
      continue;
    }
    taken_.erase(it->first);
    it = finished_.erase(it);
  }
}

void Agent::StartOrWait(const Assignment& a) {
  std::vector<LiveProcess> live;
  for (uint64_t id : supervisor_.Ids()) {
    auto held = held_.find(id);
    live.push_back({id, held == held_.end() ? std::nullopt : held->second,
                    unreported_.count(id) != 0});
  }
  const Blockers blockers = StartBlockers(opt_.inventory.spec, a.id, a.allocation, live);
  if (blockers.empty() && !a.hold) {
    waiting_.erase(a.id);
    waiting_reported_.erase(a.id);
    Launch(a);
    return;
  }
  // Held (a job's member whose gang has not been released) or blocked.
  waiting_[a.id] = a;
  const bool ready = blockers.empty();
  const std::string why = ready ? std::string(kReadyMessage) : WaitingMessage(blockers);
  std::string& reported = waiting_reported_[a.id];
  if (reported == why) return;
  reported = why;
  Log("task " + std::to_string(a.id) + " (" + a.task.name + ") is " + why);
  Enqueue(a.id, WaitingReport(a.id, why));
  // The reaper polls every 10 ms while a task waits.
  wake_reaper_ = true;
}

void Agent::StartWaiting(const std::set<uint64_t>& later) {
  std::vector<Assignment> waiting;
  for (const auto& [id, a] : waiting_) {
    if (later.count(id) == 0) waiting.push_back(a);
  }
  for (const Assignment& a : waiting) StartOrWait(a);
}

void Agent::Launch(const Assignment& a) {
  const std::string node = opt_.inventory.spec.name;
  // (Runs on this thread, within the lock.)
  auto failed = [&](const std::string& message) HF_REQUIRES(mu_) {
    Log("task " + std::to_string(a.id) + " not started: " + message);
    json body = {{"node", node}, {"id", a.id}, {"state", "failed"}, {"message", message}};
    finished_[a.id] = body;
    taken_.erase(a.id);
    Enqueue(a.id, std::move(body));
  };
  if (a.task.command.empty()) return failed("task has no command");
  const std::filesystem::path dir =
      std::filesystem::path(opt_.work_dir) / "tasks" / std::to_string(a.id);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return failed("cannot create " + dir.string() + ": " + ec.message());
  // A service task gets a port, kept in its folder for a restarted agent
  // before the process starts (a pid file always has its port file).
  std::optional<uint16_t> port;
  const std::filesystem::path port_file = dir / "port";
  std::filesystem::remove(port_file, ec);
  std::filesystem::remove(dir / "fenced", ec);  // an earlier copy's
  if (NeedsPort(a.task.command)) {
    // Not one a live task here was given, should the kernel repeat itself.
    for (int attempt = 0; attempt < 8 && !port.has_value(); ++attempt) {
      Result<uint16_t> p = PickFreePort();
      if (!p.ok()) return failed(p.status().message());
      const bool taken = std::any_of(ports_.begin(), ports_.end(),
                                     [&](const auto& kv) { return kv.second == *p; });
      if (!taken) port = *p;
    }
    if (!port.has_value()) return failed("cannot find a free port");
    std::ofstream pf(port_file, std::ios::trunc);
    pf << *port << "\n";
    pf.close();
    if (!pf) return failed("cannot write " + port_file.string());
  }
  // What it was given, for a restarted agent that adopts it (gate.h).
  const std::filesystem::path alloc_file = dir / "allocation";
  {
    std::ofstream af(alloc_file, std::ios::trunc);
    af << AllocationToJson(a.allocation, node).dump() << "\n";
    if (!af) return failed("cannot write " + alloc_file.string());
  }
  // The task runs under its supervisor, which stops it should this agent
  // stop renewing the node's lease (task_supervisor.h).
  std::vector<std::string> argv = supervisor_command_;
  for (std::string arg : {std::string("--lease"), LeasePath(), std::string("--fence-after-ms"),
                          std::to_string(fence_after_ms_.load()), std::string("--grace-ms"),
                          std::to_string(fence_grace_ms_.load()), std::string("--")}) {
    argv.push_back(std::move(arg));
  }
  const std::vector<std::string> command = SubstituteLaunch(a.task.command, a.launch_env);
  for (const std::string& arg : port ? SubstitutePort(command, *port) : command) {
    argv.push_back(arg);
  }
  LaunchSpec spec{.id = a.id,
                  .argv = std::move(argv),
                  .env = EnvStrings(
                      BuildTaskEnv(base_env_, a.id, a.task, a.allocation, node_devices_, port,
                                   a.launch_env)),
                  .cwd = dir.string(),
                  .log_path = (dir / "output.log").string()};
  Result<pid_t> pid = supervisor_.Launch(spec);
  if (!pid.ok()) {
    std::filesystem::remove(port_file, ec);
    return failed(pid.status().message());
  }
  if (port) ports_[a.id] = *port;
  held_[a.id] = a.allocation;
  if (a.task.time_limit_s > 0) {
    deadlines_[a.id] = {std::chrono::steady_clock::now() + seconds(a.task.time_limit_s),
                        a.task.time_limit_s};
    // For a restarted agent, which adopts the process: when its time is up,
    // on the wall clock, and the limit (AdoptLeftovers).
    const int64_t until_ms = SystemClock().NowMs() + a.task.time_limit_s * 1000;
    std::ofstream df(dir / "deadline", std::ios::trunc);
    df << until_ms << " " << a.task.time_limit_s << "\n";
    if (!df) Log("task " + std::to_string(a.id) + ": cannot write " + (dir / "deadline").string());
  } else {
    std::filesystem::remove(dir / "deadline", ec);
  }
  Log("task " + std::to_string(a.id) + " (" + a.task.name + ") started, pid " +
      std::to_string(*pid) + (port ? ", port " + std::to_string(*port) : ""));
  {
    // For a restarted agent: "<pid> <start time>" (AdoptLeftovers).
    std::ofstream pf(dir / "pid", std::ios::trunc);
    pf << *pid << " " << ProcStartTime(*pid) << "\n";
    if (!pf) Log("task " + std::to_string(a.id) + ": cannot write " + (dir / "pid").string());
  }
  Enqueue(a.id, RunningReport(a.id));
}

json Agent::RunningReport(uint64_t id) const {
  json body = {{"node", opt_.inventory.spec.name}, {"id", id}, {"state", "running"}};
  if (auto it = ports_.find(id); it != ports_.end()) {
    body["port"] = it->second;
    if (!opt_.advertise_address.empty()) body["host"] = opt_.advertise_address;
  }
  return body;
}

json Agent::WaitingReport(uint64_t id, const std::string& why) const {
  return {{"node", opt_.inventory.spec.name},
          {"id", id},
          {"state", why == kReadyMessage ? "ready" : "waiting"},
          {"message", why}};
}

}  // namespace hf::agent
