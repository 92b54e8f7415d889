// A real PostgreSQL server for tests, and a fresh database on it per test.
//
// The server is the one HF_TEST_POSTGRES names (a libpq URI with a query
// string and no database, e.g.
// postgresql://postgres@/?host=/tmp/hf-pg&port=5432, where the tests may
// create and drop databases: scripts/test.sh starts one for the whole
// suite), or else one this process starts for itself with the same
// scripts/test-postgres.sh (initdb in a temporary directory, a Unix socket
// there only, run as the `postgres` user when the tests run as root), and
// stops when it exits.
//
// Threading: call from the test's thread.
#ifndef HF_STORE_TESTING_POSTGRES_H_
#define HF_STORE_TESTING_POSTGRES_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/status.h"
#include "store/postgres.h"

namespace hf::store::testing {

class TestPostgres {
 public:
  // The server, started on first use. Check error() before using it.
  static TestPostgres& Get() {
    static TestPostgres server;
    return server;
  }

  // Empty when the server is up; else why not.
  const std::string& error() const { return error_; }

  // A new, empty database: its URI.
  Result<std::string> NewDatabase() {
    if (!error_.empty()) return Unavailable(error_);
    const std::string name = "hf_test_" + std::to_string(getpid()) + "_" + std::to_string(++made_);
    HF_RETURN_IF_ERROR(Admin("DROP DATABASE IF EXISTS " + name));
    HF_RETURN_IF_ERROR(Admin("CREATE DATABASE " + name));
    return Uri(name);
  }

  // Drops a database NewDatabase made (its connections are ended first).
  void DropDatabase(const std::string& uri) {
    const size_t at = uri.rfind("dbname=");
    if (at == std::string::npos) return;
    const std::string name = uri.substr(at + 7);
    (void)Admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  }

  // A URI for database `name` on the server.
  std::string Uri(const std::string& name) const { return base_ + "&dbname=" + name; }

  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  ~TestPostgres() {
    if (dir_.empty()) return;
    (void)std::system(("'" + Script() + "' stop '" + dir_ + "' >/dev/null 2>&1").c_str());
  }

 private:
  TestPostgres() {
    if (const char* env = std::getenv("HF_TEST_POSTGRES"); env != nullptr && *env != '\0') {
      base_ = env;
      return;
    }
    Start();
  }

  // scripts/test-postgres.sh, which scripts/test.sh starts the suite's with.
  static std::string Script() { return std::string(HF_SOURCE_DIR) + "/scripts/test-postgres.sh"; }

  void Start() {
    char tmpl[] = "/tmp/hf-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    FILE* out = popen(("'" + Script() + "' start '" + dir_ + "' 2>&1").c_str(), "r");
    if (out == nullptr) {
      error_ = "cannot run " + Script();
      return;
    }
    std::string text;
    char buf[512];
    while (fgets(buf, sizeof buf, out) != nullptr) text += buf;
    const int rc = pclose(out);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (rc != 0 || !text.starts_with("postgresql://")) {
      error_ = Script() + " start failed: " + text;
      return;
    }
    base_ = text;
  }

  Status Admin(const std::string& sql) {
    Result<std::unique_ptr<PgDb>> db = PgDb::Connect(Uri("postgres"));
    if (!db.ok()) return db.status();
    return (*db)->Exec(sql);
  }

  std::string base_;   // the server's URI, without a database
  std::string dir_;    // the server this process started, if any
  std::string error_;
  int made_ = 0;
};

}  // namespace hf::store::testing

#endif  // HF_STORE_TESTING_POSTGRES_H_
