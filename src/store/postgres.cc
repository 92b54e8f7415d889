#include "store/postgres.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hf::store {

bool IsPostgresUri(std::string_view target) {
  return target.starts_with("postgresql://") || target.starts_with("postgres://");
}

namespace {

// The values of the options that hold secrets, as libpq reads `uri`;
// nullopt when it cannot read it.
std::optional<std::vector<std::string>> SecretsOf(const std::string& uri) {
  std::vector<std::string> out;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  PQfreemem(err);
  if (opts == nullptr) return std::nullopt;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    const std::string_view key = o->keyword;
    if ((key == "password" || key == "sslpassword") && o->val != nullptr && *o->val != '\0') {
      out.emplace_back(o->val);
    }
  }
  PQconninfoFree(opts);
  return out;
}

}  // namespace

std::string RedactedUri(std::string_view uri) {
  // Rebuilt from what libpq reads, so that nothing of a password survives,
  // however it was written (percent-encoded, with '@' or '/' in it, as a
  // parameter). A URI libpq cannot read is not echoed at all.
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(std::string(uri).c_str(), &err);
  PQfreemem(err);
  if (opts == nullptr) return "postgresql://(a URI libpq cannot read)";
  std::string user, host, port, dbname, params;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || *o->val == '\0') continue;
    const std::string_view key = o->keyword;
    if (key == "user") {
      user = o->val;
    } else if (key == "host") {
      host = o->val;
    } else if (key == "port") {
      port = o->val;
    } else if (key == "dbname") {
      dbname = o->val;
    } else if (key == "password" || key == "sslpassword") {
      params += std::string(params.empty() ? "?" : "&") + o->keyword + "=xxx";
    } else if (key == "target_session_attrs" || key == "sslmode" || key == "application_name") {
      params += std::string(params.empty() ? "?" : "&") + o->keyword + "=" + o->val;
    }
  }
  PQconninfoFree(opts);
  const bool socket = host.starts_with('/');
  std::string out = "postgresql://" + user + (user.empty() ? "" : "@");
  if (socket) {
    params += std::string(params.empty() ? "?" : "&") + "host=" + host + (port.empty() ? "" : "&port=" + port);
  } else {
    // host1:port1,host2:port2 (one port for all, or one each).
    const auto split = [](const std::string& v) {
      std::vector<std::string> parts;
      size_t from = 0;
      for (size_t comma; (comma = v.find(',', from)) != std::string::npos; from = comma + 1) {
        parts.push_back(v.substr(from, comma - from));
      }
      parts.push_back(v.substr(from));
      return parts;
    };
    const std::vector<std::string> hosts = split(host), ports = port.empty() ? std::vector<std::string>{} : split(port);
    for (size_t i = 0; i < hosts.size(); ++i) {
      out += (i > 0 ? "," : "") + hosts[i];
      if (!ports.empty()) out += ":" + ports[std::min(i, ports.size() - 1)];
    }
  }
  return out + "/" + dbname + params;
}

std::string PostgresParameters(std::string_view sql, std::vector<int>& order) {
  std::string out;
  out.reserve(sql.size() + 8);
  order.clear();
  int highest = 0;  // SQLite numbers a bare ? one above the highest so far
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote != 0) {
      out += c;
      if (c == quote) quote = 0;  // a doubled quote reopens at once
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    int number = 0;
    size_t j = i + 1;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') number = number * 10 + (sql[j++] - '0');
    if (j == i + 1) number = highest + 1;
    highest = std::max(highest, number);
    i = j - 1;
    auto it = std::find(order.begin(), order.end(), number);
    if (it == order.end()) {
      order.push_back(number);
      it = order.end() - 1;
    }
    out += "$" + std::to_string(it - order.begin() + 1);
  }
  return out;
}

namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

bool Succeeded(const PGresult* r) {
  const ExecStatusType s = PQresultStatus(r);
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

StatusCode CodeOf(std::string_view state) {
  if (state == "23505") return StatusCode::kAlreadyExists;
  if (state == "23503") return StatusCode::kFailedPrecondition;
  if (state == "23514" || state == "23502") return StatusCode::kInvalidArgument;
  if (state == "P0001") return StatusCode::kResourceExhausted;
  // heteroflow_fence and heteroflow_renew: a deposed leader's epoch.
  if (state == kFencedState) return StatusCode::kFailedPrecondition;
  if (state.starts_with("08") || state.starts_with("53") || state == "40001" || state == "40P01" ||
      state == "55P03" || state == "57014" || state == "57P01" || state == "57P02" || state == "57P03" ||
      state == "25006") {
    return StatusCode::kUnavailable;
  }
  return StatusCode::kInternal;
}

}  // namespace

class PgStmt final : public StmtImpl {
 public:
  PgStmt(PgDb* db, std::shared_ptr<const PgDb::Prepared> prepared, std::string sql)
      : db_(db), prepared_(std::move(prepared)), sql_(std::move(sql)), values_(prepared_->order.size()) {}

  void Bind(int pos, int64_t v) override { Set(pos, std::to_string(v)); }
  void Bind(int pos, std::string_view v) override { Set(pos, std::string(v)); }
  void BindNull(int pos) override { Set(pos, std::nullopt); }

