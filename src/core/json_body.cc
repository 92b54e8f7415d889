#include "core/json_body.h"

#include <set>
#include <string>
#include <vector>

#include "core/json_fields.h"

namespace hf {
namespace {

using nlohmann::json;
using json_fields::Truncate;
using json_fields::TypeName;

// Thrown from the parser callback: the only way to stop nlohmann's parser
// early, before it has built a deep or duplicate-laden document.
struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

}  // namespace

Result<json> ParseJsonBody(std::string_view body, int max_depth) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgument("request body is empty; expected a JSON object");
  }
  // JSON text never holds a raw NUL; the parser would stop at it and ignore
  // whatever follows, so refuse it here.
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument("malformed JSON: NUL byte at position " + std::to_string(nul));
  }
  // One set of keys per open object, to refuse duplicates.
  std::vector<std::set<std::string>> open_objects;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        // `depth` counts the containers around this one: 0 for the top level.
        if (depth >= max_depth) throw TooDeep{};
        open_objects.emplace_back();
        break;
      case json::parse_event_t::array_start:
        if (depth >= max_depth) throw TooDeep{};
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          throw DuplicateKey{parsed.get<std::string>()};
        }
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(body.begin(), body.end(), callback);
  } catch (const TooDeep&) {
    return InvalidArgument("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  } catch (const DuplicateKey& d) {
    return InvalidArgument("duplicate key \"" + Truncate(d.key) + "\" in JSON object");
  } catch (const json::parse_error& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; users need
    // only the part after it.
    std::string what = e.what();
    size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgument("malformed JSON at byte " + std::to_string(e.byte) + ": " +
                           Truncate(what));
  } catch (const json::exception& e) {
    // Numbers out of double range (1e400) land here.
    std::string what = e.what();
    size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgument("malformed JSON: " + Truncate(what));
  }
  if (!doc.is_object()) {
    return InvalidArgument(std::string("request body must be a JSON object, got ") + TypeName(doc));
  }
  return doc;
}

}  // namespace hf
