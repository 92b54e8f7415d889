#include "server/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace hf::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MetricsRenderTest, CounterAndGaugeExactText) {
  MetricsRegistry r;
  auto tasks = r.AddCounter("hf_tasks_total", "Tasks by outcome.", {"outcome", "kind"});
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  auto up = r.AddGauge("hf_up", "Whether the server runs.");
  ASSERT_TRUE(up.ok());
  (*tasks)->With({"scheduled", "batch"}).Inc();
  (*tasks)->With({"scheduled", "batch"}).Inc(2);
  (*tasks)->With({"failed", "inference"}).Inc();
  (*tasks)->With(std::vector<std::string>{"cancelled", "batch"});  // created at 0
  EXPECT_EQ(r.Render(),
            "# HELP hf_tasks_total Tasks by outcome.\n"
            "# TYPE hf_tasks_total counter\n"
            "hf_tasks_total{outcome=\"cancelled\",kind=\"batch\"} 0\n"
            "hf_tasks_total{outcome=\"failed\",kind=\"inference\"} 1\n"
            "hf_tasks_total{outcome=\"scheduled\",kind=\"batch\"} 3\n"
            "# HELP hf_up Whether the server runs.\n"
            "# TYPE hf_up gauge\n"
            "hf_up 0\n");
  (*up)->With().Set(1);
  EXPECT_NE(r.Render().find("\nhf_up 1\n"), std::string::npos);
}

TEST(MetricsRenderTest, SameChildEveryTime) {
  MetricsRegistry r;
  auto* f = *r.AddGauge("g", "h", {"a"});
  Gauge& a = f->With({"x"});
  EXPECT_EQ(&a, &f->With(std::vector<std::string>{"x"}));
  EXPECT_NE(&a, &f->With({"y"}));
}

TEST(MetricsRenderTest, ValueFormatting) {
  struct Row {
    double v;
    const char* text;
  };
  for (const Row& row : std::vector<Row>{{0, "0"},
                                         {-0.0, "0"},
                                         {42, "42"},
                                         {-7, "-7"},
                                         {1e6, "1000000"},
                                         {123456789012345, "123456789012345"},
                                         {1e15, "1e+15"},
                                         {0.5, "0.5"},
                                         {1e-5, "1e-05"},
                                         {2.25, "2.25"},
                                         {0.1 + 0.2, "0.30000000000000004"},
                                         {kInf, "+Inf"},
                                         {-kInf, "-Inf"},
                                         {std::nan(""), "NaN"}}) {
    MetricsRegistry r;
    (*r.AddGauge("g", "h"))->With().Set(row.v);
    EXPECT_EQ(r.Render(), std::string("# HELP g h\n# TYPE g gauge\ng ") + row.text + "\n") << row.v;
  }
}