  Result<bool> Step() override {
    if (!result_) {
      if (db_->Broken()) return db_->StatusOf(nullptr, "run \"" + sql_.substr(0, 60) + "\"");
      std::vector<const char*> params;
      for (const auto& v : values_) {
        if (v && v->find('\0') != std::string::npos) {
          return InvalidArgument("a text value holds a NUL character, which PostgreSQL cannot store");
        }
      }
      params.reserve(values_.size());
      for (const auto& v : values_) params.push_back(v ? v->c_str() : nullptr);
      result_.reset(PQexecPrepared(db_->conn_, prepared_->name.c_str(), static_cast<int>(params.size()),
                                   params.data(), nullptr, nullptr, 0));
      db_->NoteTransaction();
      if (!result_ || !Succeeded(result_.get())) {
        Status s = db_->StatusOf(result_.get(), "run \"" + sql_.substr(0, 60) + "\"");
        result_.reset();
        return s;
      }
      db_->changes_ = std::atoi(PQcmdTuples(result_.get()));
      row_ = 0;
    } else {
      ++row_;
    }
    return row_ < PQntuples(result_.get());
  }

  int64_t Int(int col) const override {
    return std::strtoll(PQgetvalue(result_.get(), row_, col), nullptr, 10);
  }
  std::string Text(int col) const override {
    return std::string(PQgetvalue(result_.get(), row_, col),
                       static_cast<size_t>(PQgetlength(result_.get(), row_, col)));
  }
  bool IsNull(int col) const override { return PQgetisnull(result_.get(), row_, col) != 0; }
  const std::string& sql() const override { return sql_; }

 private:
  // A number the statement does not use is ignored, as SQLite's unused
  // bindings change nothing.
  void Set(int pos, std::optional<std::string> v) {
    const auto& order = prepared_->order;
    if (auto it = std::find(order.begin(), order.end(), pos); it != order.end()) {
      values_[size_t(it - order.begin())] = std::move(v);
    }
  }

  PgDb* db_;
  std::shared_ptr<const PgDb::Prepared> prepared_;  // kept should the cache be emptied
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  ResultPtr result_;
  int row_ = 0;
};

