#include "sim/openb_reader.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <span>
#include <unordered_map>

namespace hf::sim {
namespace {

struct Column {
  std::string_view name;
  bool required;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A forward-only view of a CSV text whose columns are known by name. Fields
// are string_views into the text: no copy per field.
class CsvCursor {
 public:
  CsvCursor(std::string_view text, const std::string& source, std::span<const Column> columns)
      : text_(text), source_(source), columns_(columns), where_(columns.size(), -1) {}

  // Reads the header line and maps each known column to its position.
  Status ReadHeader() {
    if (text_.starts_with("\xEF\xBB\xBF")) text_.remove_prefix(3);  // a BOM from spreadsheet tools
    if (!NextLine()) return InvalidArgument(source_ + ":1: empty file; expected a header line");
    for (size_t pos = 0; pos < fields_.size(); ++pos) {
      const std::string_view name = fields_[pos];
      size_t c = 0;
      while (c < columns_.size() && columns_[c].name != name) ++c;
      if (c == columns_.size())
        return Error("unknown column '" + std::string(name) + "'" + Expected());
      if (where_[c] >= 0) return Error("column '" + std::string(name) + "' appears twice");
      where_[c] = int(pos);
    }
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].required && where_[c] < 0) {
        return Error("missing column '" + std::string(columns_[c].name) + "'" + Expected());
      }
    }
    header_fields_ = fields_.size();
    return Status::Ok();
  }

  // Moves to the next non-blank row; sets `more` to false at the end.
  Status Next(bool& more) {
    more = NextLine();
    if (more && fields_.size() != header_fields_) {
      return Error("expected " + std::to_string(header_fields_) + " fields, got " +
                   std::to_string(fields_.size()));
    }
    return Status::Ok();
  }

  bool has(size_t c) const { return where_[c] >= 0; }
  std::string_view field(size_t c) const {
    return has(c) ? fields_[size_t(where_[c])] : std::string_view();
  }
  int line() const { return line_; }

  Status Error(const std::string& what) const {
    return InvalidArgument(source_ + ":" + std::to_string(line_) + ": " + what);
  }

  // A non-negative decimal integer in column c; absent columns read as 0.
  Status Int(size_t c, int64_t max, int64_t& out) const {
    std::optional<int64_t> v;
    HF_RETURN_IF_ERROR(OptionalInt(c, max, /*empty_ok=*/false, v));
    out = v.value_or(0);
    return Status::Ok();
  }

