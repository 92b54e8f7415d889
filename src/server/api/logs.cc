// Task output (docs/API.md, "Logs"; docs/AGENT.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_fields.h"
#include "server/api/api.h"
#include "server/codec.h"

namespace hf::server::api {

namespace {

// Most of a task's output the server keeps (the agent keeps its own rotated
// copy on the node): 16 MiB.
constexpr uint64_t kMaxTaskLogBytes = 16ull << 20;

std::string TaskLogPath(const std::string& data_dir, uint64_t id) {
  return data_dir + "/logs/" + std::to_string(id) + ".log";
}

}  // namespace

Response LogsApi::Append(const Request& req, const Caller& caller) {
  Result<json> body = ParseJsonBody(req.body);
  if (!body.ok()) return StatusError(body.status());
  Status s = json_fields::CheckKeys(*body, "", {"node", "id", "offset", "data"});
  if (!s.ok()) return StatusError(s);
  Result<std::string> node = ParseNodeField(*body);
  if (!node.ok()) return StatusError(node.status());
  s = ActsFor(caller, *node);
  if (!s.ok()) return StatusError(s);
  int64_t id = 0, offset = 0;
  s = json_fields::ReadInt(body->value("id", json(nullptr)), "id", int64_t{1}, INT64_MAX, id);
  if (s.ok())
    s = json_fields::ReadInt(body->value("offset", json(nullptr)), "offset", int64_t{0},
                             int64_t{1} << 50, offset);
  if (!s.ok()) return StatusError(s);
  if (!body->contains("data") || !(*body)["data"].is_string()) {
    return StatusError(InvalidArgument("data must be a string"));
  }
  const std::string& data = (*body)["data"].get_ref<const std::string&>();
  // Only a task that exists and has been placed (it has events beyond
  // "submitted") may have output, and only from its node: while it is
  // placed on another node, this one's agent may not add to it. (A task
  // placed nowhere now takes the last output of a run that ended or was
  // preempted.)
  s = store_.Read([&](const store::ReadTx& tx) -> Status {
    HF_ASSIGN_OR_RETURN(store::TaskRecord rec, tx.GetTask(static_cast<TaskKey>(id)));
    if (rec.state == TaskState::kPending && rec.node.empty()) {
      return FailedPrecondition("task " + std::to_string(id) + " is not placed");
    }
    if (!rec.node.empty() && rec.node != *node) {
      return PermissionDenied("task " + std::to_string(id) + " runs on node " + rec.node +
                              ", not " + *node);
    }
    return Status::Ok();
  });
  if (!s.ok()) return StatusError(s);
  MutexLock lock(append_mu_);
  std::error_code ec;
  std::filesystem::create_directories(data_dir_ + "/logs", ec);
  const std::string path = TaskLogPath(data_dir_, static_cast<uint64_t>(id));
  const uint64_t size =
      std::filesystem::exists(path, ec) ? std::filesystem::file_size(path, ec) : 0;
  if (static_cast<uint64_t>(offset) != size) {
    return JsonResponse(
        409, json{{"error",
                   {{"code", "conflict"},
                    {"message", "offset " + std::to_string(offset) +
                                    " does not match the stored size " + std::to_string(size)}}},
                  {"size", size}});
  }
  const uint64_t room = size >= kMaxTaskLogBytes ? 0 : kMaxTaskLogBytes - size;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(room, data.size()));
  if (n > 0) {
    std::ofstream f(path, std::ios::binary | std::ios::app);
    f.write(data.data(), static_cast<std::streamsize>(n));
    if (!f) return StatusError(Unavailable("cannot write " + path));
  }
  return JsonResponse(200, json{{"size", size + n}, {"truncated", n < data.size()}});
}

Response LogsApi::Read(const Request& req, const Caller&) const {
  Result<int64_t> parsed = ParseIntParam("task id", req.Param("id"), 1, INT64_MAX);
  if (!parsed.ok()) return StatusError(parsed.status());
  const uint64_t id = static_cast<uint64_t>(*parsed);
  uint64_t offset = 0;
  for (const auto& [key, value] : req.query) {
    if (key != "offset")
      return StatusError(InvalidArgument("unknown query parameter '" + key + "'"));
    Result<int64_t> v = ParseIntParam("offset", value, 0, INT64_MAX);
    if (!v.ok()) return StatusError(v.status());
    offset = static_cast<uint64_t>(*v);
  }
  Status s = store_.Read([&](const store::ReadTx& tx) { return tx.GetTask(id).status(); });
  if (!s.ok()) return StatusError(s);
  Response r;
  r.status = 200;
  r.content_type = "text/plain; charset=utf-8";
  std::ifstream f(TaskLogPath(data_dir_, id), std::ios::binary);
  uint64_t size = 0;
  if (f) {
    f.seekg(0, std::ios::end);
    size = static_cast<uint64_t>(f.tellg());
    if (offset < size) {
      f.seekg(static_cast<std::streamoff>(offset));
      r.body.resize(size - offset);
      f.read(r.body.data(), static_cast<std::streamsize>(r.body.size()));
    }
  }
  // Where the next read starts, for `heteroflow logs -f`.
  r.SetHeader("X-Log-Size", std::to_string(size));
  return r;
}

}  // namespace hf::server::api
