// Reading JSON fields strictly, with messages that name the field by its
// full path ("requests.gpu must be an integer"). Shared by every parser of
// API and stored documents, so that one field is read one way everywhere.
#ifndef HF_CORE_JSON_FIELDS_H_
#define HF_CORE_JSON_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hf::json_fields {

using nlohmann::json;

// Names of tasks, groups and nodes: 1..253 characters of [a-z0-9._-],
// starting and ending with a letter or digit.
inline constexpr size_t kMaxNameLength = 253;
bool IsValidName(std::string_view name);

// Cuts text echoed back from a request to 200 characters: a hostile body can
// make a key or token megabytes long, and error messages end up in logs.
std::string Truncate(std::string s);
// "prefix.key", or "key" when prefix is empty.
std::string Field(const std::string& prefix, std::string_view key);
// "path[i]".
std::string Index(const std::string& path, size_t i);
const char* TypeName(const json& v);
Status RequireObject(const json& v, const std::string& path);
// Refuses any key of `obj` not in `allowed`, naming it by its full path.
Status CheckKeys(const json& obj, const std::string& prefix,
                 std::initializer_list<std::string_view> allowed);
Status ReadLocality(const json& v, const std::string& path, int32_t& out);
Status ReadBool(const json& v, const std::string& path, bool& out);
Status ReadString(const json& v, const std::string& path, std::string& out);
Status ReadNonEmptyString(const json& v, const std::string& path, std::string& out);
Status CheckName(const std::string& name, const std::string& path);
Status ReadName(const json& v, const std::string& path, std::string& out);
// Upper bounds on what one request may hold (docs/API.md, "Limits"): far
// above any real cluster, low enough that a hostile body cannot make every
// later read of the cluster slow or large.
inline constexpr size_t kMaxGpusPerNode = 256;
inline constexpr size_t kMaxNicsPerNode = 64;
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxEnv = 1024;            // env and secret_env entries, each
inline constexpr size_t kMaxCommandArgs = 1024;
inline constexpr size_t kMaxDependsOn = 64;
inline constexpr size_t kMaxGpuModels = 64;        // the most distinct models a cluster has
inline constexpr size_t kMaxGpuVendors = 16;       // vendors a task may accept
inline constexpr size_t kMaxStringLength = 65536;  // one env value, argument or label value

// A list of at most `max` strings of at most kMaxStringLength each; with
// `names`, each must be a valid name.
Status ReadStringList(const json& v, const std::string& path, bool names, size_t max,
                      std::vector<std::string>& out);
// An object of at most `max` string values, keys and values at most
// kMaxStringLength long.
Status ReadStringMap(const json& v, const std::string& path, size_t max,
                     std::map<std::string, std::string>& out);
// InvalidArgument "PATH has N entries; at most MAX" when `count` > `max`.
Status CheckCount(size_t count, const std::string& path, size_t max);
// Prefixes an error from a validator that does not know the element path
// (Requests::Validate says "requests.gpu_milli ...").
Status Prefixed(Status s, const std::string& prefix);

// Reads an integer of type T in [lo, hi]. Only JSON integers are integers:
// a number written with a fraction or an exponent (2.0, -0.0, 1e-400) is
// refused, even when its value is integral, so that one field has one
// spelling and nothing rounds silently (JSON.stringify writes 2, not 2.0).
template <typename T>
Status ReadInt(const json& v, const std::string& path, T lo, T hi, T& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    // nlohmann reads a literal 0 (any non-negative literal) as unsigned.
    if (static_cast<int64_t>(lo) > 0 && u < static_cast<uint64_t>(lo)) {
      return InvalidArgument(path + " must be >= " + std::to_string(lo));
    }
    if (u > static_cast<uint64_t>(hi)) {
      return InvalidArgument(path + " must be <= " + std::to_string(hi));
    }
    out = static_cast<T>(u);
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < static_cast<int64_t>(lo)) {
      return InvalidArgument(path + " must be >= " + std::to_string(lo));
    }
    if (i > static_cast<int64_t>(hi)) {
      return InvalidArgument(path + " must be <= " + std::to_string(hi));
    }
    out = static_cast<T>(i);
    return Status::Ok();
  }
  if (v.is_number_float()) {
    // An integer literal too large for 64 bits also arrives as a float: say
    // what the range is.
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      if (d < static_cast<double>(lo)) return InvalidArgument(path + " must be >= " + std::to_string(lo));
      if (d >= static_cast<double>(hi) + 1.0) {
        return InvalidArgument(path + " must be <= " + std::to_string(hi));
      }
    }
    return InvalidArgument(path + " must be an integer, got " + v.dump() +
                           " (write integers without a fraction or exponent)");
  }
  return InvalidArgument(path + " must be an integer, got " + TypeName(v));
}

template <typename T>
Status ReadQuantity(const json& v, const std::string& path, T& out) {
  return ReadInt<T>(v, path, 0, std::numeric_limits<T>::max(), out);
}

}  // namespace hf::json_fields

#endif  // HF_CORE_JSON_FIELDS_H_
