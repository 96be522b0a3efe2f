// `zeroshard stop --coordinator HOST:PORT`: ends a running job early and
// keeps what it trained (coordinator.proto StopJob, the admin role). The
// ranks save a checkpoint at their next step boundary (when the job has a
// checkpoint_dir) and complete the job there; `zeroshard status` then says
// "completed: stopped by request at step N". Exit 0 once the coordinator
// took the request, 1 with a one-line error otherwise (unreachable, refused,
// or the job already ended).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/security_flags.h"

namespace zeroshard::cli {
namespace {

struct StopFlags {
  std::string coordinator = kDefaultCoordinator;
  std::string job_id;
  double timeout_seconds = 10;
  ClientSecurity security;
};

int Run(const StopFlags& f) {
  CoordinatorClient::Options options;
  options.timeout = absl::Seconds(f.timeout_seconds);
  options.security = f.security;
  auto client = CoordinatorClient::Connect(f.coordinator, options);
  if (!client.ok()) {
    std::cerr << "zeroshard stop: " << client.status().message() << "\n";
    return 1;
  }
  v1::StopJobRequest request;
  request.set_job_id(f.job_id);
  absl::StatusOr<v1::StopJobResponse> reply = (*client)->StopJob(request);
  if (!reply.ok()) {
    std::cerr << "zeroshard stop: coordinator " << f.coordinator << ": " << reply.status().message()
              << "\n";
    return 1;
  }
  if (reply->job_state() == v1::JOB_STATE_COMPLETED) {
    std::cout << "job stopped at step " << reply->last_step() << " (no generation was training)\n";
    return 0;
  }
  std::cout << "stop requested after step " << reply->last_step() << ": the ranks "
            << (reply->saves_checkpoint() ? "save a checkpoint and " : "")
            << "complete the job at their next step boundary";
  if (!reply->saves_checkpoint()) std::cout << " (the job has no checkpoint_dir: nothing is saved)";
  std::cout << "\n";
  return 0;
}

}  // namespace

void RegisterStopCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand(
      "stop", "end a running job at its next step boundary, saving a checkpoint there");
  auto flags = std::make_shared<StopFlags>();
  AddCoordinatorOption(sub, &flags->coordinator);
  AddClientSecurityFlags(*sub, &flags->security);
  sub->add_option("--job-id", flags->job_id, "job id (default: the coordinator's)");
  sub->add_option("--timeout", flags->timeout_seconds, "seconds to wait for the coordinator")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  commands.push_back({sub, [flags] { return Run(*flags); }});
}

}  // namespace zeroshard::cli
