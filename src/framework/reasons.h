// Filter rejection reasons, interned to small ids so that the hot loop records
// a rejection with two array writes.
#ifndef HF_FRAMEWORK_REASONS_H_
#define HF_FRAMEWORK_REASONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hf::framework {

using ReasonId = uint16_t;

class ReasonTable {
 public:
  // Returns the id of (`text`, `resolvable`), adding it if new. `resolvable`
  // says whether evicting tasks could clear it (insufficient resources: yes;
  // wrong GPU model, no RDMA NIC, node not ready: no). One text may exist in
  // both kinds (e.g. "insufficient GPU": too little free vs. too few GPUs on
  // the node at all); summaries count them together.
  ReasonId Intern(std::string_view text, bool resolvable);
  const std::string& text(ReasonId id) const { return entries_[id].text; }
  bool resolvable(ReasonId id) const { return entries_[id].resolvable; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string text;
    bool resolvable;
  };
  std::vector<Entry> entries_;
};

}  // namespace hf::framework

#endif  // HF_FRAMEWORK_REASONS_H_