  // Like Int, but an empty cell (when empty_ok) or an absent column is nullopt.
  Status OptionalInt(size_t c, int64_t max, bool empty_ok, std::optional<int64_t>& out) const {
    out.reset();
    if (!has(c)) return Status::Ok();
    const std::string_view s = field(c);
    const std::string name(columns_[c].name);
    if (s.empty()) {
      if (empty_ok) return Status::Ok();
      return Error(name + " is empty; expected an integer");
    }
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range)
      return Error(name + " '" + std::string(s) + "' is out of range");
    if (ec != std::errc() || end != s.data() + s.size()) {
      return Error(name + " '" + std::string(s) + "' is not an integer");
    }
    if (v < 0) return Error(name + " must be >= 0, got " + std::string(s));
    if (v > max)
      return Error(name + " must be <= " + std::to_string(max) + ", got " + std::string(s));
    out = v;
    return Status::Ok();
  }

 private:
  std::string Expected() const {
    std::string out = " (known columns:";
    for (const Column& c : columns_) {
      out += ' ';
      out += c.name;
    }
    return out + ")";
  }

  // Splits the next non-blank line into fields_; false at the end of the text.
  bool NextLine() {
    while (pos_ < text_.size()) {
      size_t eol = text_.find('\n', pos_);
      if (eol == std::string_view::npos) eol = text_.size();
      std::string_view line = text_.substr(pos_, eol - pos_);
      pos_ = eol + 1;
      ++line_;
      line = Trim(line);
      if (line.empty()) continue;
      fields_.clear();
      size_t start = 0;
      while (true) {
        const size_t comma = line.find(',', start);
        fields_.push_back(
            Trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      return true;
    }
    return false;
  }

  std::string_view text_;
  const std::string& source_;
  std::span<const Column> columns_;
  std::vector<int> where_;  // column -> position in the file, -1 if absent
  size_t header_fields_ = 0;
  size_t pos_ = 0;
  int line_ = 0;
  std::vector<std::string_view> fields_;
};

Status NoQuotes(const CsvCursor& csv, std::string_view s) {
  if (s.find('"') != std::string_view::npos) return csv.Error("quoted fields are not supported");
  return Status::Ok();
}

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
// Times become milliseconds; keep seconds small enough not to overflow.
constexpr int64_t kMaxSeconds = kMaxInt64 / 1000;

enum NodeCol { kSn, kNodeCpu, kNodeMem, kGpu, kModel };
constexpr std::array<Column, 5> kNodeColumns{
    {{"sn", true}, {"cpu_milli", true}, {"memory_mib", false}, {"gpu", true}, {"model", false}}};

enum PodCol {
  kName,
  kCpu,
  kMem,
  kNumGpu,
  kGpuMilli,
  kGpuSpec,
  kQos,
  kPhase,
  kCreate,
  kDelete,
  kSched
};
constexpr std::array<Column, 11> kPodColumns{{{"name", true},
                                              {"cpu_milli", true},
                                              {"memory_mib", false},
                                              {"num_gpu", true},
                                              {"gpu_milli", true},
                                              {"gpu_spec", false},
                                              {"qos", false},
                                              {"pod_phase", false},
                                              {"creation_time", false},
                                              {"deletion_time", false},
                                              {"scheduled_time", false}}};

// Rejects an empty name or one seen before.
Status CheckName(const CsvCursor& csv, std::string_view name, const char* what,
                 std::unordered_map<std::string_view, int>& seen) {
  if (name.empty()) return csv.Error(std::string(what) + " name is empty");
  HF_RETURN_IF_ERROR(NoQuotes(csv, name));
  auto [it, inserted] = seen.emplace(name, csv.line());
  if (!inserted) {
    return csv.Error("duplicate " + std::string(what) + " name '" + std::string(name) +
                     "' (first on line " + std::to_string(it->second) + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, const std::string& source) {
  CsvCursor csv(text, source, kNodeColumns);
  HF_RETURN_IF_ERROR(csv.ReadHeader());
  std::vector<OpenbNode> out;
  std::unordered_map<std::string_view, int> seen;
  bool more = true;
  while (true) {
    HF_RETURN_IF_ERROR(csv.Next(more));
    if (!more) break;
    OpenbNode n;
    n.line = csv.line();
    HF_RETURN_IF_ERROR(CheckName(csv, csv.field(kSn), "node", seen));
    n.name = csv.field(kSn);
    HF_RETURN_IF_ERROR(csv.Int(kNodeCpu, kMaxInt64, n.cpu_milli));
    HF_RETURN_IF_ERROR(csv.Int(kNodeMem, kMaxInt64, n.memory_mib));
    int64_t gpu = 0;
    // A node holds at most a few dozen GPUs; a huge count is a broken file.
    HF_RETURN_IF_ERROR(csv.Int(kGpu, 1024, gpu));
    n.gpu = int32_t(gpu);
    HF_RETURN_IF_ERROR(NoQuotes(csv, csv.field(kModel)));
    n.model = csv.field(kModel);
    out.push_back(std::move(n));
  }
  return out;
}

Result<std::vector<OpenbPod>> ParseOpenbPods(std::string_view text, const std::string& source) {
  CsvCursor csv(text, source, kPodColumns);
  HF_RETURN_IF_ERROR(csv.ReadHeader());
  std::vector<OpenbPod> out;
  out.reserve(text.size() / 64);
  std::unordered_map<std::string_view, int> seen;
  bool more = true;
  while (true) {
    HF_RETURN_IF_ERROR(csv.Next(more));
    if (!more) break;
    OpenbPod p;
    p.line = csv.line();
    HF_RETURN_IF_ERROR(CheckName(csv, csv.field(kName), "pod", seen));
    p.name = csv.field(kName);
    HF_RETURN_IF_ERROR(csv.Int(kCpu, kMaxInt64, p.cpu_milli));
    HF_RETURN_IF_ERROR(csv.Int(kMem, kMaxInt64, p.memory_mib));
    int64_t v = 0;
    HF_RETURN_IF_ERROR(csv.Int(kNumGpu, kMaxInt32, v));
    p.num_gpu = int32_t(v);
    HF_RETURN_IF_ERROR(csv.Int(kGpuMilli, kWholeGpuMilli, v));
    p.gpu_milli = int32_t(v);
    for (size_t c : {kGpuSpec, kQos, kPhase}) HF_RETURN_IF_ERROR(NoQuotes(csv, csv.field(c)));
    p.gpu_spec = csv.field(kGpuSpec);
    p.qos = csv.field(kQos);
    if (!QosPriority(p.qos)) {
      return csv.Error("unknown qos '" + p.qos +
                       "' (expected LS, Guaranteed, Burstable, BE or empty)");
    }
    p.pod_phase = csv.field(kPhase);
    HF_RETURN_IF_ERROR(csv.OptionalInt(kCreate, kMaxSeconds, true, p.creation_time));
    HF_RETURN_IF_ERROR(csv.OptionalInt(kDelete, kMaxSeconds, true, p.deletion_time));
    HF_RETURN_IF_ERROR(csv.OptionalInt(kSched, kMaxSeconds, true, p.scheduled_time));
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<int32_t> QosPriority(std::string_view qos) {
  if (qos == "LS") return 3;
  if (qos == "Guaranteed") return 2;
  if (qos == "Burstable") return 1;
  if (qos == "BE" || qos.empty()) return 0;
  return std::nullopt;
}

NodeSpec ToNodeSpec(const OpenbNode& node) {
  NodeSpec spec;
  spec.name = node.name;
  spec.cpu_milli = node.cpu_milli;
  spec.memory_mib = node.memory_mib;
  spec.gpus.resize(size_t(node.gpu));
  for (int32_t i = 0; i < node.gpu; ++i) {
    GpuDevice& g = spec.gpus[size_t(i)];
    g.index = i;
    g.model = node.model;
    // The trace names models only; G2/G3 are undisclosed, so no vendor is claimed.
    g.vendor.clear();
  }
  return spec;
}

SimTask ToSimTask(const OpenbPod& pod, TaskKey key, const std::string& source) {
  SimTask st;
  Task& t = st.task;
  t.key = key;
  t.name = pod.name;
  t.priority = QosPriority(pod.qos).value_or(0);
  t.preemptible = true;
  Requests& r = t.requests;
  r.cpu_milli = pod.cpu_milli;
  r.memory_mib = pod.memory_mib;
  r.gpu = pod.num_gpu;
  r.gpu_milli = pod.num_gpu > 0 && pod.gpu_milli > 0 ? pod.gpu_milli : kWholeGpuMilli;
  std::string_view spec = pod.gpu_spec;
  while (!spec.empty()) {
    const size_t bar = spec.find('|');
    const std::string_view m = spec.substr(0, bar);
    if (!m.empty() &&
        std::find(r.gpu_models.begin(), r.gpu_models.end(), m) == r.gpu_models.end()) {
      r.gpu_models.emplace_back(m);
    }
    if (bar == std::string_view::npos) break;
    spec.remove_prefix(bar + 1);
  }
  if (pod.creation_time) st.create_ms = *pod.creation_time * 1000;
  if (pod.deletion_time) st.delete_ms = *pod.deletion_time * 1000;
  st.origin = source + ":" + std::to_string(pod.line);
  return st;
}

Result<Workload> LoadOpenbWorkload(const std::string& nodes_path, const std::string& pods_path) {
  Workload w;
  w.nodes_source = nodes_path;
  w.tasks_source = pods_path;
  {
    auto text = ReadWholeFile(nodes_path);
    if (!text.ok()) return text.status();
    auto nodes = ParseOpenbNodes(*text, nodes_path);
    if (!nodes.ok()) return nodes.status();
    if (nodes->empty()) return InvalidArgument(nodes_path + ": no nodes");
    w.nodes.reserve(nodes->size());
    for (const OpenbNode& n : *nodes) w.nodes.push_back({ToNodeSpec(n), std::nullopt});
  }
  auto text = ReadWholeFile(pods_path);
  if (!text.ok()) return text.status();
  auto pods = ParseOpenbPods(*text, pods_path);
  if (!pods.ok()) return pods.status();
  w.tasks.reserve(pods->size());
  for (size_t i = 0; i < pods->size(); ++i)
    w.tasks.push_back(ToSimTask((*pods)[i], TaskKey(i), pods_path));
  return w;
}

}  // namespace hf::sim
