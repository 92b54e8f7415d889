// Prometheus metrics for the server: counters, gauges and histograms kept in
// process, plus gauges computed at scrape time, rendered in the text
// exposition format 0.0.4 (what GET /metrics serves).
//
// Shape. A family has a name, a help text, a type and a fixed list of label
// names. Its children are the time series, one per tuple of label values:
//   auto* placed = *registry.AddCounter("hf_tasks_total", "Tasks by outcome.",
//                                       {"outcome"});
//   Counter& scheduled = placed->With({"scheduled"});  // cache this reference
//   scheduled.Inc();
// A label-less family's one child, With(), exists from registration (renders 0).
//
// Errors. Registration returns InvalidArgument for a metric name outside
// [a-zA-Z_:][a-zA-Z0-9_:]*, a label name outside [a-zA-Z_][a-zA-Z0-9_]*, one
// starting "__" or repeated, "le" on a histogram, an empty help, or bounds not
// finite and strictly increasing (a trailing +Inf is dropped: +Inf is always
// the last bucket); AlreadyExists when a name is taken, a histogram's _bucket,
// _sum and _count included. Statuses, not checks, since names may one day come
// from configuration; constant names write HF_CHECK(r.ok()). Program misuse
// stops the process (HF_CHECK): With() with the wrong number of values, a
// negative Counter::Inc, a collector row of the wrong width or repeated.
//
// Threading and cost. All thread-safe. Inc, Set and Observe are lock-free
// relaxed atomics (a compare-exchange loop for doubles) on 64-byte-aligned
// children, so hot children never share a cache line. With() takes a shared
// lock to find a child, an exclusive one only to create it; children are never
// removed, so hot paths look up once and keep the reference. A histogram's
// _count is the sum of its buckets (so always equals the +Inf bucket); _sum
// may miss an observation that races the scrape.
//
// Output. Families in registration order, children sorted by label values.
// Values print shortest round-trip, whole numbers below 1e15 as integers
// ("1000000", not "1e+06"), and "+Inf", "-Inf", "NaN". Counter names end in
// "_total" by convention and are printed exactly as registered.
#ifndef HF_SERVER_METRICS_H_
#define HF_SERVER_METRICS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>

#include <set>
#include "core/mutex.h"
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hf::server {

enum class MetricType { kCounter, kGauge, kHistogram };
// "counter", "gauge", "histogram": the word on the # TYPE line.
const char* MetricTypeName(MetricType t);

// The Content-Type of Render()'s output.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// `count` bounds start, start*factor, ... (client_golang's helper), each
// rounded to 15 significant digits so "le" labels read 0.001, not
// 0.0010000000000000002. Stops the process unless start > 0, factor > 1 and
// count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Scheduling durations in seconds: 1e-5 * 2^k for k = 0..20, i.e. 10 us to
// about 10.5 s, 21 buckets. Factor 2 keeps a quantile estimate within 2x.
std::vector<double> DefaultDurationBuckets();

// A monotonic count. Inc stops the process for a negative or NaN amount.
class alignas(64) Counter {
 public:
  void Inc(double amount = 1) {
    HF_CHECK(amount >= 0);
    value_.fetch_add(amount, std::memory_order_relaxed);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down.
class alignas(64) Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Inc() { Add(1); }
  void Dec() { Add(-1); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

template <typename T>
class Family;

// Observations counted into buckets with upper bounds (inclusive, as "le"
// says) fixed by the family; values above the last bound, and NaN, go to +Inf.
class alignas(64) Histogram {
 public:
  void Observe(double v);
  uint64_t Count() const;  // the sum of all buckets
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  friend class Family<Histogram>;
  explicit Histogram(const std::vector<double>* bounds);  // owned by the family

  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_->size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// What every family shares.
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends this family's sample lines (not # HELP / # TYPE) to `out`.
  virtual void RenderSamples(std::string* out) const = 0;

 protected:
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names);

 private:
  friend class MetricsRegistry;
  std::string name_, help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

// The children of one Counter, Gauge or Histogram family.
template <typename T>
class Family final : public MetricFamily {
 public:
  // The child for these label values (in label-name order), created at zero
  // on first use. The reference stays valid as long as the registry.
  T& With(std::initializer_list<std::string_view> label_values = {});
  T& With(const std::vector<std::string>& label_values);

  void RenderSamples(std::string* out) const override;

 private:
  friend class MetricsRegistry;
  // Compares a stored tuple with any range of strings, so With({"a"}) looks
  // up without building a vector<string>.
  struct TupleLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    }
  };

  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds);
  template <typename Range>
  T& Find(const Range& label_values);

  const std::vector<double> bounds_;  // histograms only
  mutable SharedMutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>, TupleLess> children_ HF_GUARDED_BY(mu_);
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// One row of a collector: label values in label-name order, and the value.
struct CollectedSample {
  std::vector<std::string> label_values;
  double value = 0;
};
// Called by every Render(), possibly from several threads at once, so it
// must be thread-safe; it must not call into the registry. Rows may come in
// any order; each label tuple at most once.
using CollectFn = std::function<std::vector<CollectedSample>()>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each returns the new family, owned by the registry. Errors: see the top.
  Result<Family<Counter>*> AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names = {});
  Result<Family<Gauge>*> AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names = {});
  Result<Family<Histogram>*> AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names = {},
                                          std::vector<double> bounds = DefaultDurationBuckets());

  // A counter or gauge family whose rows `fn` computes at scrape time (per
  // node GPUs allocated and total, pending tasks). InvalidArgument also for a
  // histogram type or an empty `fn`.
  Status AddCollector(std::string name, std::string help, MetricType type,
                      std::vector<std::string> label_names, CollectFn fn);

  // Every family in the text exposition format 0.0.4.
  std::string Render() const;

 private:
  // Validates `family` and takes ownership, or returns why not.
  Status Add(std::unique_ptr<MetricFamily> family);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_ HF_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> taken_ HF_GUARDED_BY(mu_);  // every sample name in use
};

}  // namespace hf::server

#endif  // HF_SERVER_METRICS_H_
