// checkpoint_bench's server: the bench's checkpoint service
// (bench_service.h) in a process of its own, linked as zeroshard-coordinator
// is, until SIGTERM or SIGINT.
// Usage: checkpoint_bench_server --dir DIR [--tls-ca F --tls-cert F --tls-key F]
// Prints "listening on 127.0.0.1:PORT (grpc)" once it serves.
#include <signal.h>

#include <cstdio>
#include <string>

#include "bench/checkpoint/bench_service.h"
#include "common/infra/cli.h"
#include "common/infra/process_setup.h"

int main(int argc, char** argv) {
  CLI::App app("checkpoint_bench's checkpoint service, in its own process");
  std::string dir;
  zeroshard::TlsFiles tls;
  app.add_option("--dir", dir, "where the checkpoints go")->required();
  app.add_option("--tls-ca", tls.ca, "PEM CA client certificates must chain to");
  app.add_option("--tls-cert", tls.cert, "PEM server certificate (turns mTLS on)");
  app.add_option("--tls-key", tls.key, "PEM key of --tls-cert");
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  sigset_t stop = zeroshard::BlockStopSignals();  // Before gRPC starts its threads.
  zeroshard::bench::CheckpointBenchService service =
      zeroshard::bench::StartCheckpointBenchService(dir, tls);
  std::printf("checkpoint_bench_server: listening on 127.0.0.1:%d (grpc)\n", service.port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  service.server->Shutdown();
  return 0;
}
