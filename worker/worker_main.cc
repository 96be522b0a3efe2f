// zeroshard-worker: one training process (one accelerator, or CPU). Exit 0
// when the job is done (or was already), or after a graceful leave on
// SIGTERM/SIGINT; 1 with one line naming the cause otherwise (e.g. "job X
// failed: failure 21 exceeds max_failures 20 ...").
#include <iostream>

#include "common/cli.h"
#include "common/offload_config.h"
#include "worker/trainer/stop_signal.h"
#include "worker/trainer/worker_runtime.h"

int main(int argc, char** argv) {
  CLI::App app{"zeroshard worker: joins a coordinator and trains its shard", "zeroshard-worker"};
  zeroshard::AddVersionFlag(app);
  zeroshard::WorkerOptions options;
  app.add_option("--coordinator", options.coordinator, "coordinator address HOST:PORT")->required();
  app.add_option("--worker-id", options.worker_id, "stable name of this worker (default host:pid)");
  app.add_option("--host", options.host, "address peers reach this worker on")->capture_default_str();
  app.add_option("--threads", options.threads, "compute threads (0: the job's setting)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  app.add_option("--offload-optimizer", options.offload_optimizer,
                 "none|host|nvme: where master weights and AdamW moments live (default: the "
                 "job's)")->check(CLI::IsMember({"none", "host", "nvme"}));
  app.add_option("--offload-params", options.offload_params,
                 "none|nvme: stage-3 parameter shards in --offload-dir (default: the job's)")
      ->check(CLI::IsMember({"none", "nvme"}));
  app.add_option("--offload-dir", options.offload_dir,
                 "directory for nvme offload files on this machine (default: the job's)");
  app.footer(
      "Signals: SIGTERM or SIGINT leaves the job at the next step boundary and exits 0 "
      "(a second signal exits at once). Exit 1 with one line naming the cause otherwise.");
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  if (!options.offload_dir.empty()) {
    // Before joining: a missing or unwritable dir is a usage error.
    if (absl::Status s = zeroshard::CheckOffloadDir(options.offload_dir, 0); !s.ok()) {
      std::cerr << "zeroshard-worker: " << s.message() << "\n";
      return 2;
    }
  }
  // SIGTERM/SIGINT: leave at the next step boundary and exit 0; a second
  // one exits at once.
  zeroshard::InstallStopSignalHandlers();
  const absl::Status status = zeroshard::RunWorker(options);
  if (!status.ok()) {
    std::cerr << "zeroshard-worker: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
