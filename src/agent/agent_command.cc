#include "agent/agent_command.h"

#include <spdlog/spdlog.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "core/json_fields.h"
#include "core/log.h"
#include "core/private_files.h"
#include "core/yaml_config.h"

namespace hf::agent {

int RunAgentCommand(int argc, char** argv) {
  CLI::App app{"heteroflow agent: run this node's tasks for a HeteroFlow server (docs/AGENT.md)",
               "heteroflow agent"};
  std::string server;
  std::string token_file;
  std::string node_name;
  std::string inventory_path;
  std::string work_dir = "heteroflow-agent";
  int grace_period_s = 10;
  std::string advertise_address;
  std::string log_level = "info";
  std::string log_format = "text";
  app.set_config("--config", "",
                 "YAML file of these options by their long names (server: URL, token_file: PATH, "
                 "work_dir: PATH, ...): the packaged service reads /etc/heteroflow/agent.yaml; "
                 "an option given on the command line wins over the file");
  app.config_formatter(std::make_shared<YamlConfig>());
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error
  app.add_option("--server", server, "server URL http://HOST:PORT[/PREFIX], or the control plane's replicas' URLs, comma-separated (docs/HA.md)")->required();
  app.add_option("--token-file", token_file,
                 "file holding the node's agent token (made for this node: POST /api/v1/tokens "
                 "{\"role\": \"agent\", \"node\": NAME}); readable by its owner only (0600); "
                 "else $HETEROFLOW_AGENT_TOKEN. Never on the command line, where ps shows it");
  app.add_option("--node-name", node_name,
                 "the node's name (default: the inventory's name, else the hostname)");
  app.add_option("--inventory", inventory_path,
                 "declared inventory (YAML: the API's node fields plus usage_file); default: "
                 "discover CPUs, memory, GPUs (nvidia-smi) and RDMA devices")
      ->check(CLI::ExistingFile);
  app.add_option("--work-dir", work_dir, "folder for the tasks' working dirs and logs")
      ->capture_default_str();
  app.add_option("--grace-period-s", grace_period_s,
                 "seconds between SIGTERM and SIGKILL when a task is stopped")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--advertise-address", advertise_address,
                 "IP address (v4 or v6 literal) the server should use to reach the services "
                 "this node runs (tasks whose command holds {port}); default: the address the "
                 "agent's requests come from");
  // Checked by log::Init, the one place that knows the levels and formats.
  app.add_option("--log-level", log_level, std::string("log level: ") + log::kLevels)
      ->capture_default_str();
  app.add_option("--log-format", log_format,
                 "log lines on stderr: text (UTC time, level, message) or json (one object a "
                 "line, for log shippers)")
      ->capture_default_str();
  app.footer(
      "On SIGINT or SIGTERM the agent stops heartbeats and polling and exits 0; the tasks it "
      "started keep running (they are not adopted by a restarted agent yet).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (Status st = log::Init("agent", log_level, log_format); !st.ok()) {
    std::fprintf(stderr, "heteroflow agent: %s\n", st.message().c_str());
    return 2;
  }
  std::string token;
  if (!token_file.empty()) {
    Result<std::string> t = ReadSecretFile(token_file);
    if (!t.ok()) {
      std::fprintf(stderr, "heteroflow agent: %s\n", t.status().message().c_str());
      return 2;
    }
    token = std::move(t).value();
  } else if (const char* t = std::getenv("HETEROFLOW_AGENT_TOKEN")) {
    token = t;
  }
  if (token.empty()) {
    std::fprintf(stderr,
                 "heteroflow agent: no token: pass --token-file or set HETEROFLOW_AGENT_TOKEN\n");
    return 2;
  }
  if (!advertise_address.empty()) {
    in6_addr buf{};
    if (inet_pton(AF_INET, advertise_address.c_str(), &buf) != 1 &&
        inet_pton(AF_INET6, advertise_address.c_str(), &buf) != 1) {
      std::fprintf(stderr,
                   "heteroflow agent: --advertise-address '%s' is not an IPv4 or IPv6 address "
                   "(a host name is not accepted)\n",
                   advertise_address.c_str());
      return 2;
    }
  }
  Result<std::vector<http::ServerUrl>> urls = http::ParseServerUrls(server);
  if (!urls.ok()) {
    std::fprintf(stderr, "heteroflow agent: %s\n", urls.status().message().c_str());
    return 2;
  }

  Inventory inventory;
  if (inventory_path.empty()) {
    inventory = DiscoverInventory();
  } else {
    Result<Inventory> inv = LoadInventoryFile(inventory_path);
    if (!inv.ok()) {
      std::fprintf(stderr, "heteroflow agent: %s\n", inv.status().message().c_str());
      return 1;
    }
    inventory = std::move(inv).value();
  }
  if (!node_name.empty()) {
    inventory.spec.name = node_name;
  } else if (inventory.spec.name.empty()) {
    inventory.spec.name = Hostname();
  }
  if (!json_fields::IsValidName(inventory.spec.name)) {
    std::fprintf(stderr,
                 "heteroflow agent: node name '%s' is not valid ([a-z0-9._-], starting and "
                 "ending with a letter or digit); pass --node-name\n",
                 inventory.spec.name.c_str());
    return 2;
  }
  std::error_code ec;
  const std::filesystem::path abs_work = std::filesystem::absolute(work_dir, ec);
  if (ec) {
    std::fprintf(stderr, "heteroflow agent: bad --work-dir: %s\n", ec.message().c_str());
    return 2;
  }

  // Signals are taken by one thread with sigwait, so the handler's work (a
  // mutex and a condition variable) happens outside signal context. They are
  // blocked before any thread starts, so every thread inherits the mask;
  // task processes unblock them before exec.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string shown;
  for (const http::ServerUrl& u : *urls) shown += (shown.empty() ? "" : ", ") + u.ToString();
  spdlog::info("agent: node {}, server {}, work dir {}", inventory.spec.name, shown,
               abs_work.lexically_normal().string());
  Agent agent(AgentOptions{.servers = std::move(urls).value(),
                           .token = token,
                           .inventory = inventory,
                           .work_dir = abs_work.lexically_normal().string(),
                           .grace_period = std::chrono::seconds(grace_period_s),
                           .advertise_address = advertise_address});
  std::atomic<bool> done{false};
  std::thread signals([&] {
    int sig = 0;
    while (sigwait(&sigs, &sig) == 0) {
      if (done) return;
      spdlog::info("agent: {}: stopping (tasks keep running)", sig == SIGINT ? "SIGINT" : "SIGTERM");
      agent.RequestStop();
      // The long poll in flight may wait up to 30 s more; it is abandoned
      // rather than waited for. Nothing is lost: the server keeps the list.
      for (int i = 0; i < 20 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!done) {
        std::fflush(nullptr);
        _exit(0);
      }
      return;
    }
  });
  const int rc = agent.Run();
  done = true;
  // Wakes the signal thread so that it can see `done` and return.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  return rc;
}

}  // namespace hf::agent
