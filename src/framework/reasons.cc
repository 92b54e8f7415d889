#include "framework/reasons.h"

#include "core/status.h"

namespace hf::framework {

ReasonId ReasonTable::Intern(std::string_view text, bool resolvable) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].text == text && entries_[i].resolvable == resolvable) return ReasonId(i);
  }
  HF_CHECK(entries_.size() < UINT16_MAX);
  entries_.push_back({std::string(text), resolvable});
  return ReasonId(entries_.size() - 1);
}

}  // namespace hf::framework
