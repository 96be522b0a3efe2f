// CoordinatorCore: naming the rank the job lost to a failure, and what the
// survivors were doing then (LostRank in coordinator.proto): in the log, in
// GetJobStatus and in /metrics (zeroshard_last_lost_rank).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/core/coordinator_core.h"

namespace zeroshard::server {
namespace {

// The collective a failure report names: WaitOrAbort leads its errors with
// the operation ("all_gather: ...").
std::string OperationIn(const std::string& report) {
  for (const char* op :
       {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "barrier", "ring_shift"}) {
    if (absl::StrContains(report, op)) return op;
  }
  return "";
}

}  // namespace

// The report (and the operation it names) of last_lost_, and its one
// zeroshard_last_lost_rank series.
void CoordinatorCore::SetLostReportLocked(const std::string& report) {
  last_lost_.set_report(report);
  last_lost_.set_operation(OperationIn(report));
  metrics_.SetLastLost(last_lost_.worker_id(), last_lost_.operation(), last_lost_.reason(),
                       last_lost_.rank());
}

void CoordinatorCore::NoteReportLocked(uint64_t generation, const std::string& report) {
  if (generation > report_generation_) {
    report_generation_ = generation;
    first_report_ = report;
  }
  // The rank may have been lost (lease expiry) before a survivor's report
  // said what the survivors were in; and the first report may name no
  // collective (a rank that failed between them) where a later one does.
  const bool names_more = last_lost_.operation().empty() && !OperationIn(report).empty();
  if (last_lost_.generation() == generation && (last_lost_.report().empty() || names_more)) {
    SetLostReportLocked(report);
    effects_.log.push_back(absl::StrCat(
        "lost rank ", last_lost_.rank(), " was in ",
        last_lost_.operation().empty() ? "no named collective" : last_lost_.operation(),
        " (report: ", report, ")"));
  }
}

void CoordinatorCore::NoteLostLocked(const MembershipEvent& e) {
  last_lost_.Clear();
  last_lost_.set_rank(e.rank);
  last_lost_.set_generation(e.generation);
  last_lost_.set_worker_id(e.worker_id);
  last_lost_.set_reason(ChangeReasonName(e.reason));
  SetLostReportLocked(report_generation_ == e.generation ? first_report_ : "");
  effects_.log.push_back(absl::StrCat(
      "lost rank ", e.rank, " (worker ", e.worker_id, ") of generation ", e.generation, ": ",
      e.reason == ChangeReason::kLeaseExpired ? "no heartbeat (dead or stopped)"
                                              : "silent after a failure report",
      last_lost_.operation().empty() ? "" : ", the survivors were in ", last_lost_.operation()));
}

}  // namespace zeroshard::server
