#include "server/control_plane.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "framework/policy.h"
#include "http/client.h"
#include "store/postgres.h"

namespace hf::server {
namespace {

// Each connection is a descriptor; the usual soft limit (1024) is below
// what a cluster of agents holds open. Raised up to the hard limit, never
// lowered; a failure only means fewer connections.
void RaiseOpenFileLimit(rlim_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= wanted) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, lim.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    spdlog::warn("server: cannot raise the open-file limit to {}", static_cast<unsigned long long>(wanted));
  }
}

// Stops the control plane, or gives up waiting after `limit` (the exec
// that follows ends whatever still runs).
void StopWithin(ControlPlane& cp, std::chrono::seconds limit) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread t([&] {
    cp.Stop();
    std::lock_guard lock(m);
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(m);
  if (cv.wait_for(lock, limit, [&] { return done; })) {
    lock.unlock();
    t.join();
  } else {
    spdlog::error("server: stopping took over {} s; starting again regardless", limit.count());
    t.detach();
  }
}

// Runs this program again with the arguments it was started with, every
// descriptor but the standard three closed. Returns only when exec fails.
void ReExec() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  if (args.empty()) {
    spdlog::error("server: cannot read /proc/self/cmdline to start again");
    return;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(e.path().filename().c_str());
    if (fd > 2) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::setenv(kSteppedDownEnv, "1", 1);
  // Signals blocked for sigwait stay blocked across exec: let them go.
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  ::execv("/proc/self/exe", argv.data());
  spdlog::error("server: cannot start again: {}", std::strerror(errno));
}

}  // namespace

