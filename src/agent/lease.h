// The node's lease (docs/AGENT.md, "Fencing"): the agent's word, to the
// supervisors of its tasks, that the server still hears it.
//
// After every heartbeat the server answered, the agent writes the time it
// SENT that heartbeat into WORK_DIR/lease. Each task's supervisor
// (task_supervisor.h) stops its task once that time is `fence_after` old. The
// server requeues a silent node's tasks only after fence_after + the kill
// grace (+ a margin) since the last heartbeat it RECEIVED, which came after
// the send: so when a new copy starts elsewhere, the old one is dead. Times
// are the node's monotonic clock (CLOCK_MONOTONIC, shared by every process
// on the node, immune to wall-clock jumps); each side measures its own span.
//
// Threading: plain functions; the file is replaced atomically (rename).
#ifndef HF_AGENT_LEASE_H_
#define HF_AGENT_LEASE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace hf::agent {

// CLOCK_MONOTONIC in milliseconds.
int64_t MonotonicMs();

// Writes `renewed_at_ms` (a MonotonicMs value) to `path` atomically, 0600.
Status WriteLease(const std::string& path, int64_t renewed_at_ms);

// The time in the lease file, or nullopt when it is missing or malformed.
std::optional<int64_t> ReadLease(const std::string& path);

}  // namespace hf::agent

#endif  // HF_AGENT_LEASE_H_
