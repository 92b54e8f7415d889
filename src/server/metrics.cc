#include "server/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <utility>

namespace hf::server {
namespace {

static_assert(std::atomic<double>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "hot paths must not take locks");

void AppendValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  std::to_chars_result r;
  // Shortest round-trip would print 1000000 as "1e+06"; counts read better
  // whole. Below 1e15 every integral double converts to int64 exactly.
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);
  }
  out->append(buf, r.ptr);
}

std::string ValueString(double v) {
  std::string s;
  AppendValue(&s, v);
  return s;
}

// Help text escapes backslash and newline; label values also the double quote.
void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// One line: name suffix {labels..., le="..."} value.
void AppendSample(std::string* out, std::string_view name, std::string_view suffix,
                  const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values, std::string_view le, double v) {
  out->append(name).append(suffix);
  if (!label_names.empty() || !le.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->append(label_names[i]).append("=\"");
      AppendEscaped(out, label_values[i], true);
      out->push_back('"');
    }
    if (!le.empty()) {
      if (!label_names.empty()) out->push_back(',');
      out->append("le=\"").append(le).push_back('"');
    }
    out->push_back('}');
  }
  out->push_back(' ');
  AppendValue(out, v);
  out->push_back('\n');
}

bool IsValidName(std::string_view s, bool allow_colon) {
  auto ok = [&](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (allow_colon && c == ':') || (!first && c >= '0' && c <= '9');
  };
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!ok(s[i], i == 0)) return false;
  }
  return true;
}

class CollectorFamily final : public MetricFamily {
 public:
  CollectorFamily(std::string name, std::string help, MetricType type,
                  std::vector<std::string> label_names, CollectFn fn)
      : MetricFamily(std::move(name), std::move(help), type, std::move(label_names)),
        fn_(std::move(fn)) {}

  void RenderSamples(std::string* out) const override {
    std::vector<CollectedSample> rows = fn_();
    for (const CollectedSample& r : rows) HF_CHECK(r.label_values.size() == label_names().size());
    std::sort(rows.begin(), rows.end(), [](const CollectedSample& a, const CollectedSample& b) {
      return a.label_values < b.label_values;
    });
    for (size_t i = 0; i < rows.size(); ++i) {
      HF_CHECK(i == 0 || rows[i - 1].label_values != rows[i].label_values);
      AppendSample(out, name(), "", label_names(), rows[i].label_values, {}, rows[i].value);
    }
  }

 private:
  CollectFn fn_;
};

}  // namespace

const char* MetricTypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  HF_CHECK(start > 0 && factor > 1 && count >= 1);
  std::vector<double> out;
  out.reserve(count);
  for (int i = 0; i < count; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", start * std::pow(factor, i));
    out.push_back(std::strtod(buf, nullptr));
  }
  return out;
}

std::vector<double> DefaultDurationBuckets() { return ExponentialBuckets(1e-5, 2, 21); }

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // The first bound >= v; NaN compares false everywhere, so it lands in +Inf.
  auto it = std::partition_point(bounds_->begin(), bounds_->end(),
                                 [v](double bound) { return !(v <= bound); });
  buckets_[it - bounds_->begin()].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

uint64_t Histogram::Count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) n += buckets_[i].load(std::memory_order_relaxed);
  return n;
}

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type,
                           std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

template <typename T>
Family<T>::Family(std::string name, std::string help, MetricType type,
                  std::vector<std::string> label_names, std::vector<double> bounds)
    : MetricFamily(std::move(name), std::move(help), type, std::move(label_names)),
      bounds_(std::move(bounds)) {
  if (this->label_names().empty()) Find(std::vector<std::string>{});
}

template <typename T>
T& Family<T>::With(std::initializer_list<std::string_view> label_values) {
  return Find(label_values);
}

template <typename T>
T& Family<T>::With(const std::vector<std::string>& label_values) {
  return Find(label_values);
}

template <typename T>
template <typename Range>
T& Family<T>::Find(const Range& label_values) {
  HF_CHECK(label_values.size() == label_names().size());
  {
    SharedLock lock(mu_, kShared);
    auto it = children_.find(label_values);
    if (it != children_.end()) return *it->second;
  }
  SharedLock lock(mu_, kExclusive);
  auto it = children_.find(label_values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child.reset(new T(&bounds_));  // T spelled so: only Histogram's friend may
  } else {
    child = std::make_unique<T>();
  }
  T& ref = *child;
  children_.emplace(std::vector<std::string>(label_values.begin(), label_values.end()),
                    std::move(child));
  return ref;
}

