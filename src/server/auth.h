// Authentication and authorisation primitives for the REST API (SPEC §6, §9).
//
// A caller presents `Authorization: Bearer <token>`. The server keeps only
// HashToken(token) (SHA-256, hex) and looks the hash up, so a leaked database
// or log line does not leak a usable token. Each token carries one Role; the
// route's Action decides whether the role may act (403 otherwise).
//
// Role matrix (Allows):
//
//   action          admin  operator  viewer  agent
//   kRead             x       x        x
//   kWriteTasks       x       x
//   kCordonNodes      x       x
//   kWriteConfig      x
//   kManageTokens     x
//   kAgentReport      x                          x
//   kPreview          x       x
//
// The preview re-places the whole cluster twice (CPU-heavy): it is for
// those who may change the cluster, not for every dashboard (decision in
// docs/SECURITY.md).
//
// An agent token reaches only agent endpoints (registration, heartbeats,
// task status), so a compromised node cannot read or change the cluster's
// policy. Admin may do everything, agent reports included, so a human can
// replay or test an agent call.
//
// Threading: every function is thread-safe (OpenSSL 3 needs no locking setup).
#ifndef HF_SERVER_AUTH_H_
#define HF_SERVER_AUTH_H_

#include <cstddef>
#include <cstdint>
#include "core/mutex.h"
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/crypto.h"

namespace hf::server {

enum class Role { kAdmin, kOperator, kViewer, kAgent };

// "admin", "operator", "viewer", "agent".
const char* RoleName(Role r);
// The inverse of RoleName; exact, lower-case names only.
std::optional<Role> ParseRole(std::string_view s);

enum class Action {
  kRead,          // any GET under /api/v1 except agent endpoints
  kWriteTasks,    // submit, cancel tasks
  kCordonNodes,   // cordon, drain, uncordon nodes
  kWriteConfig,   // plugins, scheduler config, node registration and deletion
  kManageTokens,  // create, list, revoke tokens
  kAgentReport,   // agent registration, heartbeats, task status reports
  kPreview,       // POST /scheduler/preview: what a policy change would do
};
const char* ActionName(Action a);

// Whether `role` may perform `action`, per the matrix above.
bool Allows(Role role, Action action);

inline constexpr std::string_view kTokenPrefix = "hf_";
inline constexpr size_t kTokenRandomBytes = 32;
// "hf_" + 64 lower-case hex digits.
inline constexpr size_t kTokenLength = kTokenPrefix.size() + 2 * kTokenRandomBytes;

// A new bearer token: kTokenPrefix followed by 32 bytes from OpenSSL's CSPRNG
// in lower-case hex. The prefix lets secret scanners and humans recognise a
// leaked token. Stops the process if the CSPRNG fails: issuing a predictable
// token would be worse than not running.
std::string GenerateToken();

// What the store keeps of a token: its SHA-256 (core/crypto.h).
inline std::string HashToken(std::string_view token) { return Sha256Hex(token); }

// The longest token BearerToken accepts. Far above kTokenLength; it only
// stops hostile headers from reaching the hash and the store.
inline constexpr size_t kMaxBearerTokenLength = 512;

// The token from an Authorization header value, or nullopt unless it is
// exactly "<scheme> <token>" where the scheme is "Bearer" in any case, one
// space separates them, and the token is 1..kMaxBearerTokenLength characters
// of RFC 6750's b64token alphabet (A-Z a-z 0-9 - . _ ~ + /, then any '=').
std::optional<std::string> BearerToken(std::string_view authorization_header);

// Failed authentications, limited per client address (a token bucket per
// address): `burst` failures at once, then `per_second`. While an address
// has none left, the server answers its requests 429 with Retry-After
// without checking their token, so that guessing gains nothing; other
// addresses are not affected. A legitimate client behind the same address
// waits too (as fail2ban's lock-outs do): docs/SECURITY.md.
//
// Threading: thread-safe.
class FailureLimiter {
 public:
  FailureLimiter(double burst = 20, double per_second = 1);
  // Seconds until `address` may try again (0: now), at `now_ms`.
  double RetryAfter(const std::string& address, int64_t now_ms);
  // Counts one failed authentication from `address`.
  void Failed(const std::string& address, int64_t now_ms);

 private:
  struct Bucket {
    double tokens;
    int64_t at_ms;
  };
  void Refill(Bucket& b, int64_t now_ms) const;
  const double burst_, per_second_;
  Mutex mu_;
  // Addresses with failures; full buckets are dropped when it grows, so a
  // flood from many addresses cannot grow it without bound.
  std::unordered_map<std::string, Bucket> buckets_ HF_GUARDED_BY(mu_);
};

}  // namespace hf::server

#endif  // HF_SERVER_AUTH_H_