TEST(MetricsRenderTest, Escaping) {
  MetricsRegistry r;
  auto* f = *r.AddGauge("g", "a \\ back\nslash \"quoted\"", {"path"});
  f->With({"C:\\dir\n\"x\""}).Set(1);
  EXPECT_EQ(r.Render(),
            "# HELP g a \\\\ back\\nslash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST(MetricsHistogramTest, CumulativeBuckets) {
  MetricsRegistry r;
  auto* f = *r.AddHistogram("lat_seconds", "Latency.", {"op"}, {0.1, 1, 10});
  Histogram& h = f->With({"bind"});
  for (double v : {0.05, 0.1, 0.5, 2.0, 20.0, std::nan("")}) h.Observe(v);
  f->With({"score"}).Observe(1);
  EXPECT_EQ(h.Count(), 6u);
  EXPECT_EQ(r.Render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{op=\"bind\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{op=\"bind\",le=\"1\"} 3\n"
            "lat_seconds_bucket{op=\"bind\",le=\"10\"} 4\n"
            "lat_seconds_bucket{op=\"bind\",le=\"+Inf\"} 6\n"
            "lat_seconds_sum{op=\"bind\"} NaN\n"
            "lat_seconds_count{op=\"bind\"} 6\n"
            "lat_seconds_bucket{op=\"score\",le=\"0.1\"} 0\n"
            "lat_seconds_bucket{op=\"score\",le=\"1\"} 1\n"
            "lat_seconds_bucket{op=\"score\",le=\"10\"} 1\n"
            "lat_seconds_bucket{op=\"score\",le=\"+Inf\"} 1\n"
            "lat_seconds_sum{op=\"score\"} 1\n"
            "lat_seconds_count{op=\"score\"} 1\n");
}

TEST(MetricsHistogramTest, NoLabelsAndTrailingInfBound) {
  MetricsRegistry r;
  auto* f = *r.AddHistogram("h", "x", {}, {1, kInf});
  f->With().Observe(0.25);
  f->With().Observe(3);
  EXPECT_EQ(r.Render(),
            "# HELP h x\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 1\n"
            "h_bucket{le=\"+Inf\"} 2\n"
            "h_sum 3.25\n"
            "h_count 2\n");
}

TEST(MetricsHistogramTest, Buckets) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(ExponentialBuckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  std::vector<double> d = DefaultDurationBuckets();
  ASSERT_EQ(d.size(), 21u);
  EXPECT_EQ(d.front(), 1e-5);
  EXPECT_NEAR(d.back(), 10.48576, 1e-12);
  EXPECT_TRUE(std::is_sorted(d.begin(), d.end()));
}

TEST(MetricsConcurrencyTest, EightThreadsExactTotal) {
  MetricsRegistry r;
  auto* c = *r.AddCounter("c_total", "c", {"t"});
  auto* h = *r.AddHistogram("h", "h", {}, {0.5});
  constexpr int kThreads = 8, kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter& shared = c->With({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        shared.Inc();
        c->With({i % 2 ? "odd" : "even"}).Inc(0.5);  // looks up and creates concurrently
        h->With().Observe((i + t) % 2);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c->With({"shared"}).Value(), kThreads * kPerThread);
  EXPECT_EQ(c->With({"odd"}).Value(), kThreads * kPerThread / 4.0);
  EXPECT_EQ(h->With().Count(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(h->With().Sum(), kThreads * kPerThread / 2.0);
  std::string text = r.Render();
  EXPECT_NE(text.find("c_total{t=\"shared\"} 800000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"0.5\"} 400000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_count 800000\n"), std::string::npos) << text;
}

TEST(MetricsCollectorTest, RowsSortedAtScrapeTime) {
  MetricsRegistry r;
  int calls = 0;
  double allocated = 2;
  ASSERT_TRUE(
      r.AddCollector("hf_node_gpus", "GPUs per node.", MetricType::kGauge, {"node", "state"}, [&] {
         ++calls;
         return std::vector<CollectedSample>{
             {{"n2", "total"}, 8},
             {{"n1", "total"}, 4},
             {{"n1", "allocated"}, allocated},
         };
       }).ok());
  ASSERT_TRUE(r.AddCollector("hf_pending_tasks", "Pending tasks.", MetricType::kGauge, {}, [] {
                 return std::vector<CollectedSample>{{{}, 3}};
               }).ok());
  ASSERT_TRUE(r.AddCollector("hf_empty", "No rows yet.", MetricType::kCounter, {"x"}, [] {
                 return std::vector<CollectedSample>{};
               }).ok());
  EXPECT_EQ(calls, 0);
  std::string want =
      "# HELP hf_node_gpus GPUs per node.\n"
      "# TYPE hf_node_gpus gauge\n"
      "hf_node_gpus{node=\"n1\",state=\"allocated\"} 2\n"
      "hf_node_gpus{node=\"n1\",state=\"total\"} 4\n"
      "hf_node_gpus{node=\"n2\",state=\"total\"} 8\n"
      "# HELP hf_pending_tasks Pending tasks.\n"
      "# TYPE hf_pending_tasks gauge\n"
      "hf_pending_tasks 3\n"
      "# HELP hf_empty No rows yet.\n"
      "# TYPE hf_empty counter\n";
  EXPECT_EQ(r.Render(), want);
  allocated = 3;
  EXPECT_NE(r.Render().find("state=\"allocated\"} 3\n"), std::string::npos);
  EXPECT_EQ(calls, 2);
}

TEST(MetricsValidationTest, Names) {
  struct Row {
    std::string name;
    std::vector<std::string> labels;
    bool ok;
  };
  for (const Row& row : std::vector<Row>{{"ok_name:sub", {"a", "B_1", "_x"}, true},
                                         {"_x", {}, true},
                                         {"", {}, false},
                                         {"1abc", {}, false},
                                         {"a-b", {}, false},
                                         {"a b", {}, false},
                                         {"x", {"a:b"}, false},
                                         {"x", {"__reserved"}, false},
                                         {"x", {"1a"}, false},
                                         {"x", {""}, false},
                                         {"x", {"a", "a"}, false}}) {
    MetricsRegistry r;
    auto res = r.AddCounter(row.name, "help", row.labels);
    EXPECT_EQ(res.ok(), row.ok) << row.name << " " << res.status().ToString();
    if (!row.ok) {
      EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument);
    }
  }
  MetricsRegistry r;
  EXPECT_EQ(r.AddGauge("g", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "x", {"le"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.AddCounter("c", "x", {"le"}).ok());
  EXPECT_EQ(r.AddHistogram("h", "x", {}, {1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "x", {}, {2, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "x", {}, {std::nan("")}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "x", {}, {-kInf, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCollector("k", "x", MetricType::kHistogram, {},
                           [] { return std::vector<CollectedSample>{}; })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCollector("k", "x", MetricType::kGauge, {}, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(MetricsValidationTest, DuplicatesIncludingHistogramSeries) {
  MetricsRegistry r;
  ASSERT_TRUE(r.AddCounter("a_total", "x").ok());
  EXPECT_EQ(r.AddGauge("a_total", "x").status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.AddHistogram("lat", "x").ok());
  EXPECT_EQ(r.AddCounter("lat_count", "x").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.AddCollector("lat_bucket", "x", MetricType::kGauge, {},
                           [] { return std::vector<CollectedSample>{}; })
                .code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.AddGauge("q_sum", "x").ok());
  EXPECT_EQ(r.AddHistogram("q", "x").status().code(), StatusCode::kAlreadyExists);
  // Refused families leave nothing behind.
  EXPECT_EQ(r.Render().find("# TYPE lat_count"), std::string::npos);
}

TEST(MetricsDeathTest, WrongLabelCount) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MetricsRegistry r;
  auto* f = *r.AddCounter("c_total", "x", {"a"});
  EXPECT_DEATH(f->With({"x", "y"}), "invariant broken");
  EXPECT_DEATH(f->With(), "invariant broken");
  EXPECT_DEATH(f->With({"x"}).Inc(-1), "invariant broken");
  ASSERT_TRUE(r.AddCollector("k", "x", MetricType::kGauge, {"a"}, [] {
                 return std::vector<CollectedSample>{{{"x", "y"}, 1}};
               }).ok());
  EXPECT_DEATH(r.Render(), "invariant broken");
}

}  // namespace
}  // namespace hf::server
