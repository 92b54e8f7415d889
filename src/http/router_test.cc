#include "http/router.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hf::http {
namespace {

Handler Echo(std::string name) {
  return [name](const Request& req) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [k, v] : req.path_params) params[k] = v;
    return JsonResponse(200, {{"route", name}, {"params", params}});
  };
}

Request Req(std::string method, std::string path) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(router_.Add("GET", "/api/v1/tasks/{id}", Echo("get_task")).ok());
    ASSERT_TRUE(router_.Add("DELETE", "/api/v1/tasks/{id}", Echo("delete_task")).ok());
    ASSERT_TRUE(router_.Add("POST", "/api/v1/tasks/batch", Echo("batch")).ok());
    ASSERT_TRUE(router_.Add("GET", "/api/v1/tasks", Echo("list_tasks")).ok());
    ASSERT_TRUE(router_.Add("POST", "/api/v1/tasks", Echo("submit")).ok());
    ASSERT_TRUE(router_.Add("PUT", "/api/v1/nodes/{node}/gpus/{gpu}", Echo("gpu")).ok());
    ASSERT_TRUE(router_.Add("GET", "/", Echo("root")).ok());
  }

  nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }

  Router router_;
};

TEST_F(RouterTest, ExactAndParamRoutes) {
  struct Row {
    std::string method, path, route;
    nlohmann::json params;
  };
  const Row rows[] = {
      {"GET", "/api/v1/tasks", "list_tasks", nlohmann::json::object()},
      {"POST", "/api/v1/tasks", "submit", nlohmann::json::object()},
      {"GET", "/api/v1/tasks/t-1", "get_task", {{"id", "t-1"}}},
      {"DELETE", "/api/v1/tasks/t 2", "delete_task", {{"id", "t 2"}}},
      {"PUT", "/api/v1/nodes/n1/gpus/3", "gpu", {{"node", "n1"}, {"gpu", "3"}}},
      {"GET", "/", "root", nlohmann::json::object()},
  };
  for (const Row& row : rows) {
    Response r = router_.Dispatch(Req(row.method, row.path));
    ASSERT_EQ(r.status, 200) << row.method << " " << row.path << ": " << r.body;
    EXPECT_EQ(Body(r)["route"], row.route) << row.path;
    EXPECT_EQ(Body(r)["params"], row.params) << row.path;
  }
}

TEST_F(RouterTest, LiteralSegmentBeatsParameter) {
  Response r = router_.Dispatch(Req("POST", "/api/v1/tasks/batch"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["route"], "batch");
  // The literal pattern owns the path, so GET is a 405 there rather than
  // silently becoming "get task named batch".
  Response get = router_.Dispatch(Req("GET", "/api/v1/tasks/batch"));
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("Allow").value_or(""), "POST");
}

TEST_F(RouterTest, UnknownPathIs404) {
  for (const char* path : {"/api/v1/nope", "/api/v1/tasks/", "/api/v1/tasks/a/b", "/api//tasks",
                           "/api/v1/nodes/n1/gpus/"}) {
    Response r = router_.Dispatch(Req("GET", path));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(Body(r)["error"]["code"], "not_found") << path;
  }
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  Response r = router_.Dispatch(Req("PATCH", "/api/v1/tasks/t1"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(Body(r)["error"]["code"], "method_not_allowed");
  EXPECT_EQ(r.Header("allow").value_or(""), "DELETE, GET");
  Response r2 = router_.Dispatch(Req("DELETE", "/api/v1/tasks"));
  EXPECT_EQ(r2.status, 405);
  EXPECT_EQ(r2.Header("Allow").value_or(""), "GET, POST");
}

TEST_F(RouterTest, RejectsBadAndDuplicatePatterns) {
  EXPECT_EQ(router_.Add("GET", "/api/v1/tasks/{name}", Echo("x")).code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(router_.Add("PUT", "/api/v1/tasks/{name}", Echo("x")).ok());
  for (const char* bad :
       {"api/v1", "", "/a//b", "/a/{}", "/a/{x", "/a/x}", "/a/{x}{y}", "/a/{x}/{x}", "/a/pre{x}"}) {
    EXPECT_EQ(router_.Add("GET", bad, Echo("x")).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(router_.Add("", "/x", Echo("x")).code(), StatusCode::kInvalidArgument);
}

TEST_F(RouterTest, HandlerSeesRequestFieldsAndExceptionsPropagate) {
  Router r;
  ASSERT_TRUE(r.Add("POST", "/x/{id}", [](const Request& req) {
                 if (req.body == "boom") throw std::runtime_error("boom");
                 Response res;
                 res.body = req.body + ":" + std::string(req.Param("id"));
                 return res;
               }).ok());
  Request req = Req("POST", "/x/7");
  req.body = "hello";
  EXPECT_EQ(r.AsHandler()(req).body, "hello:7");
  req.body = "boom";
  EXPECT_THROW(r.Dispatch(req), std::runtime_error);
}

}  // namespace
}  // namespace hf::http
