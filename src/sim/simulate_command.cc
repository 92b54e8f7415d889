#include "sim/simulate_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/text.h"
#include "sim/gangs.h"
#include "sim/openb_reader.h"
#include "sim/simulator.h"
#include "sim/teams.h"
#include "sim/yaml_workload.h"

namespace hf::sim {
namespace {

constexpr int kBadInput = 2;

int Fail(const std::string& message) {
  std::fprintf(stderr, "heteroflow simulate: %s\n", message.c_str());
  return kBadInput;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Seconds(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", double(ms) / 1000.0);
  return buf;
}

// `pod,node,gpus` with gpus as "index:milli" joined by '|'; replay adds when
// the last placement began and ended, so that a checker can tell which
// placements coexisted.
Status WritePlacements(const std::string& path, const SimReport& r) {
  const bool timed = r.method == Method::kReplay;
  std::string out = timed ? "pod,node,gpus,placed_s,released_s\n" : "pod,node,gpus\n";
  for (const PodPlacement& p : r.placements) {
    out += CsvField(p.pod);
    out += ',';
    out += CsvField(p.node);
    out += ',';
    for (size_t i = 0; i < p.gpus.size(); ++i) {
      if (i) out += '|';
      out += std::to_string(p.gpus[i].index) + ":" + std::to_string(p.gpus[i].milli);
    }
    if (timed) {
      out += ',';
      if (p.placed_ms) out += Seconds(*p.placed_ms);
      out += ',';
      if (p.released_ms) out += Seconds(*p.released_ms);
    }
    out += '\n';
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return InvalidArgument(path + ": cannot create placements file");
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() || std::fflush(f.get()) != 0) {
    return Unavailable(path + ": write failed");
  }
  return Status::Ok();
}

nlohmann::json ToJson(const SimReport& r, double elapsed_seconds) {
  using nlohmann::json;
  json j;
  j["method"] = MethodName(r.method);
  j["seed"] = r.seed;
  j["tune"] = r.tune;
  j["nodes"] = r.nodes;
  j["gpus_total"] = r.gpus_total;
  j["gpu_capacity_milli"] = r.gpu_capacity_milli;
  j["source_pods"] = r.source_tasks;
  j["pods_total"] = r.pods_total;
  j["pods_scheduled"] = r.pods_scheduled;
  j["pods_failed"] = r.pods_failed;
  j["preemptions"] = r.preemptions;
  j["gpu_alloc_ratio_at_arrived_100"] = r.gpu_alloc_ratio_at_arrived_100;
  j["arrived_100_reached"] = r.arrived_100_reached;
  j["unallocated_gpu_percent_at_arrived_100"] = 100.0 * (1.0 - r.gpu_alloc_ratio_at_arrived_100);
  j["gpu_alloc_ratio_final"] = r.gpu_alloc_ratio_final;
  j["gpu_alloc_ratio_peak"] = r.gpu_alloc_ratio_peak;
  j["arrived_ratio_final"] = r.arrived_ratio_final;
  if (r.method == Method::kReplay) {
    j["dropped_pending"] = r.dropped_pending;
    j["gpu_alloc_ratio_time_avg"] = r.gpu_alloc_ratio_time_avg;
    j["trace_span_seconds"] = double(r.trace_span_ms) / 1000.0;
    j["jobs"] = r.jobs_total;
    j["jobs_completed"] = r.jobs_completed;
    j["jobs_partial_at_end"] = r.jobs_partial_at_end;
    j["gpu_seconds_held_by_partial_gangs"] = r.gpu_seconds_held_by_partial_gangs;
    j["queueing"] = QueueingName(r.queueing);
    j["backfill"] = r.backfill;
    j["reservations"] = r.reservations;
    j["jain_index"] = r.jain_index;
    json queues = json::array();
    for (const QueueStats& q : r.queues) {
      json qj = {
          {"name", q.name},
          {"weight", q.weight},
          {"entitled_share", q.entitled},
          {"gpu_hours", q.gpu_hours},
          {"gpu_hours_share", q.share},
          {"utilisation", q.utilisation},
          {"jobs", q.jobs},
          {"jobs_started", q.started},
          {"wait_seconds", {{"p50", q.wait_p50_s}, {"p95", q.wait_p95_s}, {"max", q.wait_max_s}}},
          {"largest_job",
           {{"name", q.largest_job},
            {"gpus", q.largest_job_gpus},
            {"wait_seconds", q.largest_job_wait_s ? json(*q.largest_job_wait_s) : json(nullptr)}}},
          {"user_gpu_hours", q.user_gpu_hours}};
      queues.push_back(std::move(qj));
    }
    j["queues"] = std::move(queues);
    const JobTimes& l = r.largest_job;
    const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    j["largest_job"] = {{"name", l.name},
                        {"queue", l.queue},
                        {"gpus", l.gpus},
                        {"arrival_seconds", l.arrival_s},
                        {"first_reservation_seconds", opt(l.first_reservation_s)},
                        {"start_seconds", opt(l.start_s)}};
  }
  json curve = json::array();
  for (const CurvePoint& p : r.curve)
    curve.push_back({{"arrived", p.arrived}, {"allocated", p.allocated}});
  j["alloc_curve"] = std::move(curve);
  j["elapsed_seconds"] = elapsed_seconds;
  j["decisions"] = r.decisions;
  j["schedule_seconds"] = r.schedule_seconds;
  j["decisions_per_second"] =
      r.schedule_seconds > 0 ? double(r.decisions) / r.schedule_seconds : 0.0;
  j["decision_latency_us"] = {
      {"p50", r.latency_p50_us}, {"p99", r.latency_p99_us}, {"max", r.latency_max_us}};
  json enabled = json::array();
  json plugins = json::array();
  for (const auto& p : r.plugins) {
    if (p.settings.enabled) enabled.push_back(p.name);
    json pj = {{"name", p.name},
               {"enabled", p.settings.enabled},
               {"weight", p.settings.weight},
               {"status", framework::PluginStatusName(p.status)}};
    if (!p.settings.mode.empty()) pj["mode"] = p.settings.mode;
    if (!p.message.empty()) pj["message"] = p.message;
    plugins.push_back(std::move(pj));
  }
  j["policy"] = {{"enabled_plugins", std::move(enabled)}, {"plugins", std::move(plugins)}};
  return j;
}

std::string Secs(const std::optional<double>& s) {
  return s ? FormatNumber(std::round(*s)) + " s" : std::string("never");
}

void PrintLargest(const SimReport& r) {
  const JobTimes& l = r.largest_job;
  if (l.name.empty()) return;
  std::printf(
      "largest job: %s (%s, %s GPUs) arrived %s s, first reservation to start at %s, "
      "started %s\n",
      l.name.c_str(), l.queue.c_str(), FormatNumber(l.gpus).c_str(),
      FormatNumber(std::round(l.arrival_s)).c_str(), Secs(l.first_reservation_s).c_str(),
      Secs(l.start_s).c_str());
}

// Several runs of one workload, one column each.
void PrintSideBySide(const std::vector<SimReport>& runs) {
  std::string header = "                              ";
  for (const SimReport& r : runs) {
    char col[32];
    std::snprintf(
        col, sizeof col, "%14s",
        (std::string(QueueingName(r.queueing)) + "/backfill " + (r.backfill ? "on" : "off"))
            .c_str());
    header += "  ";
    header += col;
  }
  std::printf("%s\n", header.c_str());
  const auto row = [&](const std::string& label, const auto& cell) {
    std::printf("%-30s", label.c_str());
    for (const SimReport& r : runs) std::printf("  %14s", cell(r).c_str());
    std::printf("\n");
  };
  const auto pct = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f%%", 100 * v);
    return std::string(b);
  };
  const auto num = [](double v, const char* fmt) {
    char b[32];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  row("GPU utilisation", [&](const SimReport& r) { return pct(r.gpu_alloc_ratio_time_avg); });
  row("span (s)", [&](const SimReport& r) { return num(double(r.trace_span_ms) / 1000, "%.0f"); });
  row("Jain's index", [&](const SimReport& r) { return num(r.jain_index, "%.4f"); });
  row("preemptions", [&](const SimReport& r) { return std::to_string(r.preemptions); });
  row("reservations", [&](const SimReport& r) { return std::to_string(r.reservations); });
  const SimReport& first = runs.front();
  if (!first.largest_job.name.empty()) {
    std::printf("largest job %s (%s, %s GPUs, arrived %s s)\n", first.largest_job.name.c_str(),
                first.largest_job.queue.c_str(), FormatNumber(first.largest_job.gpus).c_str(),
                FormatNumber(std::round(first.largest_job.arrival_s)).c_str());
    row("  first reservation at",
        [&](const SimReport& r) { return Secs(r.largest_job.first_reservation_s); });
    row("  started at", [&](const SimReport& r) { return Secs(r.largest_job.start_s); });
  }
  for (size_t k = 0; k < first.queues.size(); ++k) {
    const QueueStats& q0 = first.queues[k];
    std::printf("queue %s (weight %s, entitled %.2f%%)\n", q0.name.c_str(),
                FormatNumber(q0.weight).c_str(), 100 * q0.entitled);
    row("  GPU-hours share", [&](const SimReport& r) { return pct(r.queues[k].share); });
    row("  share / entitled", [&](const SimReport& r) {
      return r.queues[k].entitled > 0 ? num(r.queues[k].share / r.queues[k].entitled, "%.3f") : "-";
    });
    row("  jobs started", [&](const SimReport& r) {
      return std::to_string(r.queues[k].started) + "/" + std::to_string(r.queues[k].jobs);
    });
    row("  wait p50 (s)", [&](const SimReport& r) { return num(r.queues[k].wait_p50_s, "%.0f"); });
    row("  wait p95 (s)", [&](const SimReport& r) { return num(r.queues[k].wait_p95_s, "%.0f"); });
    row("  wait max (s)", [&](const SimReport& r) { return num(r.queues[k].wait_max_s, "%.0f"); });
    row("  largest job's wait",
        [&](const SimReport& r) { return Secs(r.queues[k].largest_job_wait_s); });
  }
}

void PrintSummary(const SimReport& r, double elapsed_seconds, const std::string& cluster_source) {
  std::printf("method %s, seed %llu, tune %.2f\n", MethodName(r.method),
              static_cast<unsigned long long>(r.seed), r.tune);
  std::printf("cluster: %zu nodes, %lld GPUs (%s)\n", r.nodes, static_cast<long long>(r.gpus_total),
              cluster_source.c_str());
  std::printf("pods: %zu simulated (from %zu), %zu scheduled, %zu never placed, %zu preemptions\n",
              r.pods_total, r.source_tasks, r.pods_scheduled, r.pods_failed, r.preemptions);
  if (r.arrived_100_reached) {
    std::printf("GPU allocation: %.2f%% at arrived demand 100%%, %.2f%% final (arrived %.1f%%)\n",
                100 * r.gpu_alloc_ratio_at_arrived_100, 100 * r.gpu_alloc_ratio_final,
                100 * r.arrived_ratio_final);
  } else {
    std::printf("GPU allocation: %.2f%% final, peak %.2f%% (arrived demand reached only %.1f%%)\n",
                100 * r.gpu_alloc_ratio_final, 100 * r.gpu_alloc_ratio_peak,
                100 * r.arrived_ratio_final);
  }
  if (r.method == Method::kReplay) {
    std::printf(
        "replay: %.2f%% GPU allocation averaged over %.0f s of trace, %zu dropped while pending\n",
        100 * r.gpu_alloc_ratio_time_avg, double(r.trace_span_ms) / 1000.0, r.dropped_pending);
    if (r.jobs_total > 0) {
      std::printf(
          "jobs: %zu, %zu completed, %zu holding part of their gang at the end; %.1f "
          "GPU-seconds held by partial gangs\n",
          r.jobs_total, r.jobs_completed, r.jobs_partial_at_end,
          r.gpu_seconds_held_by_partial_gangs);
    }
  }
  if (r.method == Method::kReplay && (r.queues.size() > 1 || r.reservations > 0)) {
    std::printf("queues (%s, backfill %s): Jain's index %.4f over GPU-hours share / entitled\n",
                QueueingName(r.queueing), r.backfill ? "on" : "off", r.jain_index);
    for (const QueueStats& q : r.queues) {
      std::printf(
          "  %-16s weight %-5s GPU-hours %10.1f  share %6.2f%% (entitled %6.2f%%)  jobs %zu, "
          "started %zu, wait p50/p95/max %.0f/%.0f/%.0f s\n",
          q.name.c_str(), FormatNumber(q.weight).c_str(), q.gpu_hours, 100 * q.share,
          100 * q.entitled, q.jobs, q.started, q.wait_p50_s, q.wait_p95_s, q.wait_max_s);
    }
    PrintLargest(r);
  }
  std::printf("scheduler: %zu decisions, p50 %.1f us, p99 %.1f us, %.0f decisions/s\n", r.decisions,
              r.latency_p50_us, r.latency_p99_us,
              r.schedule_seconds > 0 ? double(r.decisions) / r.schedule_seconds : 0.0);
  std::string enabled;
  for (const auto& p : r.plugins) {
    if (!p.settings.enabled) continue;
    enabled += (enabled.empty() ? "" : ", ") + p.name;
    if (p.status == framework::PluginStatus::kError) enabled += " (error)";
  }
  std::printf("plugins: %s\n", enabled.c_str());
  std::printf("elapsed: %.3f s\n", elapsed_seconds);
}

}  // namespace

int RunSimulateCommand(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  CLI::App app{
      "Replays a cluster and workload offline through the scheduling framework.\n"
      "Input: --nodes and --pods (Alibaba openb CSVs) or --workload (YAML).\n"
      "decisions_per_second counts scheduling decisions per second spent deciding;\n"
      "elapsed_seconds is wall time from start, input reading included, to the end\n"
      "of the simulation.",
      "heteroflow simulate"};
  std::string nodes_path, pods_path, workload_path, method_name = "fgd", policy_path,
                                                    placements_path;
  double tune = 1.3;
  uint64_t seed = 42;
  bool json = false;
  CLI::Option* nodes_opt = app.add_option("--nodes", nodes_path, "openb node list CSV");
  CLI::Option* pods_opt = app.add_option("--pods", pods_path, "openb pod list CSV");
  CLI::Option* workload_opt = app.add_option(
      "--workload", workload_path, "YAML cluster and workload (see src/sim/yaml_workload.h)");
  nodes_opt->needs(pods_opt);
  pods_opt->needs(nodes_opt);
  workload_opt->excludes(nodes_opt)->excludes(pods_opt);
  app.add_option("--method", method_name,
                 "fgd (sample, shuffle, place once) or replay (trace times)")
      ->check(CLI::IsMember({"fgd", "replay"}))
      ->capture_default_str();
  app.add_option("--tune", tune, "fgd: sample until GPU demand = tune x GPU capacity, in (0, 100]")
      ->capture_default_str();
  app.add_option("--seed", seed, "fgd: random seed")->capture_default_str();
  app.add_option("--policy", policy_path,
                 "YAML with a plugins:/scheduler: block (replaces a workload's own)");
  app.add_option("--output-placements", placements_path, "write pod,node,gpus CSV here");
  app.add_flag("--json", json, "print one JSON object instead of a summary");
  bool no_gang = false;
  app.add_flag("--no-gang", no_gang,
               "replay: place a job's members one by one, as a scheduler without gangs does "
               "(to see the deadlocks and idle GPUs gangs avoid)");
  double gang_share = 0;
  std::string gang_sizes_text;
  CLI::Option* gangs_opt = app.add_option(
      "--gangs", gang_share,
      "replay: turn this share (0..1) of the tasks into multi-member jobs: consecutive arrivals, "
      "sizes from --gang-sizes, drawn with --seed");
  app.add_option("--gang-sizes", gang_sizes_text,
                 "job sizes and weights for --gangs (default 2:0.5,4:0.3,8:0.2)")
      ->needs(gangs_opt);
  std::string generate, teams_text = "a:1,b:2,c:1", cluster_text = "32x8";
  TeamsOptions teams;
  CLI::Option* generate_opt =
      app.add_option("--generate", generate,
                     "generate the workload instead of reading one: teams (a cluster shared by "
                     "teams submitting 1-GPU jobs and a few 32-64-GPU gangs; src/sim/teams.h)")
          ->check(CLI::IsMember({"teams"}));
  generate_opt->excludes(nodes_opt)->excludes(pods_opt)->excludes(workload_opt);
  app.add_option("--teams", teams_text,
                 "--generate teams: NAME:WEIGHT[:JOBS_PER_HOUR],... (each a queue)")
      ->capture_default_str();
  app.add_option("--cluster", cluster_text, "--generate teams: NODESxGPUS (A100-80G nodes)")
      ->capture_default_str();
  app.add_option("--hours", teams.hours, "--generate teams: hours of arrivals, and the horizon")
      ->capture_default_str();
  app.add_option("--large-share", teams.large_share,
                 "--generate teams: share of the jobs that are 32-64-GPU gangs")
      ->capture_default_str();
  app.add_option("--users-per-team", teams.users_per_team, "--generate teams: users per team")
      ->capture_default_str();
  std::string queueing_text = "fair", backfill_text = "on";
  double horizon_s = 0;
  app.add_option("--queueing", queueing_text,
                 "replay: fifo (one global order, queues ignored) or fair (as the server: "
                 "admission, weighted fair share, reclaim); a list runs each, side by side")
      ->capture_default_str();
  app.add_option("--backfill", backfill_text,
                 "replay: on (reservations from time limits, as the server) or off (skip-ahead); "
                 "a list runs each, side by side")
      ->capture_default_str();
  CLI::Option* horizon_opt = app.add_option(
      "--horizon", horizon_s, "replay: stop this many seconds into the trace (default: the end)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kBadInput;
  }
  if (nodes_path.empty() && workload_path.empty() && generate.empty()) {
    return Fail(
        "give --nodes FILE --pods FILE (openb CSVs), --workload FILE (YAML) or --generate teams; "
        "see --help");
  }
  std::vector<Queueing> queueings;
  for (const std::string& q : Split(queueing_text, ',')) {
    auto parsed = ParseQueueing(q);
    if (!parsed)
      return Fail("--queueing: want fifo or fair (or a list of them), got \"" + q + "\"");
    queueings.push_back(*parsed);
  }
  std::vector<bool> backfills;
  for (const std::string& b : Split(backfill_text, ',')) {
    if (b != "on" && b != "off") {
      return Fail("--backfill: want on or off (or a list of them), got \"" + b + "\"");
    }
    backfills.push_back(b == "on");
  }
  if (*horizon_opt && !(std::isfinite(horizon_s) && horizon_s > 0)) {
    return Fail("--horizon must be a number of seconds > 0");
  }
  // The queue options are replay's: they choose it unless --method says otherwise.
  if (!app.count("--method") &&
      (app.count("--queueing") || app.count("--backfill") || *horizon_opt)) {
    method_name = "replay";
  }
  if (!generate.empty()) {
    if (app.count("--method") && method_name != "replay") {
      return Fail("--generate teams needs --method replay (its jobs arrive over time)");
    }
    method_name = "replay";
    auto parsed = ParseTeams(teams_text);
    if (!parsed.ok()) return Fail(parsed.status().message());
    teams.teams = std::move(*parsed);
    Status st = ParseClusterShape(cluster_text, teams.nodes, teams.gpus_per_node);
    if (!st.ok()) return Fail(st.message());
    teams.seed = seed;
    if (!*horizon_opt) horizon_s = teams.hours * 3600;
  }
  if (!std::isfinite(tune) || tune <= 0 || tune > 100) {
    return Fail("--tune must be in (0, 100], got " + FormatNumber(tune));
  }

  SimOptions options;
  options.method = *ParseMethod(method_name);
  options.tune = tune;
  options.seed = seed;
  options.gang = !no_gang;
  if (horizon_s > 0) options.horizon_ms = std::llround(horizon_s * 1000);
  const std::string source = !generate.empty()       ? "--generate teams"
                             : workload_path.empty() ? nodes_path
                                                     : workload_path;
  Result<Workload> workload = !generate.empty()       ? GenerateTeams(teams)
                              : workload_path.empty() ? LoadOpenbWorkload(nodes_path, pods_path)
                                                      : LoadYamlWorkload(workload_path);
  if (!workload.ok()) return Fail(workload.status().message());
  if (*gangs_opt) {
    if (options.method != Method::kReplay) return Fail("--gangs needs --method replay");
    GangSizes sizes = DefaultGangSizes();
    if (!gang_sizes_text.empty()) {
      Result<GangSizes> parsed = ParseGangSizes(gang_sizes_text);
      if (!parsed.ok()) return Fail(parsed.status().message());
      sizes = std::move(*parsed);
    }
    Status st = MakeGangs(*workload, gang_share, sizes, seed);
    if (!st.ok()) return Fail(st.message());
  }
  if (!policy_path.empty()) {
    auto policy = framework::LoadPolicyFile(policy_path);
    if (!policy.ok()) return Fail(policy.status().message());
    options.policy = std::move(*policy);
  } else if (workload->policy) {
    options.policy = *workload->policy;
  }
  const size_t combos = queueings.size() * backfills.size();
  if (combos > 1 && options.method != Method::kReplay) {
    return Fail("several --queueing or --backfill values need --method replay");
  }
  if (combos > 1 && !placements_path.empty()) {
    return Fail("--output-placements takes one run: give one --queueing and one --backfill");
  }
  if (combos > 1) {
    std::vector<SimReport> runs;
    nlohmann::json all = nlohmann::json::array();
    for (Queueing q : queueings) {
      for (bool b : backfills) {
        SimOptions o = options;
        o.queueing = q;
        o.backfill = b;
        auto report = Simulate(*workload, o);
        if (!report.ok()) return Fail(report.status().message());
        if (json) {
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          all.push_back(ToJson(*report, elapsed));
        }
        runs.push_back(std::move(*report));
      }
    }
    if (json) {
      std::printf("%s\n", nlohmann::json{{"runs", std::move(all)}}.dump().c_str());
    } else {
      std::printf("%s: %zu nodes, %lld GPUs, %zu tasks\n", source.c_str(), runs.front().nodes,
                  static_cast<long long>(runs.front().gpus_total), runs.front().pods_total);
      PrintSideBySide(runs);
    }
    return 0;
  }
  options.queueing = queueings.front();
  options.backfill = backfills.front();
  auto report = Simulate(*workload, options);
  if (!report.ok()) {
    std::string message = report.status().message();
    // Framework errors do not know which file the policy came from.
    if (message.starts_with("policy: ")) {
      message = (policy_path.empty() ? workload_path : policy_path) + ": " + message;
    }
    return Fail(message);
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& p : report->plugins) {
    if (p.settings.enabled && p.status == framework::PluginStatus::kError) {
      std::fprintf(stderr,
                   "heteroflow simulate: warning: plugin %s is in error and was left out: %s\n",
                   p.name.c_str(), p.message.c_str());
    }
  }
  if (!placements_path.empty()) {
    Status st = WritePlacements(placements_path, *report);
    if (!st.ok()) return Fail(st.message());
  }
  if (json) {
    std::printf("%s\n", ToJson(*report, elapsed).dump().c_str());
  } else {
    PrintSummary(*report, elapsed, source);
  }
  return 0;
}

}  // namespace hf::sim
