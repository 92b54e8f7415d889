// A small closed-loop HTTP/1.1 load client for bench/inference/run.sh.
// Each of --concurrency threads holds one keep-alive connection (plain
// blocking sockets, TCP_NODELAY) and sends the same request again as soon as
// the previous answer is complete, so the figures are those of the server
// and not of an interpreter. Measures, per request, the time from writing
// the request to the response's last byte (latency) and to its first body
// byte (ttfb: for a streamed answer, the first chunk).
//
//   http_load --url http://HOST:PORT/PATH [--url ...] [--method POST]
//             [--body JSON] [--header 'Name: value' ...]
//             [--concurrency 1] (--requests N | --duration S)
//             [--warmup N-per-thread | --warmup-s S] [--quickack 0|1]
//
// Several --url: thread i uses url i mod count (e.g. one per replica).
// --requests N: N measured requests in all, split over the threads, after
// --warmup unmeasured ones per thread. --duration S: runs --warmup-s seconds
// unmeasured, then counts every request completed in the next S seconds.
// A non-2xx status, a malformed answer or a connection error counts as an
// error (the connection is then reopened).
//
// Prints one JSON line: {"concurrency","requests","errors","seconds","rps",
// "p50_us","p90_us","p99_us","max_us","ttfb_p50_us","ttfb_p90_us",
// "ttfb_p99_us","total" (answered requests, warm-up included),
// "first_error"}.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// --quickack 1: ACK every segment at once (TCP_QUICKACK before each recv), so
// a server that sends its answer in several small writes without TCP_NODELAY
// is not stalled by this client's delayed ACKs (~40 ms on Linux).
bool g_quickack = false;

struct Target {
  std::string host;
  uint16_t port = 0;
  std::string request;  // the whole request, written at once
};

struct Sample {
  double latency_us;
  double ttfb_us;
};

struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::mutex mu;
  std::vector<Sample> samples;
  long errors = 0;
  long total = 0;  // every answered request, warm-up included
  std::string first_error;
};

bool ParseUrl(const std::string& url, std::string* host, uint16_t* port, std::string* path) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return false;
  const std::string rest = url.substr(prefix.size());
  const size_t slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  *path = slash == std::string::npos ? "/" : rest.substr(slash);
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) return false;
  *host = hostport.substr(0, colon);
  *port = static_cast<uint16_t>(std::atoi(hostport.c_str() + colon + 1));
  return *port != 0;
}

