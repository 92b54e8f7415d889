#include "http/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hf::http {
namespace {

namespace fs = std::filesystem;

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("hf_ui_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "assets");
    Write("index.html", "<!doctype html><div id=app></div>");
    Write("assets/index-3f2a.js", "console.log(1)");
    Write("assets/index-9b1c.css", "body{}");
    Write("favicon.svg", "<svg/>");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }

  static Request Get(const std::string& path) {
    Request r;
    r.method = "GET";
    r.path = path;
    return r;
  }

  fs::path dir_;
};

TEST_F(StaticFilesTest, ServesFilesWithTypesAndCaching) {
  auto ui = StaticFiles::Load(dir_.string());
  ASSERT_TRUE(ui.ok()) << ui.status().ToString();
  EXPECT_EQ(ui->file_count(), 4u);

  Response index = ui->Serve(Get("/"));
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><div id=app></div>");
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index.Header("Cache-Control").value_or(""), "no-cache");
  EXPECT_NE(index.Header("Content-Security-Policy").value_or("").find("default-src 'self'"),
            std::string::npos);

  Response js = ui->Serve(Get("/assets/index-3f2a.js"));
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "console.log(1)");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js.Header("Cache-Control").value_or(""), "public, max-age=31536000, immutable");
  EXPECT_FALSE(js.Header("Content-Security-Policy").has_value());
  EXPECT_EQ(ui->Serve(Get("/assets/index-9b1c.css")).content_type, "text/css; charset=utf-8");
  EXPECT_EQ(ui->Serve(Get("/favicon.svg")).content_type, "image/svg+xml");
}

TEST_F(StaticFilesTest, AppRoutesGetIndexButMissingFilesAre404) {
  auto ui = StaticFiles::Load(dir_.string());
  ASSERT_TRUE(ui.ok());
  for (const char* route : {"/plugins", "/tasks/17", "/overview/", "/login"}) {
    Response r = ui->Serve(Get(route));
    EXPECT_EQ(r.status, 200) << route;
    EXPECT_EQ(r.body, "<!doctype html><div id=app></div>") << route;
  }
  for (const char* missing : {"/assets/gone.js", "/assets/x", "/robots.txt", "/a/b.png", "/nope",
                              "/API/V1/PLUGINS", "/livez/extra", "/pluginsx"}) {
    Response r = ui->Serve(Get(missing));
    EXPECT_EQ(r.status, 404) << missing;
    EXPECT_EQ(r.content_type, "application/json") << missing;
  }
}

TEST_F(StaticFilesTest, EtagAnswers304AndChangesWithContent) {
  auto ui = StaticFiles::Load(dir_.string());
  ASSERT_TRUE(ui.ok());
  Response first = ui->Serve(Get("/assets/index-3f2a.js"));
  const std::string etag(first.Header("ETag").value_or(""));
  ASSERT_GE(etag.size(), 3u);
  EXPECT_EQ(etag.front(), '"');
  Request again = Get("/assets/index-3f2a.js");
  again.headers.emplace_back("If-None-Match", etag);
  Response cached = ui->Serve(again);
  EXPECT_EQ(cached.status, 304);
  EXPECT_TRUE(cached.body.empty());
  again.headers.back().second = "\"other\"";
  EXPECT_EQ(ui->Serve(again).status, 200);

  Write("assets/index-3f2a.js", "console.log(2)");
  auto reloaded = StaticFiles::Load(dir_.string());
  ASSERT_TRUE(reloaded.ok());
  EXPECT_NE(reloaded->Serve(Get("/assets/index-3f2a.js")).Header("ETag").value_or(""), etag);
}

TEST_F(StaticFilesTest, MissingFolderOrIndexIsNotFound) {
  EXPECT_EQ(StaticFiles::Load((dir_ / "nope").string()).status().code(), StatusCode::kNotFound);
  fs::remove(dir_ / "index.html");
  auto r = StaticFiles::Load(dir_.string());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("index.html"), std::string::npos);
}

TEST_F(StaticFilesTest, SymlinksAreNotServed) {
  fs::create_symlink("/etc/hostname", dir_ / "host.txt");
  auto ui = StaticFiles::Load(dir_.string());
  ASSERT_TRUE(ui.ok());
  EXPECT_EQ(ui->Serve(Get("/host.txt")).status, 404);
}

}  // namespace
}  // namespace hf::http
