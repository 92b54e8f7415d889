#include "core/log.h"

#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/time.h"

namespace hf::log {
namespace {

// One JSON object per line, for log shippers; nlohmann escapes the message.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string component) : component_(std::move(component)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::ordered_json line = {{"time", FormatTimeMs(ms)},
                           {"level", std::string(level.data(), level.size())},
                           {"component", component_},
                           {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(component_);
  }

 private:
  const std::string component_;
};

bool IsLevel(std::string_view level) {
  for (std::string_view l : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == l) return true;
  }
  return false;
}

bool IsFormat(std::string_view format) { return format == "text" || format == "json"; }

}  // namespace

Status Init(std::string_view component, std::string_view level, std::string_view format) {
  if (!IsLevel(level)) {
    return InvalidArgument("log level must be one of " + std::string(kLevels) + ", got \"" +
                           std::string(level) + "\"");
  }
  if (!IsFormat(format)) {
    return InvalidArgument("log format must be one of " + std::string(kFormats) + ", got \"" +
                           std::string(format) + "\"");
  }
  auto logger = std::make_shared<spdlog::logger>(
      std::string(component), std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>(std::string(component)));
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%eZ %-7l %v", spdlog::pattern_time_type::utc));
  }
  logger->set_level(spdlog::level::from_str(std::string(level)));
  // Lines go out whole and at once: a crash loses nothing already logged.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return Status::Ok();
}

}  // namespace hf::log
