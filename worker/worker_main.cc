// zeroshard-worker: one training process (one accelerator, or CPU). Exit 0
// when the job is done (or was already), or after a graceful leave on
// SIGTERM/SIGINT; 1 with one line naming the cause otherwise (e.g. "job X
// failed: failure 21 exceeds max_failures 20 ...").
#include <iostream>

#include "common/cli.h"
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
  app.footer(
      "Signals: SIGTERM or SIGINT leaves the job at the next step boundary and exits 0 "
      "(a second signal exits at once). Exit 1 with one line naming the cause otherwise.");
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
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
