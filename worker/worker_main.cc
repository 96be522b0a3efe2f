// zeroshard-worker: one training process (one accelerator, or CPU). Exit 0
// when the job is done (or was already); --leave-exit-code (default 0) after
// a graceful leave on SIGTERM/SIGINT; 2 for a command-line error; 1 with one
// line naming the cause otherwise (e.g. "job X failed: failure 21 exceeds
// max_failures 20 ...").
#include <iostream>
#include <memory>
#include <optional>

#include "common/infra/allocator.h"
#include "common/infra/cli.h"
#include "common/infra/process_memory.h"
#include "common/infra/process_setup.h"
#include "common/job_refusal.h"
#include "common/offload_config.h"
#include "common/rpc/grpc_log_limit.h"
#include "common/rpc/security_flags.h"
#include "worker/health/health_http.h"
#include "worker/optim/adamw_isa.h"
#include "worker/trainer/stop_signal.h"
#include "worker/trainer/worker_runtime.h"

namespace {

struct Flags {
  zeroshard::WorkerOptions options;
  std::string health_listen;
  double health_stale_after_s = 60;
  int leave_exit_code = 0;
  std::string adamw_isa = "auto";
};

void AddOffloadOptions(CLI::App& app, zeroshard::WorkerOptions& o) {
  app.add_option("--offload-optimizer", o.offload_optimizer,
                 "none|host|nvme: where master weights and AdamW moments live (default: the "
                 "job's)")
      ->check(CLI::IsMember({"none", "host", "nvme"}));
  app.add_option("--offload-params", o.offload_params,
                 "none|nvme: stage-3 parameter shards in --offload-dir (default: the job's)")
      ->check(CLI::IsMember({"none", "nvme"}));
  app.add_option("--offload-prefetch", o.offload_prefetch,
                 "stage-3 parameter shards read this many units ahead of their all-gather "
                 "(--offload-params nvme; default: the job's)")
      ->check(CLI::Range(0, 64));
  app.add_option("--offload-dir", o.offload_dir,
                 "directory for nvme offload files on this machine (default: the job's)");
}

void AddOptions(CLI::App& app, Flags& f) {
  zeroshard::WorkerOptions& o = f.options;
  app.add_option("--coordinator", o.coordinator, "coordinator address HOST:PORT")->required();
  zeroshard::AddClientSecurityFlags(app, &o.security);
  app.add_option("--worker-id", o.worker_id, "stable name of this worker (default host:pid)");
  app.add_option("--host", o.host, "address peers reach this worker on")->capture_default_str();
  app.add_option("--threads", o.threads, "compute threads (0: the job's setting)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--adamw-isa", f.adamw_isa, zeroshard::kAdamWIsaHelp)
      ->check(CLI::IsMember(std::vector<std::string>(zeroshard::kAdamWIsaNames.begin(),
                                                     zeroshard::kAdamWIsaNames.end())))
      ->capture_default_str();
  AddOffloadOptions(app, o);
  app.add_option("--health-listen", f.health_listen,
                 "serve GET /healthz (heartbeats to the coordinator succeed) and /readyz (a "
                 "member of a running generation) on HOST:PORT (default: off)");
  app.add_option("--health-stale-after", f.health_stale_after_s,
                 "seconds without a successful heartbeat after which /healthz fails")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  // In a Kubernetes Indexed Job an exit 0 completes the pod's index for
  // good; a code the Job's podFailurePolicy ignores gets the index a new pod
  // instead (a drained node's worker comes back elsewhere).
  app.add_option("--leave-exit-code", f.leave_exit_code,
                 "exit status after a graceful leave on SIGTERM/SIGINT (0, or 3-255: 1 and 2 "
                 "are errors)")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  app.footer(
      "Signals: SIGTERM or SIGINT leaves the job at the next step boundary and exits with "
      "--leave-exit-code (a second signal exits at once). Exit 0 when the job is done, 2 for "
      "a command-line error or a job that cannot run here as configured (it does not fit in "
      "memory, its --offload-dir lacks room), 1 with one line naming the cause otherwise.");
}

// Checks that need more than one flag or the filesystem; an exit code (2)
// with one line on stderr when they fail.
std::optional<int> CheckFlags(const Flags& f) {
  if (absl::Status s = zeroshard::SetAdamWIsa(f.adamw_isa); !s.ok()) {
    std::cerr << "zeroshard-worker: " << s.message() << "\n";
    return 2;
  }
  if (f.leave_exit_code == 1 || f.leave_exit_code == 2) {
    std::cerr << "zeroshard-worker: --leave-exit-code " << f.leave_exit_code
              << " is reserved (1: an error, 2: a command-line error); use 0 or 3-255\n";
    return 2;
  }
  if (!f.options.offload_dir.empty()) {
    // Before joining: a missing or unwritable dir is a usage error.
    if (absl::Status s = zeroshard::CheckOffloadDir(f.options.offload_dir, 0); !s.ok()) {
      std::cerr << "zeroshard-worker: " << s.message() << "\n";
      return 2;
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  zeroshard::SetUpProcess(argv[0]);
  if (!zeroshard::SetUpWorkerMalloc())
    std::cerr << "zeroshard-worker: mallopt(M_ARENA_MAX, 1) refused\n";
  zeroshard::InstallGrpcLogLimit();  // No log flood from connections anyone can open.
  CLI::App app{"zeroshard worker: joins a coordinator and trains its shard", "zeroshard-worker"};
  zeroshard::AddVersionFlag(app);
  Flags f;
  AddOptions(app, f);
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  if (auto code = CheckFlags(f)) return *code;
  // SIGTERM/SIGINT: leave at the next step boundary and exit with
  // --leave-exit-code; a second one exits at once.
  zeroshard::InstallStopSignalHandlers();
  std::unique_ptr<zeroshard::HealthHttpServer> health;
  if (!f.health_listen.empty()) {
    auto started =
        zeroshard::HealthHttpServer::Start(f.health_listen, &zeroshard::WorkerHealth::Process(),
                                           absl::Seconds(f.health_stale_after_s));
    if (!started.ok()) {
      std::cerr << "zeroshard-worker: " << started.status().message() << "\n";
      return 1;
    }
    health = *std::move(started);
    std::cout << "health on " << f.health_listen.substr(0, f.health_listen.rfind(':')) << ":"
              << health->port() << " (/healthz, /readyz)\n"
              << std::flush;
  }
  f.options.stop = zeroshard::SignalStopToken();
  const absl::Status status = zeroshard::RunWorker(f.options);
  if (!status.ok()) {
    std::cerr << "zeroshard-worker: " << status.message() << "\n";
    return zeroshard::IsJobRefusal(status) ? 2 : 1;
  }
  if (std::optional<double> peak = zeroshard::PeakResidentMemoryBytes()) {
    std::cout << zeroshard::kPeakRssLinePrefix << static_cast<int64_t>(*peak) << "\n" << std::flush;
  }
  return f.options.stop.stop_requested() ? f.leave_exit_code : 0;
}
