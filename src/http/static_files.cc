#include "http/static_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/crypto.h"

namespace hf::http {
namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kMaxTotalBytes = 64ull << 20;

// "/tasks/17" -> "tasks".
std::string_view FirstSegment(std::string_view path) {
  path.remove_prefix(std::min<size_t>(1, path.size()));
  return path.substr(0, path.find('/'));
}

}  // namespace

std::string StaticFiles::ContentType(const std::string& name) {
  static const std::map<std::string, std::string, std::less<>> kTypes = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".ico", "image/x-icon"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"},
      {".ttf", "font/ttf"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const std::string ext = fs::path(name).extension().string();
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

Result<StaticFiles> StaticFiles::Load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("UI folder " + dir + " does not exist");
  if (!fs::is_regular_file(fs::path(dir) / "index.html", ec)) {
    return NotFound("UI folder " + dir + " has no index.html");
  }
  StaticFiles out;
  out.dir_ = dir;
  uintmax_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const fs::path rel = fs::relative(it->path(), dir, ec);
    if (ec) break;
    total += it->file_size(ec);
    if (total > kMaxTotalBytes) {
      return InvalidArgument("UI folder " + dir + " holds more than 64 MiB");
    }
    std::ifstream f(it->path(), std::ios::binary);
    std::ostringstream body;
    body << f.rdbuf();
    if (!f) return Unavailable("cannot read " + it->path().string());
    const std::string url = "/" + rel.generic_string();
    File file;
    file.body = body.str();
    file.content_type = ContentType(url);
    file.etag = "\"" + Sha256Hex(file.body).substr(0, 32) + "\"";
    file.immutable = url.rfind("/assets/", 0) == 0;
    out.files_.emplace(url, std::move(file));
  }
  if (ec) return Unavailable("cannot list UI folder " + dir + ": " + ec.message());
  return out;
}

Response StaticFiles::Answer(const File& f, const Request& req) const {
  Response r;
  r.content_type = f.content_type;
  r.SetHeader("ETag", f.etag);
  r.SetHeader("Cache-Control", f.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.SetHeader("X-Content-Type-Options", "nosniff");
  if (f.content_type.rfind("text/html", 0) == 0) {
    // The app loads only its own files and talks only to this server; the
    // component library sets inline styles, and charts draw data: URLs.
    r.SetHeader("Content-Security-Policy",
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                "font-src 'self' data:; frame-ancestors 'none'");
  }
  if (auto inm = req.Header("If-None-Match"); inm && *inm == f.etag) {
    r.status = 304;
    return r;
  }
  r.body = f.body;
  return r;
}

Response StaticFiles::Serve(const Request& req) const {
  const std::string path = req.path == "/" ? "/index.html" : req.path;
  if (auto it = files_.find(path); it != files_.end()) return Answer(it->second, req);
  const std::string_view first = FirstSegment(path);
  for (const char* route : kAppRoutes) {
    // One of the app's own routes: the app decides what to show.
    if (first == route) return Answer(files_.at("/index.html"), req);
  }
  return JsonError(404, "not_found", "no route or UI file " + req.path);
}

}  // namespace hf::http
