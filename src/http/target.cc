#include "http/target.h"

namespace hf::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in`. Fails on a truncated or non-hex escape, on NUL (which
// would truncate names in C APIs further down) and, for paths, on an encoded
// '/' or '\\': decoding those would let "a%2Fb" reach a handler as two
// segments that the router never saw.
std::optional<std::string> PercentDecode(std::string_view in, bool is_path) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      if (is_path && (c == '/' || c == '\\')) return std::nullopt;
      i += 2;
    } else if (c == '+' && !is_path) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::optional<std::string> ParseRequestTarget(std::string_view target, Request& req) {
  if (target.empty() || target[0] != '/') return "request target must be an absolute path";
  std::string_view raw_path = target;
  std::string_view raw_query;
  if (size_t q = target.find('?'); q != std::string_view::npos) {
    raw_path = target.substr(0, q);
    raw_query = target.substr(q + 1);
  }
  if (size_t h = raw_query.find('#'); h != std::string_view::npos) {
    raw_query = raw_query.substr(0, h);
  }
  auto path = PercentDecode(raw_path, /*is_path=*/true);
  if (!path) return "path has an invalid percent-encoding or an encoded slash";
  // Dot segments are refused rather than resolved: no route needs them, and
  // resolving them is how path traversal slips past prefix checks.
  size_t start = 1;
  while (start <= path->size()) {
    size_t end = path->find('/', start);
    if (end == std::string::npos) end = path->size();
    std::string_view seg = std::string_view(*path).substr(start, end - start);
    if (seg == ".." || seg == ".") return "path must not contain '.' or '..' segments";
    start = end + 1;
  }
  req.path = std::move(*path);
  while (!raw_query.empty()) {
    size_t amp = raw_query.find('&');
    std::string_view pair = raw_query.substr(0, amp);
    raw_query = amp == std::string_view::npos ? std::string_view() : raw_query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    auto key = PercentDecode(pair.substr(0, eq), /*is_path=*/false);
    auto value = PercentDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), false);
    if (!key || !value) return "query has an invalid percent-encoding";
    req.query.emplace(std::move(*key), std::move(*value));
  }
  return std::nullopt;
}

}  // namespace hf::http
