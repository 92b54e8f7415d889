#include "server/auth.h"

#include <algorithm>
#include <array>

#include "core/crypto.h"
#include "core/status.h"

namespace hf::server {
namespace {

bool IsB64TokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kOperator:
      return "operator";
    case Role::kViewer:
      return "viewer";
    case Role::kAgent:
      return "agent";
  }
  return "unknown";
}

std::optional<Role> ParseRole(std::string_view s) {
  for (Role r : {Role::kAdmin, Role::kOperator, Role::kViewer, Role::kAgent}) {
    if (s == RoleName(r)) return r;
  }
  return std::nullopt;
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kRead:
      return "read";
    case Action::kWriteTasks:
      return "write_tasks";
    case Action::kCordonNodes:
      return "cordon_nodes";
    case Action::kWriteConfig:
      return "write_config";
    case Action::kManageTokens:
      return "manage_tokens";
    case Action::kAgentReport:
      return "agent_report";
    case Action::kPreview:
      return "preview";
  }
  return "unknown";
}

bool Allows(Role role, Action action) {
  switch (role) {
    case Role::kAdmin:
      return true;
    case Role::kOperator:
      return action == Action::kRead || action == Action::kWriteTasks ||
             action == Action::kCordonNodes || action == Action::kPreview;
    case Role::kViewer:
      return action == Action::kRead;
    case Role::kAgent:
      return action == Action::kAgentReport;
  }
  return false;
}

std::string GenerateToken() { return std::string(kTokenPrefix) + RandomHex(kTokenRandomBytes); }

std::optional<std::string> BearerToken(std::string_view header) {
  static constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (Lower(header[i]) != kScheme[i]) return std::nullopt;
  }
  std::string_view token = header.substr(kScheme.size());
  if (token.empty() || token.size() > kMaxBearerTokenLength) return std::nullopt;
  size_t i = 0;
  while (i < token.size() && IsB64TokenChar(token[i])) ++i;
  // b64token allows '=' padding only at the end, and needs one real char.
  if (i == 0) return std::nullopt;
  while (i < token.size() && token[i] == '=') ++i;
  if (i != token.size()) return std::nullopt;
  return std::string(token);
}

FailureLimiter::FailureLimiter(double burst, double per_second)
    : burst_(burst), per_second_(per_second) {}

void FailureLimiter::Refill(Bucket& b, int64_t now_ms) const {
  if (now_ms > b.at_ms) {
    b.tokens = std::min(burst_, b.tokens + double(now_ms - b.at_ms) / 1000.0 * per_second_);
    b.at_ms = now_ms;
  }
}

double FailureLimiter::RetryAfter(const std::string& address, int64_t now_ms) {
  MutexLock lock(mu_);
  auto it = buckets_.find(address);
  if (it == buckets_.end()) return 0;
  Refill(it->second, now_ms);
  return it->second.tokens >= 1 ? 0 : (1 - it->second.tokens) / per_second_;
}

void FailureLimiter::Failed(const std::string& address, int64_t now_ms) {
  MutexLock lock(mu_);
  if (buckets_.size() > 10000) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      Refill(it->second, now_ms);
      it = it->second.tokens >= burst_ ? buckets_.erase(it) : std::next(it);
    }
  }
  auto [it, fresh] = buckets_.try_emplace(address, Bucket{burst_, now_ms});
  Refill(it->second, now_ms);
  it->second.tokens = std::max(0.0, it->second.tokens - 1);
}

}  // namespace hf::server
