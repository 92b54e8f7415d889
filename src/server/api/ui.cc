// The web UI's files (docs/UI.md).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <string>

#include "server/api/api.h"

namespace hf::server::api {

using http::StaticFiles;

UiApi::UiApi(std::string dir) {
  if (dir.empty()) {
    // ui/ beside the binary (a build tree), else where an installed binary's
    // package puts it: BIN/../share/heteroflow/ui (/usr/share/heteroflow/ui).
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    dir = ec ? "ui" : (exe.parent_path() / "ui").string();
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "heteroflow" / "ui";
    if (!ec && !std::filesystem::is_directory(dir, ec) && std::filesystem::is_directory(installed, ec)) {
      dir = installed.string();
    }
  }
  Result<StaticFiles> ui = StaticFiles::Load(dir);
  if (ui.ok()) {
    files_ = std::move(ui).value();
    spdlog::info("server: web UI from {} ({} files)", dir, files_->file_count());
  } else {
    missing_ = ui.status().message();
    spdlog::warn("server: no web UI: {}", missing_);
  }
}

bool UiApi::IsUiPath(const Request& req) {
  if (req.method != "GET") return false;
  const std::string& p = req.path;
  return !(p == "/api" || p.rfind("/api/", 0) == 0 || p == "/livez" || p == "/readyz" ||
           p == "/metrics");
}

Response UiApi::Serve(const Request& req) const {
  if (files_) return files_->Serve(req);
  return JsonError(404, "not_found",
                   "the web UI is not installed (" + missing_ +
                       "); build it with scripts/build.sh, or pass --ui-dir");
}

}  // namespace hf::server::api
