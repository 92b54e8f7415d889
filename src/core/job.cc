#include "core/job.h"

#include <set>

#include "core/json_fields.h"
#include "core/model_json.h"

namespace hf {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers are this file's vocabulary

namespace {

constexpr const char* kJobStates[] = {"pending",   "starting", "running",   "restarting",
                                      "succeeded", "failed",   "cancelled", "timed_out"};

// Fields a role may not set: the job sets them for every member.
constexpr const char* kJobLevelFields[] = {"group", "priority", "time_limit_s", "queue", "job"};

Result<JobRole> ParseRole(const json& j, const std::string& path) {
  if (!j.is_object()) return InvalidArgument(path + " must be an object, got " + TypeName(j));
  for (const char* f : kJobLevelFields) {
    if (j.contains(f)) {
      return InvalidArgument(Field(path, f) + " is the job's: set it on the job, for every member");
    }
  }
  JobRole role;
  if (!j.contains("name")) return InvalidArgument(Field(path, "name") + " is required");
  json member = j;
  if (auto it = member.find("replicas"); it != member.end()) {
    HF_RETURN_IF_ERROR(
        ReadInt<int32_t>(*it, Field(path, "replicas"), 1, kMaxJobMembers, role.replicas));
    member.erase(it);
  }
  HF_ASSIGN_OR_RETURN(role.member, TaskFromJson(member, path));
  role.name = role.member.name;
  return role;
}

json RoleJson(const JobRole& r, bool with_secrets) {
  json j = with_secrets ? TaskToJson(r.member) : TaskViewJson(r.member);
  for (const char* f : kJobLevelFields) j.erase(f);
  j["replicas"] = r.replicas;
  return j;
}

json SpecJson(const JobSpec& s, bool with_secrets) {
  json roles = json::array();
  for (const JobRole& r : s.roles) roles.push_back(RoleJson(r, with_secrets));
  return {{"name", s.name},
          {"queue", s.queue},
          {"priority", s.priority},
          {"roles", std::move(roles)},
          {"min_available", s.gang_size()},
          {"time_limit_s", s.time_limit_s > 0 ? json(s.time_limit_s) : json(nullptr)},
          {"restart",
           {{"max_restarts", s.max_restarts},
            {"on_member_failure",
             s.on_member_failure == OnMemberFailure::kRestartJob ? "restart_job" : "fail_job"}}},
          {"placement", {{"pack", s.pack}, {"gpu_model", s.one_gpu_model ? "same" : "any"}}}};
}

}  // namespace

const char* JobStateName(JobState s) { return kJobStates[static_cast<size_t>(s)]; }

std::optional<JobState> ParseJobState(const std::string& s) {
  for (size_t i = 0; i < std::size(kJobStates); ++i) {
    if (s == kJobStates[i]) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

int32_t JobSpec::replicas() const {
  int32_t n = 0;
  for (const JobRole& r : roles) n += r.replicas;
  return n;
}

std::vector<Task> JobSpec::Members(uint64_t id) const {
  std::vector<Task> out;
  const int32_t world = replicas();
  for (const JobRole& r : roles) {
    for (int32_t i = 0; i < r.replicas; ++i) {
      Task t = r.member;
      t.key = 0;
      t.name = name + "-" + r.name + "-" + std::to_string(i);
      t.group = pack == "none" ? "" : name + "." + std::to_string(id);
      t.group_placement = GroupPlacement::kPack;
      t.priority = priority;
      t.time_limit_s = time_limit_s;
      t.queue = queue;
      t.job = {id, name, r.name, static_cast<int32_t>(out.size()), world, gang_size()};
      out.push_back(std::move(t));
    }
  }
  return out;
}

Result<JobSpec> JobSpecFromJson(const json& j) {
  if (!j.is_object())
    return InvalidArgument(std::string("job must be an object, got ") + TypeName(j));
  HF_RETURN_IF_ERROR(CheckKeys(j, "",
                               {"name", "queue", "priority", "roles", "min_available",
                                "time_limit_s", "restart", "placement"}));
  JobSpec s;
  if (!j.contains("name")) return InvalidArgument("name is required");
  if (!j.contains("roles")) return InvalidArgument("roles is required: at least one role");
  for (const auto& [key, v] : j.items()) {
    if (key == "name") {
      HF_RETURN_IF_ERROR(ReadName(v, key, s.name));
      // Members are named NAME-ROLE-INDEX.
      if (s.name.size() > 120) return InvalidArgument("name must be at most 120 characters");
    } else if (key == "queue") {
      HF_RETURN_IF_ERROR(ReadName(v, key, s.queue));
    } else if (key == "priority") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, key, std::numeric_limits<int32_t>::min(),
                                          std::numeric_limits<int32_t>::max(), s.priority));
    } else if (key == "roles") {
      if (!v.is_array())
        return InvalidArgument("roles must be an array, got " + std::string(TypeName(v)));
      if (v.empty()) return InvalidArgument("roles must not be empty");
      if (v.size() > kMaxJobRoles) {
        return InvalidArgument("roles holds " + std::to_string(v.size()) + " roles; at most " +
                               std::to_string(kMaxJobRoles));
      }
      std::set<std::string> names;
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string path = Index("roles", i);
        HF_ASSIGN_OR_RETURN(JobRole role, ParseRole(v[i], path));
        if (role.name.size() > 60)
          return InvalidArgument(path + ".name must be at most 60 characters");
        if (!names.insert(role.name).second) {
          return InvalidArgument(path + ".name \"" + role.name + "\" is given twice");
        }
        s.roles.push_back(std::move(role));
      }
    } else if (key == "min_available") {
      HF_RETURN_IF_ERROR(ReadInt<int32_t>(v, key, 1, kMaxJobMembers, s.min_available));
    } else if (key == "time_limit_s") {
      if (!v.is_null())
        HF_RETURN_IF_ERROR(ReadInt<int64_t>(v, key, 1, kMaxTimeLimitS, s.time_limit_s));
    } else if (key == "restart") {
      if (!v.is_object())
        return InvalidArgument("restart must be an object, got " + std::string(TypeName(v)));
      HF_RETURN_IF_ERROR(CheckKeys(v, "restart", {"max_restarts", "on_member_failure"}));
      if (v.contains("max_restarts")) {
        HF_RETURN_IF_ERROR(
            ReadInt<int32_t>(v["max_restarts"], "restart.max_restarts", 0, 100, s.max_restarts));
      }
      if (v.contains("on_member_failure")) {
        std::string p;
        HF_RETURN_IF_ERROR(ReadString(v["on_member_failure"], "restart.on_member_failure", p));
        if (p == "restart_job") {
          s.on_member_failure = OnMemberFailure::kRestartJob;
        } else if (p == "fail_job") {
          s.on_member_failure = OnMemberFailure::kFailJob;
        } else {
          return InvalidArgument(
              "restart.on_member_failure must be \"restart_job\" or \"fail_job\"");
        }
      }
    } else if (key == "placement") {
      if (!v.is_object())
        return InvalidArgument("placement must be an object, got " + std::string(TypeName(v)));
      HF_RETURN_IF_ERROR(CheckKeys(v, "placement", {"pack", "gpu_model"}));
      if (v.contains("gpu_model")) {
        std::string model;
        HF_RETURN_IF_ERROR(ReadString(v["gpu_model"], "placement.gpu_model", model));
        if (model != "same" && model != "any") {
          return InvalidArgument("placement.gpu_model must be \"same\" or \"any\"");
        }
        s.one_gpu_model = model == "same";
      }
      if (v.contains("pack")) {
        HF_RETURN_IF_ERROR(ReadString(v["pack"], "placement.pack", s.pack));
        if (s.pack != "node" && s.pack != "rack" && s.pack != "switch" && s.pack != "none") {
          return InvalidArgument("placement.pack must be one of node, rack, switch, none");
        }
      }
    }
  }
  const int32_t replicas = s.replicas();
  if (replicas > kMaxJobMembers) {
    return InvalidArgument("the roles hold " + std::to_string(replicas) + " replicas; at most " +
                           std::to_string(kMaxJobMembers) + " per job");
  }
  if (s.min_available > replicas) {
    return InvalidArgument("min_available (" + std::to_string(s.min_available) +
                           ") is more than the job's " + std::to_string(replicas) + " replicas");
  }
  if (s.min_available == replicas) s.min_available = 0;
  return s;
}

json JobSpecToJson(const JobSpec& s) { return SpecJson(s, true); }
json JobSpecViewJson(const JobSpec& s) { return SpecJson(s, false); }

}  // namespace hf
