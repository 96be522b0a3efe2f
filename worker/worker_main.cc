// zeroshard-worker: one training process (one accelerator, or CPU).
#include <iostream>

#include "common/cli.h"
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
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status status = zeroshard::RunWorker(options);
  if (!status.ok()) {
    std::cerr << "zeroshard-worker: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
