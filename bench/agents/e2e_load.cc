// Submit -> running latency through real agents: the load generator of
// bench/agents/run.sh, phases a and b. Native, so that the client's own CPU
// (it shares the machine with the server, the agents and their tasks) is a
// small part of what is measured; it prints what bench/agents/e2e_agents.py
// (the same measurement in Python, kept for reading) prints.
//
//   e2e_load --port PORT --token-file FILE [--count 1000]
//            [--mode steady|burst] [--rate 50] [--threads 4] [--batch 100]
//            [--command 'sleep 0.1'] [--timeout 300]
//
// It subscribes to GET /api/v1/events, then submits `count` tasks of 1 GPU
// (cpu_milli 1000, memory_mib 1024) running `command` (split on spaces):
//   steady  one task per POST /api/v1/tasks, `rate` a second from `threads`
//           threads, each on its own keep-alive connection (open loop: task k
//           is due at t0 + k/rate; a late thread sends at once, skips nothing);
//   burst   count/batch POST /api/v1/tasks/batch of `batch` tasks, back to
//           back on one connection.
// A task's submission time is the wall clock just before its request is
// written; its running time is the `time` of the `event: task` with
// "action":"running" and its id: the server's wall clock (ms) when the
// agent's running report was committed, on the same machine's clock. The
// stages in between come from the same stream. The run ends when every task
// succeeded or failed, or after `timeout` s.
//
// Prints one line per figure and a last line `AGENTS_E2E ...` that run.sh
// reads. Exit 1 when a task did not run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using nlohmann::json;

struct Args {
  int port = 0;
  std::string token;
  int count = 1000;
  std::string mode = "steady";
  double rate = 50;
  int threads = 4;
  int batch = 100;
  std::string command = "sleep 0.1";
  double timeout_s = 300;
};

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double MonoNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "e2e_load: %s\n", why.c_str());
  std::exit(2);
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    Die("connect to 127.0.0.1:" + std::to_string(port) + ": " + err);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// A keep-alive connection that sends a POST and reads its answer, framed by
// Content-Length (the server's answers to these requests are).
class Conn {
 public:
  Conn(int port, std::string token) : port_(port), token_(std::move(token)) {}
  ~Conn() { Close(); }