Result<std::unique_ptr<PgDb>> PgDb::Connect(const std::string& uri) {
  // Defaults the URI may override (it comes last): a server that does not
  // answer is given up on, and a silent TCP peer is noticed. A session
  // that sits in a transaction for 5 s (its process frozen, docs/HA.md) is
  // ended by the server, so its row locks do not hold up a new leader.
  const char* keys[] = {"connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "options", "dbname", nullptr};
  const char* values[] = {"10", "10", "5", "3", "-c idle_in_transaction_session_timeout=5000",
                          uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Unavailable("connect to " + RedactedUri(uri) + ": out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    // libpq quotes pieces of a URI it cannot read, which may be a
    // password's: its message is not passed on then, and the passwords of
    // one it can read are taken out of it.
    const std::optional<std::vector<std::string>> secrets = SecretsOf(uri);
    if (!secrets) msg = "libpq cannot read the URI (check its syntax and percent-encoding)";
    for (const std::string& secret : secrets.value_or(std::vector<std::string>{})) {
      for (size_t p = msg.find(secret); p != std::string::npos; p = msg.find(secret, p)) {
        msg.replace(p, secret.size(), "xxx");
      }
    }
    return Unavailable("connect to " + RedactedUri(uri) + ": " + msg);
  }
  std::unique_ptr<PgDb> db(new PgDb(conn, uri));
  // Notices (e.g. "relation already exists, skipping") are not errors.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  HF_RETURN_IF_ERROR(db->Exec("SET client_min_messages = warning"));
  return db;
}

PgDb::~PgDb() { PQfinish(conn_); }

Status PgDb::StatusOf(const PGresult* res, std::string_view what) const {
  std::string text(what);
  text += ": ";
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = res != nullptr ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (primary != nullptr) {
    text += primary;
  } else {
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    text += msg.empty() ? "no answer from the server" : msg;
  }
  if (state == nullptr) {
    // No SQLSTATE: the connection, not the statement.
    return PQstatus(conn_) == CONNECTION_OK ? Internal(std::move(text)) : Unavailable(std::move(text));
  }
  // A connection the error closed (a FATAL) is for retrying, whatever its code.
  const StatusCode code = PQstatus(conn_) != CONNECTION_OK ? StatusCode::kUnavailable : CodeOf(state);
  if (code == StatusCode::kUnavailable) text += " (retry)";
  return Status(code, std::move(text));
}

namespace {

// Whether `sql` (one SELECT of one boolean) answered true.
Result<bool> TrueOf(PGconn* conn, const std::string& sql) {
  ResultPtr r(PQexec(conn, sql.c_str()));
  if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    return Unavailable(std::string("\"") + sql + "\" failed");
  }
  return std::string_view(PQgetvalue(r.get(), 0, 0)) == "t";
}

std::string TryLockSql(int64_t key) { return "SELECT pg_try_advisory_lock(" + std::to_string(key) + ")"; }

}  // namespace

Status PgDb::HoldLock(int64_t key) {
  HF_RETURN_IF_ERROR(EnsureConnected());
  HF_ASSIGN_OR_RETURN(bool had, TrueOf(conn_, TryLockSql(key)));
  if (!had) return FailedPrecondition("another session holds the lock");
  held_lock_ = key;
  lock_lost_ = false;
  return Status::Ok();
}

Status PgDb::EnsureConnected() {
  if (PQstatus(conn_) == CONNECTION_OK) {
    if (!lock_lost_) return Status::Ok();
    // Lost to another session at the last reconnect: it may be free again.
    Result<bool> had = TrueOf(conn_, TryLockSql(*held_lock_));
    if (had.ok() && *had) {
      lock_lost_ = false;
      return Status::Ok();
    }
    return Unavailable("another server took this database's lock while the connection was down");
  }
  PQreset(conn_);
  prepared_.clear();  // they went with the session
  in_transaction_ = false;
  if (PQstatus(conn_) != CONNECTION_OK) return StatusOf(nullptr, "reconnect to " + RedactedUri(uri_));
  ResultPtr r(PQexec(conn_, "SET client_min_messages = warning"));
  if (lock_timeout_ms_ >= 0) {
    r.reset(PQexec(conn_, ("SET lock_timeout = " + std::to_string(lock_timeout_ms_)).c_str()));
  }
  for (const std::string& channel : channels_) r.reset(PQexec(conn_, ("LISTEN " + channel).c_str()));
  if (held_lock_) {
    Result<bool> had = TrueOf(conn_, TryLockSql(*held_lock_));
    lock_lost_ = !had.ok() || !*had;
    if (lock_lost_) return Unavailable("another server took this database's lock while the connection was down");
  }
  return Status::Ok();
}

Status PgDb::Listen(const std::string& channel) {
  HF_RETURN_IF_ERROR(Exec("LISTEN " + channel));
  channels_.push_back(channel);
  return Status::Ok();
}

Result<std::optional<std::string>> PgDb::WaitForNotification(std::chrono::milliseconds timeout) {
  HF_RETURN_IF_ERROR(EnsureConnected());
  const auto take = [this]() -> std::optional<std::string> {
    PGnotify* n = PQnotifies(conn_);
    if (n == nullptr) return std::nullopt;
    std::string payload = n->extra != nullptr ? n->extra : "";
    PQfreemem(n);
    return payload;
  };
  if (std::optional<std::string> p = take()) return p;
  pollfd pfd{.fd = PQsocket(conn_), .events = POLLIN, .revents = 0};
  if (pfd.fd < 0) return StatusOf(nullptr, "wait for a notification");
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) return Unavailable(std::string("poll: ") + std::strerror(errno));
  if (ready <= 0) return std::optional<std::string>();
  if (PQconsumeInput(conn_) == 0) return StatusOf(nullptr, "wait for a notification");
  return take();
}

bool PgDb::Broken() const { return PQstatus(conn_) != CONNECTION_OK; }

void PgDb::NoteTransaction() {
  // Unknown once the connection is gone: the last known state stands.
  if (!Broken()) in_transaction_ = PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

Status PgDb::Exec(const std::string& sql) {
  if (Broken() && in_transaction_) {
    // The transaction went with the connection: only its end is taken.
    if (sql == "ROLLBACK") in_transaction_ = false;
    return StatusOf(nullptr, "execute \"" + sql.substr(0, 60) + "\"");
  }
  if (!in_transaction_) HF_RETURN_IF_ERROR(EnsureConnected());
  ResultPtr r(PQexec(conn_, sql.c_str()));
  NoteTransaction();
  if (!r || !Succeeded(r.get())) return StatusOf(r.get(), "execute \"" + sql.substr(0, 60) + "\"");
  changes_ = std::atoi(PQcmdTuples(r.get()));
  return Status::Ok();
}

Result<Stmt> PgDb::Prepare(std::string_view sql) {
  if (Broken() && in_transaction_) return StatusOf(nullptr, "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
  if (!in_transaction_) HF_RETURN_IF_ERROR(EnsureConnected());
  auto it = prepared_.find(std::string(sql));
  if (it == prepared_.end()) {
    auto p = std::make_shared<Prepared>();
    p->name = "hf_" + std::to_string(++statements_);
    const std::string text = PostgresParameters(sql, p->order);
    ResultPtr r(PQprepare(conn_, p->name.c_str(), text.c_str(), 0, nullptr));
    NoteTransaction();
    if (!r || !Succeeded(r.get())) return StatusOf(r.get(), "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
    it = prepared_.emplace(std::string(sql), std::move(p)).first;
  }
  return Stmt(std::make_unique<PgStmt>(this, it->second, it->first));
}

bool PgDb::InTransaction() const { return in_transaction_; }

Status PgDb::SetLockTimeout(int ms) {
  HF_RETURN_IF_ERROR(Exec("SET lock_timeout = " + std::to_string(ms)));
  lock_timeout_ms_ = ms;
  return Status::Ok();
}

}  // namespace hf::store
