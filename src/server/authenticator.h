// Authenticator: who is calling, from the request's bearer token, and
// whether their role may do what the route does (auth.h's matrix).
//
// Tokens are held in memory, by hash, and re-read from the store after each
// token change (Reload): a request is authorised without touching the
// store, so it never waits behind a write's fsync. An address that failed
// too often is answered 429 without its token being checked
// (FailureLimiter).
//
// Threading: thread-safe.
#ifndef HF_SERVER_AUTHENTICATOR_H_
#define HF_SERVER_AUTHENTICATOR_H_

#include <string>
#include <unordered_map>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "http/server.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "store/store.h"

namespace hf::server {

// The holder of a request's token.
struct Caller {
  std::string name;
  Role role = Role::kViewer;
  std::string node;  // the one node an agent token acts for
};

// Node identity (docs/SECURITY.md): an agent token acts for its own node
// only; anything else is PermissionDenied (403) and changes nothing. Admin
// tokens may act for any node.
Status ActsFor(const Caller& caller, const std::string& node);

class Authenticator {
 public:
  // `failures` counts refusals by outcome ("unauthenticated", "throttled").
  Authenticator(const store::Store& store, const Clock& clock, double failure_burst,
                Family<Counter>& failures);

  // Re-reads every token from the store.
  Status Reload() HF_EXCLUDES(mu_);
  // The caller behind the request's bearer token when its role may do
  // `action`; otherwise false, with the 401, 403 or 429 answer in `denied`.
  bool Authorize(const http::Request& req, Action action, Caller& caller,
                 http::Response& denied) const HF_EXCLUDES(mu_);

 private:
  const store::Store& store_;
  const Clock& clock_;
  Family<Counter>& failures_;
  mutable FailureLimiter limiter_;
  mutable SharedMutex mu_;
  // By SHA-256.
  std::unordered_map<std::string, store::TokenRecord> tokens_ HF_GUARDED_BY(mu_);
};

}  // namespace hf::server

#endif  // HF_SERVER_AUTHENTICATOR_H_
