// `zeroshard status --coordinator HOST:PORT [--json]`: one GetJobStatus
// call, printed as a table (or as the JobStatus message in JSON, where
// job_state is e.g. "JOB_STATE_COMPLETED"). The table's first line names the
// job's state: waiting, running, completed or failed. Exit 0 on success
// (whatever the job's state), 1 with a one-line error if the coordinator
// cannot be reached or refuses.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/proto_json.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/security_flags.h"

namespace zeroshard::cli {
namespace {

struct StatusFlags {
  std::string coordinator = kDefaultCoordinator;
  std::string job_id;
  bool json = false;
  double timeout_seconds = 5;
  ClientSecurity security;
};

// The job's lifecycle state; a coordinator that predates job states
// reports none, so its generation state stands in.
const char* JobStateName(const v1::JobStatus& st) {
  switch (st.job_state()) {
    case v1::JOB_STATE_WAITING:
      return "waiting";
    case v1::JOB_STATE_RUNNING:
      return "running";
    case v1::JOB_STATE_COMPLETED:
      return "completed";
    case v1::JOB_STATE_FAILED:
      return "failed";
    default:
      return st.state() == v1::GenerationInfo::STATE_RUNNING ? "running" : "waiting";
  }
}

void PrintTable(const v1::JobStatus& st) {
  std::cout << absl::StrFormat("job %s  state %s  generation %d  world size %d\n", st.job_id(),
                               JobStateName(st), st.generation(), st.world_size());
  if (!st.job_state_reason().empty()) {
    std::cout << absl::StrFormat("%s: %s\n", JobStateName(st), st.job_state_reason());
  }
  std::cout << absl::StrFormat("steps %s  failures %d (max_failures %d)\n",
                               st.steps() > 0 ? absl::StrCat(st.steps()) : std::string("unknown"),
                               st.failures(), st.max_failures());
  if (st.has_last_lost()) {
    const v1::LostRank& l = st.last_lost();
    std::cout << absl::StrFormat("last lost: rank %d (worker %s) of generation %d, %s%s\n",
                                 l.rank(), l.worker_id(), l.generation(),
                                 l.reason() == "lease_expired" ? "no heartbeat (dead or stopped)"
                                                               : "silent after a failure report",
                                 l.operation().empty() ? "" : ", in " + l.operation());
  }
  std::cout << absl::StrFormat("step %d  loss %s  tokens/s %.1f  step time %.3f s\n", st.step(),
                               std::isnan(st.loss()) ? "n/a" : absl::StrFormat("%.4f", st.loss()),
                               st.tokens_per_second(), st.step_seconds());
  std::cout << absl::StrFormat("%-6s %-12s %-32s %-24s %s\n", "RANK", "MEMBER", "WORKER", "HOST",
                               "LAST HEARTBEAT");
  for (const v1::MemberInfo& m : st.members()) {
    std::cout << absl::StrFormat("%-6s %-12d %-32s %-24s %.1f s ago\n",
                                 m.rank() >= 0 ? absl::StrCat(m.rank()) : std::string("wait"),
                                 m.member_id(), m.worker_id(), m.host().empty() ? "-" : m.host(),
                                 m.last_heartbeat_age_seconds());
  }
}

int Run(const StatusFlags& f) {
  CoordinatorClient::Options options;
  options.timeout = absl::Seconds(f.timeout_seconds);
  options.security = f.security;
  auto client = CoordinatorClient::Connect(f.coordinator, options);
  if (!client.ok()) {
    std::cerr << "zeroshard status: " << client.status().message() << "\n";
    return 1;
  }
  v1::GetJobStatusRequest request;
  request.set_job_id(f.job_id);
  absl::StatusOr<v1::JobStatus> status = (*client)->GetJobStatus(request);
  if (!status.ok()) {
    std::cerr << "zeroshard status: coordinator " << f.coordinator << ": "
              << status.status().message() << "\n";
    return 1;
  }
  if (f.json) {
    // Numbers as JSON numbers, NaN (no step yet) as null.
    std::cout << ProtoToJson(*status).dump(2) << "\n";
    return 0;
  }
  PrintTable(*status);
  return 0;
}

}  // namespace

void RegisterStatusCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand(
      "status",
      "show a job's state (waiting, running, completed, failed), generation, members, "
      "failures, step and loss");
  auto flags = std::make_shared<StatusFlags>();
  AddCoordinatorOption(sub, &flags->coordinator);
  AddClientSecurityFlags(*sub, &flags->security);
  sub->add_option("--job-id", flags->job_id, "job id (default: the coordinator's)");
  sub->add_flag("--json", flags->json, "print the status as JSON");
  sub->add_option("--timeout", flags->timeout_seconds, "seconds to wait for the coordinator")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  commands.push_back({sub, [flags] { return Run(*flags); }});
}

}  // namespace zeroshard::cli