template <typename T>
void Family<T>::RenderSamples(std::string* out) const {
  SharedLock lock(mu_, kShared);
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<T, Histogram>) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= bounds_.size(); ++i) {
        cumulative += child->buckets_[i].load(std::memory_order_relaxed);
        std::string le = i < bounds_.size() ? ValueString(bounds_[i]) : "+Inf";
        AppendSample(out, name(), "_bucket", label_names(), values, le, cumulative);
      }
      AppendSample(out, name(), "_sum", label_names(), values, {}, child->Sum());
      AppendSample(out, name(), "_count", label_names(), values, {}, cumulative);
    } else {
      AppendSample(out, name(), "", label_names(), values, {}, child->Value());
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Result<Family<Counter>*> MetricsRegistry::AddCounter(std::string name, std::string help,
                                                     std::vector<std::string> label_names) {
  auto* f = new Family<Counter>(std::move(name), std::move(help), MetricType::kCounter,
                                std::move(label_names), {});
  HF_RETURN_IF_ERROR(Add(std::unique_ptr<MetricFamily>(f)));
  return f;
}

Result<Family<Gauge>*> MetricsRegistry::AddGauge(std::string name, std::string help,
                                                 std::vector<std::string> label_names) {
  auto* f = new Family<Gauge>(std::move(name), std::move(help), MetricType::kGauge,
                              std::move(label_names), {});
  HF_RETURN_IF_ERROR(Add(std::unique_ptr<MetricFamily>(f)));
  return f;
}

Result<Family<Histogram>*> MetricsRegistry::AddHistogram(std::string name, std::string help,
                                                         std::vector<std::string> label_names,
                                                         std::vector<double> bounds) {
  if (!bounds.empty() && bounds.back() == std::numeric_limits<double>::infinity()) {
    bounds.pop_back();
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      return InvalidArgument("histogram \"" + name +
                             "\": bucket bounds must be finite and strictly increasing");
    }
  }
  auto* f = new Family<Histogram>(std::move(name), std::move(help), MetricType::kHistogram,
                                  std::move(label_names), std::move(bounds));
  HF_RETURN_IF_ERROR(Add(std::unique_ptr<MetricFamily>(f)));
  return f;
}

Status MetricsRegistry::AddCollector(std::string name, std::string help, MetricType type,
                                     std::vector<std::string> label_names, CollectFn fn) {
  if (type == MetricType::kHistogram) {
    return InvalidArgument("collector \"" + name + "\" must be a counter or a gauge");
  }
  if (!fn) return InvalidArgument("collector \"" + name + "\" has no function");
  return Add(std::make_unique<CollectorFamily>(std::move(name), std::move(help), type,
                                               std::move(label_names), std::move(fn)));
}

Status MetricsRegistry::Add(std::unique_ptr<MetricFamily> family) {
  const std::string& name = family->name();
  if (!IsValidName(name, true)) {
    return InvalidArgument("metric name \"" + name + "\" must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  if (family->help_.empty()) return InvalidArgument("metric \"" + name + "\" needs a help text");
  const std::vector<std::string>& labels = family->label_names();
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i];
    if (!IsValidName(l, false) || l.starts_with("__")) {
      return InvalidArgument("metric \"" + name + "\": label name \"" + l +
                             "\" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __");
    }
    if (l == "le" && family->type() == MetricType::kHistogram) {
      return InvalidArgument("histogram \"" + name + "\": label name \"le\" is reserved");
    }
    if (std::find(labels.begin(), labels.begin() + i, l) != labels.begin() + i) {
      return InvalidArgument("metric \"" + name + "\": label name \"" + l + "\" repeated");
    }
  }
  std::vector<std::string> series{name};
  if (family->type() == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) series.push_back(name + suffix);
  }
  MutexLock lock(mu_);
  for (const std::string& s : series) {
    if (taken_.contains(s)) return AlreadyExists("metric name \"" + s + "\" is already registered");
  }
  taken_.insert(series.begin(), series.end());
  families_.push_back(std::move(family));
  return Status::Ok();
}

std::string MetricsRegistry::Render() const {
  std::vector<const MetricFamily*> families;
  {
    // Families are never removed, so the pointers outlive the lock; collectors
    // then run without it and may take their own locks freely.
    MutexLock lock(mu_);
    for (const auto& f : families_) families.push_back(f.get());
  }
  std::string out;
  for (const MetricFamily* f : families) {
    out.append("# HELP ").append(f->name()).push_back(' ');
    AppendEscaped(&out, f->help_, false);
    out.append("\n# TYPE ").append(f->name()).push_back(' ');
    out.append(MetricTypeName(f->type())).push_back('\n');
    f->RenderSamples(&out);
  }
  return out;
}

}  // namespace hf::server
