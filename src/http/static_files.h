// StaticFiles: the built admin UI (docs/UI.md), served at `/`.
//
// The UI is a single-page app built by npm at build time into a folder of
// files (index.html, assets/*.js|css|woff2...). The server reads the whole
// folder into memory when it starts — it is a few MiB, and serving from
// memory means no filesystem access per request and no path to escape — and
// answers:
//   - a GET for a file in the folder: the file, with its content type and a
//     strong ETag (If-None-Match → 304). Files under assets/ have hashed
//     names, so they are cached for a year (immutable); everything else,
//     index.html first, is revalidated on every load (no-cache);
//   - a GET for one of the app's own routes (first segment in
//     kAppRoutes: /plugins, /tasks/17...): index.html, so that a reload or a
//     bookmark works;
//   - anything else (a missing script, a typo, /livez/extra): 404, as JSON
//     like every other error, never HTML that would hide the mistake.
// No token is needed: the files hold no data; the app asks for a token and
// sends it with every API call.
//
// Threading: immutable after Load; Serve is safe from many threads.
#ifndef HF_HTTP_STATIC_FILES_H_
#define HF_HTTP_STATIC_FILES_H_

#include <map>
#include <string>

#include "core/status.h"
#include "http/server.h"

namespace hf::http {

class StaticFiles {
 public:
  // Reads every regular file under `dir` (symlinks and special files are
  // skipped). NotFound when `dir` or `dir`/index.html is missing;
  // InvalidArgument when the folder holds more than 64 MiB.
  static Result<StaticFiles> Load(const std::string& dir);

  // The answer for a GET of `req.path` (see the header comment).
  Response Serve(const Request& req) const;

  // The first path segments of the app's router (web/src/router.js).
  static constexpr const char* kAppRoutes[] = {"login", "overview", "plugins", "config",
                                               "inference", "nodes", "tasks", "jobs",
                                               "queues"};

  size_t file_count() const { return files_.size(); }
  const std::string& dir() const { return dir_; }

  // The Content-Type for a file name, by extension ("application/octet-stream"
  // when unknown). Text types carry "; charset=utf-8".
  static std::string ContentType(const std::string& name);

 private:
  struct File {
    std::string body;
    std::string content_type;
    std::string etag;  // quoted
    bool immutable = false;
  };

  Response Answer(const File& f, const Request& req) const;

  std::string dir_;
  std::map<std::string, File> files_;  // by URL path, e.g. "/assets/index-3f2a.js"
};

}  // namespace hf::http

#endif  // HF_HTTP_STATIC_FILES_H_