int Connect(const Target& t, std::string* err) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    *err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(t.port);
  if (inet_pton(AF_INET, t.host.c_str(), &a.sin_addr) != 1) {
    *err = "not an IPv4 literal: " + t.host;
    close(fd);
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    *err = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool IEqualsPrefix(const std::string& line, const char* name) {
  const size_t n = std::strlen(name);
  if (line.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

// One exchange on fd. Returns the HTTP status, or -1 with *err set. Sets
// *close_after when the connection cannot be reused.
int Exchange(int fd, const std::string& request, Clock::time_point* first_body, std::string* err,
             bool* close_after) {
  *close_after = false;
  for (size_t off = 0; off < request.size();) {
    const ssize_t n = send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      *err = std::string("send: ") + std::strerror(errno);
      return -1;
    }
    off += static_cast<size_t>(n);
  }
  std::string buf;
  char tmp[16384];
  size_t header_end = std::string::npos;
  bool have_first = false;
  int status = 0;
  long content_length = -1;
  bool chunked = false;
  size_t pos = 0;  // chunked: where the next chunk-size line starts
  for (;;) {
    // Is the answer complete with what we have?
    if (header_end != std::string::npos) {
      if (!have_first && buf.size() > header_end) {
        *first_body = Clock::now();
        have_first = true;
      }
      if (chunked) {
        bool done = false;
        for (;;) {
          const size_t eol = buf.find("\r\n", pos);
          if (eol == std::string::npos) break;
          const long size = std::strtol(buf.c_str() + pos, nullptr, 16);
          if (size == 0) {
            // Trailer lines, then an empty line.
            size_t p = eol + 2;
            for (;;) {
              const size_t e = buf.find("\r\n", p);
              if (e == std::string::npos) break;
              if (e == p) {
                done = true;
                break;
              }
              p = e + 2;
            }
            break;
          }
          if (buf.size() < eol + 2 + static_cast<size_t>(size) + 2) break;
          pos = eol + 2 + static_cast<size_t>(size) + 2;
        }
        if (done) return status;
      } else if (content_length >= 0) {
        if (buf.size() >= header_end + static_cast<size_t>(content_length)) return status;
      }
    }
    if (g_quickack) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    }
    const ssize_t n = recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) {
      if (n == 0 && header_end != std::string::npos && !chunked && content_length < 0) {
        *close_after = true;  // close-delimited body
        return status;
      }
      *err = n == 0 ? std::string("connection closed mid-answer")
                    : std::string("recv: ") + std::strerror(errno);
      return -1;
    }
    buf.append(tmp, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      const size_t e = buf.find("\r\n\r\n");
      if (e == std::string::npos) continue;
      header_end = e + 4;
      pos = header_end;
      if (buf.size() < 12 || buf.compare(0, 5, "HTTP/") != 0) {
        *err = "malformed status line";
        return -1;
      }
      status = std::atoi(buf.c_str() + 9);
      size_t line = buf.find("\r\n") + 2;
      while (line < e) {
        const size_t next = buf.find("\r\n", line);
        std::string h = buf.substr(line, next - line);
        if (IEqualsPrefix(h, "content-length:")) content_length = std::atol(h.c_str() + 15);
        if (IEqualsPrefix(h, "transfer-encoding:") && h.find("chunked") != std::string::npos) chunked = true;
        if (IEqualsPrefix(h, "connection:") && h.find("close") != std::string::npos) *close_after = true;
        line = next + 2;
      }
      if (status == 204 || status == 304) content_length = 0;
    }
  }
}

void Worker(const Target& t, long requests, long warmup, Shared* sh) {
  std::vector<Sample> mine;
  long errors = 0, total = 0;
  std::string first_error;
  int fd = -1;
  for (long i = 0; requests < 0 || i < warmup + requests; ++i) {
    if (sh->stop.load(std::memory_order_relaxed)) break;
    std::string err;
    if (fd < 0) fd = Connect(t, &err);
    const bool measured = requests >= 0 ? i >= warmup : sh->measuring.load(std::memory_order_relaxed);
    const auto t0 = Clock::now();
    Clock::time_point first = t0;
    bool close_after = false;
    int status = fd < 0 ? -1 : Exchange(fd, t.request, &first, &err, &close_after);
    const auto t1 = Clock::now();
    if (status > 0) ++total;
    if (status < 200 || status > 299) {
      if (status > 0) err = "HTTP " + std::to_string(status);
      close_after = true;
    }
    // A request counts for the window it ended in.
    const bool count = requests >= 0 ? measured : sh->measuring.load(std::memory_order_relaxed) &&
                                                      !sh->stop.load(std::memory_order_relaxed);
    if (count) {
      if (status >= 200 && status <= 299) {
        mine.push_back({std::chrono::duration<double, std::micro>(t1 - t0).count(),
                        std::chrono::duration<double, std::micro>(first - t0).count()});
      } else {
        ++errors;
        if (first_error.empty()) first_error = err;
      }
    }
    if (close_after && fd >= 0) {
      close(fd);
      fd = -1;
    }
    if (status < 0 && fd < 0 && err.rfind("connect", 0) == 0) usleep(10000);
  }
  if (fd >= 0) close(fd);
  std::lock_guard lock(sh->mu);
  sh->samples.insert(sh->samples.end(), mine.begin(), mine.end());
  sh->errors += errors;
  sh->total += total;
  if (sh->first_error.empty()) sh->first_error = first_error;
}

double Pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size()));
  if (i >= sorted.size()) i = sorted.size() - 1;
  return sorted[i];
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

int Usage() {
  std::fprintf(stderr,
               "usage: http_load --url http://HOST:PORT/PATH [--url ...] [--method POST] [--body JSON]\n"
               "                 [--header 'Name: value' ...] [--concurrency 1]\n"
               "                 (--requests N | --duration S) [--warmup N | --warmup-s S]\n"
               "                 [--quickack 0|1]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> urls, headers;
  std::string method = "GET", body;
  int concurrency = 1;
  long requests = -1, warmup = 0;
  double duration = 0, warmup_s = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string v = argv[++i];
    if (a == "--url") urls.push_back(v);
    else if (a == "--method") method = v;
    else if (a == "--body") body = v;
    else if (a == "--header") headers.push_back(v);
    else if (a == "--concurrency") concurrency = std::atoi(v.c_str());
    else if (a == "--requests") requests = std::atol(v.c_str());
    else if (a == "--warmup") warmup = std::atol(v.c_str());
    else if (a == "--duration") duration = std::atof(v.c_str());
    else if (a == "--warmup-s") warmup_s = std::atof(v.c_str());
    else if (a == "--quickack") g_quickack = v == "1";
    else return Usage();
  }
  if (urls.empty() || concurrency < 1 || (requests < 0) == (duration <= 0)) return Usage();
  std::vector<Target> targets;
  for (const auto& u : urls) {
    Target t;
    std::string path;
    if (!ParseUrl(u, &t.host, &t.port, &path)) {
      std::fprintf(stderr, "http_load: bad --url %s (want http://IPV4:PORT/PATH)\n", u.c_str());
      return 2;
    }
    t.request = method + " " + path + " HTTP/1.1\r\nHost: " + t.host + ":" + std::to_string(t.port) +
                "\r\nUser-Agent: hf-http-load\r\n";
    for (const auto& h : headers) t.request += h + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") {
      t.request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\n";
    }
    t.request += "\r\n" + body;
    targets.push_back(std::move(t));
  }
  Shared sh;
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    long n = -1;
    if (requests >= 0) n = requests / concurrency + (i < requests % concurrency ? 1 : 0);
    threads.emplace_back(Worker, std::cref(targets[static_cast<size_t>(i) % targets.size()]), n, warmup,
                         &sh);
  }
  double seconds = 0;
  if (requests < 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s));
    const auto t0 = Clock::now();
    sh.measuring.store(true);
    std::this_thread::sleep_for(std::chrono::duration<double>(duration));
    sh.stop.store(true);
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (auto& t : threads) t.join();
  } else {
    const auto t0 = Clock::now();
    for (auto& t : threads) t.join();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::vector<double> lat, ttfb;
  for (const auto& s : sh.samples) {
    lat.push_back(s.latency_us);
    ttfb.push_back(s.ttfb_us);
  }
  std::sort(lat.begin(), lat.end());
  std::sort(ttfb.begin(), ttfb.end());
  std::printf(
      "{\"concurrency\":%d,\"requests\":%zu,\"errors\":%ld,\"seconds\":%.3f,\"rps\":%.1f,"
      "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
      "\"ttfb_p50_us\":%.1f,\"ttfb_p90_us\":%.1f,\"ttfb_p99_us\":%.1f,\"total\":%ld,\"first_error\":\"%s\"}\n",
      concurrency, lat.size(), sh.errors, seconds, seconds > 0 ? static_cast<double>(lat.size()) / seconds : 0,
      Pct(lat, 0.5), Pct(lat, 0.9), Pct(lat, 0.99), lat.empty() ? 0 : lat.back(), Pct(ttfb, 0.5),
      Pct(ttfb, 0.9), Pct(ttfb, 0.99), sh.total, JsonEscape(sh.first_error).c_str());
  return 0;
}
