// Status and Result<T>: how expected failures (bad input, I/O, config) travel.
//
// A Status is either OK or an error code with a message a user can act on. The
// codes mirror what an API caller needs to tell apart; exactly one place (the
// server's HTTP layer) maps them to status codes. Broken invariants are not
// Statuses: they stop the process (see HF_CHECK).
#ifndef HF_CORE_STATUS_H_
#define HF_CORE_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace hf {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the input is malformed or out of range
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a unique name is taken
  kConflict,            // the request contradicts current state (e.g. binpack + spread)
  kFailedPrecondition,  // the target is in a state that does not allow it
  kResourceExhausted,   // capacity would be exceeded
  kUnavailable,         // a dependency (file, peer) cannot be reached now
  kInternal,            // a bug or an I/O error we cannot classify
  kPermissionDenied,    // the caller is known but may not do this (e.g. for another node)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", for logs and command-line errors.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// Either a value or an error Status (never an OK Status without a value).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) std::get<Status>(v_) = Internal("Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr);

}  // namespace hf

// Stops the process when an invariant that "cannot" break breaks. Never used
// for anything a user, the network or the disk can cause.
#define HF_CHECK(cond) \
  do {                 \
    if (!(cond)) ::hf::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

#define HF_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::hf::Status hf_status_ = (expr); \
    if (!hf_status_.ok()) return hf_status_; \
  } while (0)

#define HF_STATUS_CONCAT_INNER(a, b) a##b
#define HF_STATUS_CONCAT(a, b) HF_STATUS_CONCAT_INNER(a, b)
// `lhs = value of expr` when expr (a Result) is OK, otherwise returns its
// Status. lhs may declare a variable: HF_ASSIGN_OR_RETURN(auto x, F());
#define HF_ASSIGN_OR_RETURN(lhs, expr) \
  HF_ASSIGN_OR_RETURN_IMPL(HF_STATUS_CONCAT(hf_result_, __LINE__), lhs, expr)
#define HF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#endif  // HF_CORE_STATUS_H_
