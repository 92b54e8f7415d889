// The scheduler's policy calls: reads, changes and reloads of the framework,
// all under the scheduler's mutex (scheduler.h, "Policy").
#include <spdlog/spdlog.h>

#include <memory>

#include "scheduler/scheduler.h"

namespace hf::scheduler {

using nlohmann::json;

void Scheduler::PolicyChangedLocked() {
  if (options_.on_policy_change) options_.on_policy_change(*fw_);
}

Status Scheduler::ChangePolicy(const PolicyEdit& change, const PolicyStore& persist) {
  {
    MutexLock lock(mu_);
    const framework::Framework::Settings before = fw_->SaveSettings();
    Status s = change(*fw_);
    if (s.ok()) s = persist(*fw_);
    if (!s.ok()) {
      fw_->RestoreSettings(before);
      // A change and its undoing both configure the plugins again, which may
      // leave one's status other than it was (a file gone meanwhile).
      PolicyChangedLocked();
      return s;
    }
    PolicyChangedLocked();
    retry_all_ = true;
  }
  WakeLoop();
  return Status::Ok();
}

std::vector<Status> Scheduler::FinishReloads(
    const std::vector<framework::Framework::PendingReload>& reloads, const std::string& by) {
  for (const auto& r : reloads) {
    Publish("plugin", json{{"action", "configuring"}, {"name", r.plugin}, {"by", by}});
  }
  // Each read on a thread of its own, waited for kReloadTimeout: a file on a
  // hung network file system must not hold the reload up for good. A read
  // that ran out is left to finish on its own; what it read is dropped.
  std::vector<bool> finished;
  for (const auto& r : reloads) {
    if (!r.job.load) {
      finished.push_back(true);
      continue;
    }
    struct Done {
      Mutex mu;
      std::condition_variable cv;
      bool done HF_GUARDED_BY(mu) = false;
    };
    auto state = std::make_shared<Done>();
    std::thread([load = r.job.load, state] {
      load();
      MutexLock lock(state->mu);
      state->done = true;
      state->cv.notify_all();
    }).detach();
    MutexLock lock(state->mu);
    const auto until = std::chrono::steady_clock::now() + kReloadTimeout;
    while (!state->done && lock.WaitUntil(state->cv, until) == std::cv_status::no_timeout) {
    }
    finished.push_back(state->done);
  }
  std::vector<Status> results;
  std::vector<std::string> statuses;
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < reloads.size(); ++i) {
      // A failure shows as status `error` with its reason.
      results.push_back(finished[i]
                            ? fw_->FinishReload(reloads[i])
                            : fw_->FailReload(reloads[i],
                                              Unavailable("reading its sources took more than " +
                                                          std::to_string(kReloadTimeout.count()) +
                                                          " s")));
      Result<framework::PluginInfo> info = fw_->GetPlugin(reloads[i].plugin);
      statuses.push_back(info.ok() ? framework::PluginStatusName(info->status) : "");
    }
    PolicyChangedLocked();
    retry_all_ = true;
  }
  WakeLoop();
  for (size_t i = 0; i < reloads.size(); ++i) {
    Publish("plugin", json{{"action", "reloaded"}, {"name", reloads[i].plugin}, {"by", by},
                           {"status", statuses[i]}});
  }
  return results;
}

Result<framework::PluginInfo> Scheduler::ReloadPlugin(const std::string& name,
                                                      const std::string& by) {
  Result<framework::Framework::PendingReload> reload = NotFound("");
  {
    MutexLock lock(mu_);
    reload = fw_->StartReload(name);
    if (!reload.ok()) return reload.status();
    PolicyChangedLocked();  // `configuring` shows while it reads
  }
  // A source that is broken now is the server's trouble, not the caller's.
  const Status read = FinishReloads({*reload}, by).front();
  if (!read.ok()) return Unavailable("plugins." + name + ": " + read.message());
  MutexLock lock(mu_);
  return fw_->GetPlugin(name);
}

void Scheduler::ReloadChangedSources() {
  std::vector<framework::Framework::PendingReload> due;
  {
    MutexLock lock(mu_);
    due = fw_->StartDueReloads();
    if (!due.empty()) PolicyChangedLocked();
  }
  if (!due.empty()) FinishReloads(due, "file watcher");
}

void Scheduler::SourceWatchLoop() {
  while (true) {
    {
      MutexLock lock(mu_);
      const auto until = std::chrono::steady_clock::now() + kSourceWatchInterval;
      while (!stop_ && lock.WaitUntil(cv_, until) == std::cv_status::no_timeout) {
      }
      if (stop_) return;
    }
    ReloadChangedSources();
  }
}

}  // namespace hf::scheduler
