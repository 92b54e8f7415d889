#include "http/relay.h"

#include <memory>
#include <string>
#include <utility>

#include "core/mutex.h"
#include "core/text.h"

namespace hf::http {

std::string EncodePath(std::string_view path) {
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    out += UrlEncode(path.substr(start, slash == std::string_view::npos ? path.npos : slash - start));
    if (slash == std::string_view::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

std::string EncodeQuery(const Request& req) {
  std::string q;
  for (const auto& [k, v] : req.query) {
    q += q.empty() ? "?" : "&";
    q += UrlEncode(k) + "=" + UrlEncode(v);
  }
  return q;
}

void Relay(UpstreamClient& client, UpstreamRequest request, Reply reply, RelayHandlers handlers) {
  // The response goes out as it arrives; bytes that come before the client's
  // stream is open wait here.
  struct State {
    Mutex mu;  // guards the members below
    std::shared_ptr<BodyStream> stream HF_GUARDED_BY(mu);
    std::string early HF_GUARDED_BY(mu);
    bool done HF_GUARDED_BY(mu) = false;
    bool ok HF_GUARDED_BY(mu) = false;
    int status HF_GUARDED_BY(mu) = 0;
  };
  auto state = std::make_shared<State>();
  auto decorate = std::make_shared<std::function<void(Response&)>>(std::move(handlers.decorate));
  UpstreamHandlers h;
  h.on_header = [state, reply, decorate](int status, HeaderList headers) {
    Response r;
    r.status = status;
    r.content_type = "application/octet-stream";
    for (auto& [name, value] : headers) {
      if (IEquals(name, "Content-Type")) {
        r.content_type = value;
      } else {
        r.headers.emplace_back(std::move(name), std::move(value));
      }
    }
    if (*decorate) (*decorate)(r);
    {
      MutexLock lock(state->mu);
      state->status = status;
    }
    r.body_stream = [state](std::shared_ptr<BodyStream> s) {
      MutexLock lock(state->mu);
      state->stream = s;
      if (!state->early.empty()) s->Write(state->early);
      state->early.clear();
      if (state->done) state->ok ? s->Finish() : s->Abort();
    };
    reply(std::move(r));
  };
  h.on_body = [state](std::string_view data) {
    MutexLock lock(state->mu);
    if (state->stream) return state->stream->Write(data);
    state->early.append(data);
    return state->early.size() <= kMaxEarlyRelayBody;
  };
  h.on_done = [state, on_done = std::move(handlers.on_done)](const UpstreamResult& res) {
    int status = 0;
    if (res.header_received) {
      MutexLock lock(state->mu);
      state->done = true;
      state->ok = res.status.ok();
      if (state->stream) state->ok ? state->stream->Finish() : state->stream->Abort();
      status = state->status;
    }
    if (on_done) on_done(res, res.header_received, status);
  };
  client.Send(std::move(request), std::move(h));
}

}  // namespace hf::http
