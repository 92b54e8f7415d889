#include "store/db.h"

namespace hf::store {

Status Stmt::Run() {
  Result<bool> r = Step();
  if (!r.ok()) return r.status();
  if (*r) return Internal("statement returned rows where none were expected: " + impl_->sql());
  return Status::Ok();
}

}  // namespace hf::store
