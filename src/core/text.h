// Small text helpers shared by the server, the gateway and the client.
#ifndef HF_CORE_TEXT_H_
#define HF_CORE_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace hf {

// ASCII case-insensitive equality (HTTP header names, RFC 9110).
bool IEquals(std::string_view a, std::string_view b);

// Percent-encodes everything but RFC 3986's unreserved characters
// (A-Z a-z 0-9 - . _ ~), for a path segment or a query key or value.
std::string UrlEncode(std::string_view s);

// A number as printf's %g writes it: "5", "0.25", "1e+06".
std::string FormatNumber(double v);

// The pieces of `text` between `sep`s: "a,b," -> {"a", "b", ""}; "" -> {""}.
std::vector<std::string> Split(std::string_view text, char sep);

}  // namespace hf

#endif  // HF_CORE_TEXT_H_