  // The status, or -1 with `err` set; `body` gets the answer's body.
  int Post(const std::string& path, const std::string& payload, std::string& body,
           std::string& err) {
    if (fd_ < 0) fd_ = Connect(port_);
    std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                      "\r\nAuthorization: Bearer " + token_ +
                      "\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(payload.size()) + "\r\n\r\n";
    req += payload;
    if (!SendAll(fd_, req)) return Fail("send: " + std::string(std::strerror(errno)), err);
    std::string buf;
    char tmp[16384];
    size_t head_end = std::string::npos;
    size_t length = 0;
    for (;;) {
      if (head_end != std::string::npos && buf.size() >= head_end + length) break;
      const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return Fail(n == 0 ? "connection closed" : std::strerror(errno), err);
      buf.append(tmp, static_cast<size_t>(n));
      if (head_end == std::string::npos) {
        const size_t e = buf.find("\r\n\r\n");
        if (e == std::string::npos) continue;
        head_end = e + 4;
        std::string head = buf.substr(0, e);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("\r\ncontent-length:");
        if (cl == std::string::npos) return Fail("answer without Content-Length", err);
        length = std::strtoul(head.c_str() + cl + 17, nullptr, 10);
      }
    }
    const int status = std::atoi(buf.c_str() + 9);
    body = buf.substr(head_end, length);
    buf.erase(0, head_end + length);
    return status;
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int Fail(const std::string& why, std::string& err) {
    err = why;
    Close();
    return -1;
  }
  int port_;
  std::string token_;
  int fd_ = -1;
};

// "2026-12-02T14:00:00.123Z" -> seconds since the epoch.
double ParseTime(const std::string& s) {
  std::tm tm{};
  if (s.size() < 19 || strptime(s.substr(0, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) {
    return NAN;
  }
  double secs = static_cast<double>(timegm(&tm));
  if (s.size() > 19 && s[19] == '.') secs += std::strtod(s.c_str() + 19, nullptr);
  return secs;
}

// The event stream: per task id and action, the server's time of the event
// and the client's time of its arrival.
class EventReader {
 public:
  EventReader(int port, const std::string& token) {
    fd_ = Connect(port);
    const std::string req = "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:" +
                            std::to_string(port) + "\r\nAuthorization: Bearer " + token +
                            "\r\nAccept: text/event-stream\r\n\r\n";
    if (!SendAll(fd_, req)) Die("GET /api/v1/events: send failed");
    std::string line;
    if (!ReadLine(line) || line.find(" 200 ") == std::string::npos) {
      Die("GET /api/v1/events: " + line);
    }
    while (ReadLine(line) && !line.empty()) {
    }
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() {
    stopped_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }

  struct Seen {
    double server = 0;
    double client = 0;
  };
  std::mutex mu;
  std::map<std::pair<int64_t, std::string>, Seen> seen;  // guarded by mu
  std::set<int64_t> ended;                              // guarded by mu

 private:
  bool ReadLine(std::string& line) {
    for (;;) {
      const size_t e = buf_.find('\n', pos_);
      if (e != std::string::npos) {
        line.assign(buf_, pos_, e - pos_);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        pos_ = e + 1;
        if (pos_ > 65536) {
          buf_.erase(0, pos_);
          pos_ = 0;
        }
        return true;
      }
      char tmp[65536];
      const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

  void Run() {
    static const std::set<std::string> kActions = {"submitted", "scheduled", "running",
                                                   "succeeded", "failed",    "lost",
                                                   "preempted"};
    std::string event, line;
    while (ReadLine(line)) {
      const double now = WallNow();
      if (line.rfind("event:", 0) == 0) {
        event = line.substr(6);
        event.erase(0, event.find_first_not_of(' '));
      } else if (line.rfind("data:", 0) == 0 && event == "task") {
        const json d = json::parse(line.substr(5), nullptr, false);
        if (!d.is_object() || !d.contains("id") || !d["id"].is_number_integer()) continue;
        const std::string action = d.value("action", "");
        if (kActions.count(action) == 0) continue;
        const int64_t id = d["id"].get<int64_t>();
        const double t = d.contains("time") && d["time"].is_string()
                             ? ParseTime(d["time"].get<std::string>())
                             : now;
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace(std::make_pair(id, action), Seen{t, now});
        if (action == "succeeded" || action == "failed") ended.insert(id);
      } else if (line.empty()) {
        event.clear();
      }
    }
    if (!stopped_) Die("the event stream ended");
  }

  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

std::vector<std::string> Split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

json Submission(const Args& args, int k) {
  return {{"name", "agent-e2e-" + std::to_string(k)},
          {"group", "bench"},
          {"command", Split(args.command)},
          {"requests", {{"cpu_milli", 1000}, {"memory_mib", 1024}, {"gpu", 1}}}};
}

struct Submitted {
  std::mutex mu;
  std::vector<std::pair<int64_t, double>> tasks;  // id, wall time sent; guarded by mu
  std::vector<std::string> errors;                // guarded by mu
};

void Steady(int idx, const Args& args, double t0, Submitted& out) {
  Conn conn(args.port, args.token);
  for (int k = idx; k < args.count; k += args.threads) {
    const double delay = t0 + k / args.rate - MonoNow();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    const std::string payload = Submission(args, k).dump();
    const double sent = WallNow();
    std::string body, err;
    const int status = conn.Post("/api/v1/tasks", payload, body, err);
    std::lock_guard<std::mutex> lock(out.mu);
    if (status != 201) {
      out.errors.push_back("submission " + std::to_string(k) + ": " +
                           (status < 0 ? err : "HTTP " + std::to_string(status) + " " +
                                                   body.substr(0, 200)));
      continue;
    }
    out.tasks.emplace_back(json::parse(body)["id"].get<int64_t>(), sent);
  }
}

void Burst(const Args& args, Submitted& out) {
  Conn conn(args.port, args.token);
  for (int start = 0; start < args.count; start += args.batch) {
    json tasks = json::array();
    for (int k = start; k < std::min(args.count, start + args.batch); ++k) {
      tasks.push_back(Submission(args, k));
    }
    const std::string payload = json{{"tasks", tasks}}.dump();
    const double sent = WallNow();
    std::string body, err;
    const int status = conn.Post("/api/v1/tasks/batch", payload, body, err);
    std::lock_guard<std::mutex> lock(out.mu);
    if (status != 201) {
      out.errors.push_back("batch at " + std::to_string(start) + ": " +
                           (status < 0 ? err : "HTTP " + std::to_string(status)));
      continue;
    }
    for (const json& t : json::parse(body)["tasks"]) {
      out.tasks.emplace_back(t["id"].get<int64_t>(), sent);
    }
  }
}

double Pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return NAN;
  const long n = static_cast<long>(sorted.size());
  const long i = std::min(n - 1, std::max(0L, std::lround(p / 100.0 * n + 0.5) - 1));
  return sorted[static_cast<size_t>(i)];
}

std::string Line(std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  char buf[160];
  std::snprintf(buf, sizeof buf, "p50 %7.1f  p90 %7.1f  p99 %7.1f  max %7.1f", Pct(ms, 50),
                Pct(ms, 90), Pct(ms, 99), ms.empty() ? NAN : ms.back());
  return buf;
}

Args Parse(int argc, char** argv) {
  Args a;
  std::string token_file;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) Die("missing value for " + k);
    const std::string v = argv[++i];
    if (k == "--port") a.port = std::atoi(v.c_str());
    else if (k == "--token-file") token_file = v;
    else if (k == "--count") a.count = std::atoi(v.c_str());
    else if (k == "--mode") a.mode = v;
    else if (k == "--rate") a.rate = std::atof(v.c_str());
    else if (k == "--threads") a.threads = std::atoi(v.c_str());
    else if (k == "--batch") a.batch = std::atoi(v.c_str());
    else if (k == "--command") a.command = v;
    else if (k == "--timeout") a.timeout_s = std::atof(v.c_str());
    else Die("unknown option " + k);
  }
  if (a.port <= 0 || token_file.empty()) Die("--port and --token-file are required");
  std::ifstream tf(token_file);
  std::getline(tf, a.token);
  if (a.token.empty()) Die("no token in " + token_file);
  if (a.mode != "steady" && a.mode != "burst") Die("--mode is steady or burst");
  if (a.count <= 0 || a.rate <= 0 || a.threads <= 0 || a.batch <= 0) {
    Die("--count, --rate, --threads and --batch must be positive");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  EventReader reader(args.port, args.token);
  Submitted out;
  const double t0 = MonoNow() + 0.2;
  if (args.mode == "steady") {
    std::vector<std::thread> threads;
    for (int i = 0; i < args.threads; ++i) {
      threads.emplace_back([&, i] { Steady(i, args, t0, out); });
    }
    for (std::thread& t : threads) t.join();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Burst(args, out);
  }
  const double submit_s = MonoNow() - t0;
  double first_sent = WallNow();
  std::set<int64_t> ids;
  for (const auto& [id, sent] : out.tasks) {
    ids.insert(id);
    first_sent = std::min(first_sent, sent);
  }
  for (const double deadline = MonoNow() + args.timeout_s; MonoNow() < deadline;) {
    {
      std::lock_guard<std::mutex> lock(reader.mu);
      if (std::includes(reader.ended.begin(), reader.ended.end(), ids.begin(), ids.end())) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader.Stop();
  const auto& seen = reader.seen;
  auto at = [&](int64_t id, const char* action) -> const EventReader::Seen* {
    auto it = seen.find({id, action});
    return it == seen.end() ? nullptr : &it->second;
  };
  auto stage = [&](const char* a, const char* b) {
    std::vector<double> v;
    for (int64_t id : ids) {
      if (const auto *x = at(id, a), *y = at(id, b); x && y) v.push_back((y->server - x->server) * 1e3);
    }
    return v;
  };
  std::vector<double> run_lat, run_arrival, sched_lat, ends;
  int succeeded = 0, failed = 0, lost = 0;
  for (const auto& [id, sent] : out.tasks) {
    if (const auto* r = at(id, "running")) {
      run_lat.push_back((r->server - sent) * 1e3);
      run_arrival.push_back((r->client - sent) * 1e3);
    }
    if (const auto* s = at(id, "scheduled")) sched_lat.push_back((s->server - sent) * 1e3);
    if (const auto* s = at(id, "succeeded")) ++succeeded, ends.push_back(s->server);
    if (const auto* f = at(id, "failed")) ++failed, ends.push_back(f->server);
    if (at(id, "lost") || at(id, "preempted")) ++lost;
  }
  const double all_done_s = ends.size() == ids.size() && !ids.empty()
                                ? *std::max_element(ends.begin(), ends.end()) - first_sent
                                : NAN;
  const size_t n = out.tasks.size();
  std::printf("mode %s: submitted %zu of %d (%zu errors) in %.2f s (%.0f/s)", args.mode.c_str(), n,
              args.count, out.errors.size(), submit_s, n / std::max(1e-9, submit_s));
  if (args.mode == "steady") std::printf(", target %.0f/s from %d threads", args.rate, args.threads);
  std::printf("\n");
  for (size_t i = 0; i < std::min<size_t>(5, out.errors.size()); ++i) {
    std::printf("  error: %s\n", out.errors[i].c_str());
  }
  const size_t ran = run_lat.size();
  std::printf("submit -> running (server event time)  ms: %s  (%zu of %zu)\n", Line(run_lat).c_str(),
              ran, n);
  std::printf("  submit -> scheduled                   ms: %s\n", Line(sched_lat).c_str());
  std::vector<double> s1 = stage("submitted", "scheduled"), s2 = stage("scheduled", "running");
  std::vector<double> s3 = stage("running", "succeeded"), s4 = stage("running", "failed");
  s3.insert(s3.end(), s4.begin(), s4.end());
  std::printf("  submitted -> scheduled (server)       ms: %s\n", Line(s1).c_str());
  std::printf("  scheduled -> running (server)         ms: %s\n", Line(s2).c_str());
  std::printf("  submit -> running event at the client ms: %s\n", Line(run_arrival).c_str());
  std::printf("  running -> ended (server)             ms: %s\n", Line(s3).c_str());
  std::printf("succeeded %d, failed %d, lost/preempted %d; all %zu ended %.2f s after the first "
              "submission\n",
              succeeded, failed, lost, ids.size(), all_done_s);
  std::printf("AGENTS_E2E mode=%s ran=%zu/%zu p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f "
              "succeeded=%d failed=%d all_done_s=%.2f submit_s=%.2f\n",
              args.mode.c_str(), ran, n, Pct(run_lat, 50), Pct(run_lat, 90), Pct(run_lat, 99),
              run_lat.empty() ? NAN : run_lat.back(), succeeded, failed, all_done_s, submit_s);
  return n > 0 && ran == n ? 0 : 1;
}