int RunServerCommand(int argc, char** argv) {
  CLI::App app{"Run the HeteroFlow control-plane server", "heteroflow server"};
  std::string log_level = "info";
  std::string log_format = "text";
  ServerOptions options;
  std::string listen = "0.0.0.0:3333";
  app.add_option("--config", options.config_path, "YAML with plugins:/scheduler: blocks (first start)");
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--data-dir", options.data_dir, "where the database and admin.token live")
      ->capture_default_str();
  app.add_option("--store", options.store,
                 "the PostgreSQL database to keep the cluster in: a libpq URI, postgresql://... "
                 "(several hosts allowed; the password from ~/.pgpass or PGPASSFILE, not the URI), or "
                 "store: in --config; default: SQLite in --data-dir (docs/STORE.md)")
      ->check([](const std::string& v) -> std::string {
        return store::IsPostgresUri(v) ? "" : "--store must be a postgresql:// URI";
      });
  app.add_option("--replica", options.replica,
                 "this replica's name among the servers sharing a PostgreSQL --store (default: "
                 "HOST:PORT of --advertise-url; docs/HA.md)");
  app.add_option("--advertise-url", options.advertise_url,
                 "http://IP:PORT where the other replicas reach this one (default: --listen's, "
                 "127.0.0.1 for a wildcard address)")
      ->check([](const std::string& v) -> std::string {
        Result<http::ServerUrl> u = http::ParseServerUrl(v);
        return u.ok() ? "" : "--advertise-url: " + u.status().message();
      });
  app.add_option("--leader-lease", options.leader_lease_s,
                 "seconds a leader's lease lasts without renewal (docs/HA.md)")
      ->capture_default_str()
      ->check(CLI::Range(0.3, 600.0));
  app.add_option("--leader-renew-deadline", options.leader_renew_deadline_s,
                 "seconds a leader keeps leading while its renewals fail; below --leader-lease")
      ->capture_default_str()
      ->check(CLI::Range(0.2, 600.0));
  app.add_option("--leader-retry", options.leader_retry_s,
                 "seconds between election rounds (renewals, and followers' checks)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  app.add_option("--file-root", options.file_root,
                 "folder that files named through the API (a topology_config) must lie in; "
                 "default: anywhere the server may read");
  app.add_option("--ui-dir", options.ui_dir,
                 "folder of the built web UI (default: ui/ beside the binary, else ../share/heteroflow/ui from it, where the Debian package installs it)");
  app.add_option("--max-connections", options.max_connections,
                 "open connections accepted; more are answered 503")
      ->capture_default_str()
      ->check(CLI::Range(16, 1000000));
  app.add_option("--max-connections-per-address", options.max_connections_per_address,
                 "open connections from one client address (0: no limit); past either limit a "
                 "new connection takes the place of a quiet one, from the busiest address")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option_function<size_t>(
         "--gateway-max-body-mib",
         [&options](size_t mib) { options.gateway_max_body_bytes = mib << 20; },
         "largest request body the inference gateway takes, in MiB (default 32; the REST API "
         "takes 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--node-grace-period", options.node_grace_period_s,
                 "seconds without an agent heartbeat before a node is NotReady")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--fence-after", options.fence_after_s,
                 "seconds without a lease renewal (a heartbeat the server answered) before a "
                 "task's supervisor stops it; a silent node's tasks are queued again only after "
                 "this plus --fence-grace plus 2 s")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--node-loss-storm-fraction", options.node_loss_storm_fraction,
                 "when more than this fraction of the nodes (and at least three) are silent at "
                 "once, their tasks are neither queued again nor failed until enough are back; "
                 "1: never hold")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--auth-failure-burst", options.auth_failure_burst,
                 "failed authentications one client address may make at once; then one a "
                 "second, and its requests are answered 429 meanwhile")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_option("--fence-grace", options.fence_grace_s,
                 "seconds between the SIGTERM and the SIGKILL of a fenced task")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  // Checked by log::Init, the one place that knows the levels and formats.
  app.add_option("--log-level", log_level, std::string("log level: ") + log::kLevels)
      ->capture_default_str();
  app.add_option("--log-format", log_format,
                 "log lines on stderr: text (UTC time, level, message) or json (one object a "
                 "line, for log shippers)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // The store may be named in the config file too (`store: postgresql://...`);
  // --store wins.
  if (options.store.empty() && !options.config_path.empty()) {
    Result<nlohmann::json> block = framework::LoadConfigBlock(options.config_path, "store");
    if (block.ok() && !block->is_null()) {
      if (!block->is_string() || !store::IsPostgresUri(block->get<std::string>())) {
        std::fprintf(stderr, "heteroflow server: %s: store must be a postgresql:// URI\n",
                     options.config_path.c_str());
        return 2;
      }
      options.store = block->get<std::string>();
    }
  }
  if (Status st = log::Init("server", log_level, log_format); !st.ok()) {
    std::fprintf(stderr, "heteroflow server: %s\n", st.message().c_str());
    return 2;
  }
  if (!(options.leader_retry_s < options.leader_renew_deadline_s &&
        options.leader_renew_deadline_s < options.leader_lease_s)) {
    std::fprintf(stderr,
                 "heteroflow server: --leader-retry (%g s) < --leader-renew-deadline (%g s) < "
                 "--leader-lease (%g s) must hold, so a leader stops before its lease runs out\n",
                 options.leader_retry_s, options.leader_renew_deadline_s, options.leader_lease_s);
    return 2;
  }
  if (options.fence_after_s < 2.0 * options.heartbeat_interval_s()) {
    std::fprintf(stderr,
                 "heteroflow server: --fence-after (%g s) must be at least two heartbeat "
                 "intervals (%d s each), or a live node's tasks would be stopped\n",
                 options.fence_after_s, options.heartbeat_interval_s());
    return 2;
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

  // Each agent holds two connections open.
  RaiseOpenFileLimit(static_cast<rlim_t>(options.max_connections) + 256);

  // Block the stop signals before any thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (const char* again = std::getenv(kSteppedDownEnv); again != nullptr && *again != '\0') {
    options.wait_for_store = true;
    ::unsetenv(kSteppedDownEnv);  // not for the tasks' environments, nor a later exec
  }
  ControlPlane cp(options);
  Status s = cp.Init();
  if (s.ok()) s = cp.Start();
  if (!s.ok()) {
    spdlog::error("server: {}", s.ToString());
    return 1;
  }
  const bool v6 = host.find(':') != std::string::npos;
  std::printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", host.c_str(), v6 ? "]" : "",
              static_cast<unsigned>(cp.bound_port()));
  std::fflush(stdout);
  for (;;) {
    if (std::optional<std::string> why = cp.WaitForStepDown(std::chrono::milliseconds(200))) {
      // A deposed leader keeps nothing of its state: it stops and starts
      // again, as a follower, from the store (docs/HA.md).
      spdlog::warn("server: stepping down ({}); starting again as a follower", *why);
      StopWithin(cp, std::chrono::seconds(10));
      ReExec();
      return 1;
    }
    const timespec now{};
    const int sig = sigtimedwait(&stop_signals, nullptr, &now);
    if (sig > 0) {
      spdlog::info("server: signal {}, stopping", sig);
      break;
    }
  }
  cp.Stop();
  return 0;
}

}  // namespace hf::server
