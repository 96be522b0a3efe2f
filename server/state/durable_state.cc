#include "server/state/durable_state.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/formats/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard::server {
namespace {

using nlohmann::json;

json ToJson(const DurableSnapshot& s) {
  json checkpoints = json::array();
  for (const CheckpointRecord& c : s.checkpoints) {
    checkpoints.push_back({{"id", c.id},
                           {"step", c.step},
                           {"manifest_path", c.manifest_path},
                           {"metadata_json", c.metadata_json},
                           {"committed_unix_ms", c.committed_unix_ms}});
  }
  return {{"format", 1},
          {"job_id", s.job_id},
          {"job_config_json", s.job_config_json},
          {"units_json", s.units_json},
          {"generation", s.generation},
          {"last_step", s.last_step},
          // JSON has no NaN; a loss that is not finite is stored as null.
          {"last_loss", std::isfinite(s.last_loss) ? json(s.last_loss) : json(nullptr)},
          {"restarts", s.restarts},
          {"failures", s.failures},
          {"job_ended", s.job_ended},
          {"job_ended_reason", s.job_ended_reason},
          {"checkpoints", checkpoints}};
}

absl::StatusOr<DurableSnapshot> FromJson(const std::string& text, const std::string& path) {
  DurableSnapshot s;
  try {
    const json j = json::parse(text);
    if (j.at("format").get<int>() != 1) {
      return absl::DataLossError(absl::StrCat(path, ": unknown format ", j.at("format").dump()));
    }
    s.job_id = j.at("job_id").get<std::string>();
    s.job_config_json = j.at("job_config_json").get<std::string>();
    s.units_json = j.at("units_json").get<std::string>();
    s.generation = j.at("generation").get<uint64_t>();
    s.last_step = j.at("last_step").get<int64_t>();
    s.last_loss = j.at("last_loss").is_null() ? std::nan("") : j.at("last_loss").get<double>();
    s.restarts = j.at("restarts").get<uint64_t>();
    // Absent from files written before job lifecycles existed.
    s.failures = j.value("failures", int64_t{0});
    s.job_ended = j.value("job_ended", std::string());
    s.job_ended_reason = j.value("job_ended_reason", std::string());
    if (s.failures < 0 ||
        (!s.job_ended.empty() && s.job_ended != "completed" && s.job_ended != "failed")) {
      return absl::DataLossError(absl::StrCat(path, ": bad failures or job_ended"));
    }
    for (const json& c : j.at("checkpoints")) {
      s.checkpoints.push_back({c.at("id").get<std::string>(), c.at("step").get<int64_t>(),
                               c.at("manifest_path").get<std::string>(),
                               c.at("metadata_json").get<std::string>(),
                               c.at("committed_unix_ms").get<int64_t>()});
    }
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": not valid coordinator state: ", e.what()));
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DurableState>> DurableState::Open(const std::string& state_dir) {
  std::unique_ptr<DurableState> state(new DurableState(state_dir));
  if (state_dir.empty()) return state;
  ZS_RETURN_IF_ERROR(MakeDirectories(state_dir));
  // Leftovers of writes cut off by a kill (WriteFileAtomically's temporaries).
  RemoveStaleTemporaries(absl::StrCat(state_dir, "/", kFileName));
  const std::string path = absl::StrCat(state_dir, "/", kFileName);
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) return state;
  if (!text.ok()) return text.status();
  ZS_ASSIGN_OR_RETURN(DurableSnapshot snapshot, FromJson(*text, path));
  absl::MutexLock lock(&state->mu_);
  state->snapshot_ = std::move(snapshot);
  return state;
}

DurableSnapshot DurableState::Get() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

absl::Status DurableState::CommitLocked(DurableSnapshot next) {
  // [Note: memory follows disk] The snapshot changes only once the file
  // does: a failed write (e.g. ENOSPC) leaves both at the old state.
  if (!dir_.empty()) {
    ZS_RETURN_IF_ERROR(
        WriteFileAtomically(absl::StrCat(dir_, "/", kFileName), ToJson(next).dump(1)));
  }
  snapshot_ = std::move(next);
  return absl::OkStatus();
}

absl::Status DurableState::SetJob(const std::string& job_id, const std::string& job_config_json,
                                  uint64_t restarts) {
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  next.job_id = job_id;
  next.job_config_json = job_config_json;
  next.restarts = restarts;
  return CommitLocked(std::move(next));
}

absl::Status DurableState::SetUnits(const std::string& units_json) {
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  next.units_json = units_json;
  return CommitLocked(std::move(next));
}

absl::Status DurableState::SetGeneration(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  if (generation <= snapshot_.generation) return absl::OkStatus();
  next.generation = generation;
  return CommitLocked(std::move(next));
}

absl::Status DurableState::SetLastStep(int64_t step, double loss) {
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  if (step < snapshot_.last_step) return absl::OkStatus();
  next.last_step = step;
  next.last_loss = loss;
  return CommitLocked(std::move(next));
}

absl::Status DurableState::SetLifecycle(int64_t failures, const std::string& ended,
                                        const std::string& ended_reason) {
  if (failures < 0) return absl::InvalidArgumentError("failures is negative");
  if (!ended.empty() && ended != "completed" && ended != "failed") {
    return absl::InvalidArgumentError(
        absl::StrCat("job_ended \"", ended, "\" is not completed, failed or empty"));
  }
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  if (snapshot_.failures == failures && snapshot_.job_ended == ended &&
      snapshot_.job_ended_reason == ended_reason) {
    return absl::OkStatus();
  }
  next.failures = failures;
  next.job_ended = ended;
  next.job_ended_reason = ended_reason;
  return CommitLocked(std::move(next));
}

absl::Status DurableState::RecordCheckpoint(const CheckpointRecord& record) {
  if (record.id.empty()) return absl::InvalidArgumentError("checkpoint id is empty");
  if (record.step < 0) return absl::InvalidArgumentError("checkpoint step is negative");
  if (!record.metadata_json.empty() && !json::accept(record.metadata_json)) {
    return absl::InvalidArgumentError("checkpoint metadata_json is not valid JSON");
  }
  absl::MutexLock lock(&mu_);
  DurableSnapshot next = snapshot_;
  for (const CheckpointRecord& c : snapshot_.checkpoints) {
    if (c.id == record.id) {
      return absl::AlreadyExistsError(
          absl::StrCat("checkpoint id ", record.id, " is already recorded"));
    }
  }
  next.checkpoints.push_back(record);
  return CommitLocked(std::move(next));
}

std::vector<CheckpointRecord> DurableState::ListCheckpoints() const {
  absl::MutexLock lock(&mu_);
  return snapshot_.checkpoints;
}

}  // namespace zeroshard::server
