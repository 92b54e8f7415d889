#include "core/json_fields.h"

namespace hf::json_fields {

namespace {
constexpr size_t kMaxEchoedMessage = 200;
}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return alnum(name.front()) && alnum(name.back());
}

std::string Truncate(std::string s) {
  if (s.size() > kMaxEchoedMessage) {
    s.resize(kMaxEchoedMessage);
    s += "...";
  }
  return s;
}

std::string Field(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const char* TypeName(const json& v) { return v.type_name(); }

Status RequireObject(const json& v, const std::string& path) {
  if (v.is_object()) return Status::Ok();
  return InvalidArgument(path + " must be an object, got " + TypeName(v));
}

// Refuses any key of `obj` not in `allowed`, naming it by its full path.
Status CheckKeys(const json& obj, const std::string& prefix,
                 std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) return InvalidArgument("unknown field \"" + Truncate(Field(prefix, key)) + "\"");
  }
  return Status::Ok();
}

Status ReadLocality(const json& v, const std::string& path, int32_t& out) {
  return ReadInt<int32_t>(v, path, -1, std::numeric_limits<int32_t>::max(), out);
}

Status ReadBool(const json& v, const std::string& path, bool& out) {
  if (!v.is_boolean()) return InvalidArgument(path + " must be a boolean, got " + TypeName(v));
  out = v.get<bool>();
  return Status::Ok();
}

Status ReadString(const json& v, const std::string& path, std::string& out) {
  if (!v.is_string()) return InvalidArgument(path + " must be a string, got " + TypeName(v));
  out = v.get<std::string>();
  return Status::Ok();
}

Status ReadNonEmptyString(const json& v, const std::string& path, std::string& out) {
  HF_RETURN_IF_ERROR(ReadString(v, path, out));
  if (out.empty()) return InvalidArgument(path + " must not be empty");
  return Status::Ok();
}

Status CheckName(const std::string& name, const std::string& path) {
  if (IsValidName(name)) return Status::Ok();
  return InvalidArgument(path +
                         " must be 1 to 253 characters of a-z, 0-9, '.', '_' or '-', "
                         "starting and ending with a letter or digit");
}

Status ReadName(const json& v, const std::string& path, std::string& out) {
  HF_RETURN_IF_ERROR(ReadString(v, path, out));
  return CheckName(out, path);
}

Status CheckCount(size_t count, const std::string& path, size_t max) {
  if (count <= max) return Status::Ok();
  return InvalidArgument(path + " has " + std::to_string(count) + " entries; at most " +
                         std::to_string(max));
}

namespace {

Status CheckLength(const std::string& s, const std::string& path) {
  if (s.size() <= kMaxStringLength) return Status::Ok();
  return InvalidArgument(path + " is " + std::to_string(s.size()) + " bytes long; at most " +
                         std::to_string(kMaxStringLength));
}

}  // namespace

// A list of strings; `names` applies the naming rule to each element.
Status ReadStringList(const json& v, const std::string& path, bool names, size_t max,
                      std::vector<std::string>& out) {
  if (!v.is_array()) {
    return InvalidArgument(path + " must be an array of strings, got " + TypeName(v));
  }
  HF_RETURN_IF_ERROR(CheckCount(v.size(), path, max));
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string s;
    if (names) {
      HF_RETURN_IF_ERROR(ReadName(v[i], Index(path, i), s));
    } else {
      HF_RETURN_IF_ERROR(ReadNonEmptyString(v[i], Index(path, i), s));
      HF_RETURN_IF_ERROR(CheckLength(s, Index(path, i)));
    }
    out.push_back(std::move(s));
  }
  return Status::Ok();
}

Status ReadStringMap(const json& v, const std::string& path, size_t max,
                     std::map<std::string, std::string>& out) {
  if (!v.is_object()) {
    return InvalidArgument(path + " must be an object of strings, got " + TypeName(v));
  }
  HF_RETURN_IF_ERROR(CheckCount(v.size(), path, max));
  out.clear();
  for (const auto& [key, value] : v.items()) {
    if (key.empty()) return InvalidArgument(path + " must not have an empty key");
    if (key.size() > kMaxStringLength) {
      return InvalidArgument(path + " has a key longer than " + std::to_string(kMaxStringLength) +
                             " bytes");
    }
    std::string s;
    HF_RETURN_IF_ERROR(ReadString(value, Field(path, Truncate(key)), s));
    HF_RETURN_IF_ERROR(CheckLength(s, Field(path, Truncate(key))));
    out.emplace(key, std::move(s));
  }
  return Status::Ok();
}

// Prefixes an error from a validator that does not know the element path
// (Requests::Validate says "requests.gpu_milli ...").
Status Prefixed(Status s, const std::string& prefix) {
  if (s.ok() || prefix.empty()) return s;
  return Status(s.code(), prefix + "." + s.message());
}

}  // namespace hf::json_fields
