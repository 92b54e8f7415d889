// Relay: send a request upstream (UpstreamClient) and answer the client's
// deferred Reply with the upstream's response as it arrives: its status and
// headers once they are complete, then its body piece by piece, unbuffered
// (a chat completion's tokens, an event stream, a long poll's answer). Used
// by the inference gateway (to model-server replicas) and by a follower
// replica of the control plane (to the leader, docs/HA.md).
#ifndef HF_HTTP_RELAY_H_
#define HF_HTTP_RELAY_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "http/server.h"
#include "http/upstream.h"

namespace hf::http {

struct RelayHandlers {
  // Called on the response before it goes out (e.g. to add a header).
  std::function<void(Response&)> decorate;
  // Exactly once, when the exchange ends. `answered`: the upstream's header
  // arrived and the reply was given (status is the upstream's); otherwise
  // the reply was not called and on_done must answer the client (or send
  // the request elsewhere).
  std::function<void(const UpstreamResult& result, bool answered, int status)> on_done;
};

// Body bytes that arrive before the client's stream is open wait in memory,
// up to this much; past it the exchange is cancelled.
inline constexpr size_t kMaxEarlyRelayBody = size_t{8} << 20;

// A request's path is kept percent-decoded; each segment is encoded again,
// so what goes upstream is one well-formed request target (no CR, LF or
// space can reach its request line). EncodeQuery gives "?k=v&..." or "".
std::string EncodePath(std::string_view path);
std::string EncodeQuery(const Request& req);

void Relay(UpstreamClient& client, UpstreamRequest request, Reply reply, RelayHandlers handlers);

}  // namespace hf::http

#endif  // HF_HTTP_RELAY_H_
