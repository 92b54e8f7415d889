// A real PostgreSQL server for tests, and a fresh database on it per test.
//
// The server is the one HF_TEST_POSTGRES names (a libpq URI with a query
// string and no database, e.g.
// postgresql://postgres@/?host=/tmp/hf-pg&port=5432, where the tests may
// create and drop databases: scripts/test.sh starts one for the whole
// suite), or else one this process starts for itself: initdb in a temporary
// directory, listening on a Unix socket there only, run as the `postgres`
// user when the tests run as root (PostgreSQL refuses to run as root), and
// stopped when the process exits.
//
// Threading: call from the test's thread.
#ifndef HF_STORE_TESTING_POSTGRES_H_
#define HF_STORE_TESTING_POSTGRES_H_

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

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
    (void)std::system((as_ + "'" + bin_ + "/pg_ctl' -D '" + dir_ + "/data' -m immediate -w stop >/dev/null 2>&1").c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  TestPostgres() {
    if (const char* env = std::getenv("HF_TEST_POSTGRES"); env != nullptr && *env != '\0') {
      base_ = env;
      return;
    }
    Start();
  }

  void Start() {
    // The newest server installed (Debian: /usr/lib/postgresql/<major>/bin).
    std::vector<std::string> bins;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      if (std::filesystem::exists(e.path() / "bin" / "initdb")) bins.push_back((e.path() / "bin").string());
    }
    if (bins.empty()) {
      error_ = "no PostgreSQL server installed (/usr/lib/postgresql/*/bin/initdb); scripts/install-deps.sh installs it";
      return;
    }
    std::sort(bins.begin(), bins.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    bin_ = bins.back();
    char tmpl[] = "/tmp/hf-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr || chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        error_ = "running as root needs the postgres user to run the server as";
        return;
      }
      as_ = "runuser -u postgres -- ";
    }
    // The logs: initdb's written by this process, the server's by the server.
    const std::string init = as_ + "'" + bin_ + "/initdb' -D '" + dir_ + "/data' -U postgres -A trust -E UTF8" +
                             " --locale=C --no-sync >'" + dir_ + "/initdb.log' 2>&1";
    if (std::system(init.c_str()) != 0) {
      error_ = "initdb failed: " + Tail(dir_ + "/initdb.log");
      return;
    }
    const std::string start = as_ + "'" + bin_ + "/pg_ctl' -D '" + dir_ + "/data' -l '" + dir_ +
                              "/server.log' -w -o \"-k " + dir_ +
                              " -p 5432 -c listen_addresses='' -c fsync=off -c max_connections=200\"" +
                              " start >/dev/null 2>&1";
    if (std::system(start.c_str()) != 0) {
      error_ = "the PostgreSQL server did not start: " + Tail(dir_ + "/server.log");
      return;
    }
    base_ = "postgresql://postgres@/?host=" + dir_ + "&port=5432";
  }

  // The end of a log file, for a message.
  static std::string Tail(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 600 ? text.substr(text.size() - 600) : text;
  }

  Status Admin(const std::string& sql) {
    Result<std::unique_ptr<PgDb>> db = PgDb::Connect(Uri("postgres"));
    if (!db.ok()) return db.status();
    return (*db)->Exec(sql);
  }

  std::string base_;   // the server's URI, without a database
  std::string dir_;    // the server this process started, if any
  std::string bin_;    // its binaries
  std::string as_;     // the command prefix that runs them as postgres
  std::string error_;
  int made_ = 0;
};

}  // namespace hf::store::testing

#endif  // HF_STORE_TESTING_POSTGRES_H_
