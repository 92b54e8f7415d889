// A fast stand-in for a model server, for bench/inference/run.sh: the
// project's own HttpServer answering
//   GET  /health               200 {"status":"ok"}
//   GET  /v1/models            {"object":"list","data":[{"id": MODEL_ID, ...}]}
//   POST /v1/chat/completions  a fixed OpenAI-shaped chat.completion
//   anything else              404
// It does no work per request beyond building the answer, so a benchmark
// behind it measures the gateway (and the client), not the model server.
// tests/inference/fake_model.py (Python, ~1,000 requests/s) would cap the
// throughput figures first.
//
//   echo_replica --port N [--host 127.0.0.1] [--threads 2] [--model-id ID]
//
// Runs until SIGTERM or SIGINT, then exits 0.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include "http/server.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int Usage() {
  std::fprintf(stderr,
               "usage: echo_replica --port N [--host 127.0.0.1] [--threads 2] [--model-id ID]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  hf::http::HttpServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.worker_threads = 2;
  std::string model_id = "bench/echo";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string v = argv[++i];
    if (a == "--port") {
      o.port = static_cast<uint16_t>(std::atoi(v.c_str()));
    } else if (a == "--host") {
      o.address = v;
    } else if (a == "--threads") {
      o.worker_threads = std::atoi(v.c_str());
    } else if (a == "--model-id") {
      model_id = v;
    } else {
      return Usage();
    }
  }
  // Built once: the answer is the same for every request, like a cache hit.
  const std::string completion =
      "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1700000000,"
      "\"model\":\"" + model_id +
      "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"echo: "
      "hello\"},\"finish_reason\":\"stop\"}],"
      "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}";
  const std::string models = "{\"object\":\"list\",\"data\":[{\"id\":\"" + model_id +
                             "\",\"object\":\"model\",\"owned_by\":\"bench\"}]}";
  hf::http::HttpServer server(o, [&](const hf::http::Request& req) {
    hf::http::Response r;
    if (req.method == "GET" && req.path == "/health") {
      r.body = "{\"status\":\"ok\"}";
    } else if (req.method == "GET" && req.path == "/v1/models") {
      r.body = models;
    } else if (req.method == "POST" && req.path == "/v1/chat/completions") {
      r.body = completion;
    } else {
      return hf::http::JsonError(404, "not_found", "no route " + req.method + " " + req.path);
    }
    return r;
  });
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  if (auto s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "echo_replica: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("echo_replica listening on http://%s:%u\n", o.address.c_str(), server.bound_port());
  std::fflush(stdout);
  while (!g_stop) usleep(100 * 1000);
  server.Stop();
  return 0;
}
