// zeroshard-coordinator: the control plane of one job. Serves the
// Coordinator gRPC API and /metrics, /healthz, /readyz until SIGTERM or
// SIGINT. Prints one line per bound address so callers that asked for port
// 0 can read the ports back.
#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <iostream>

#include "common/formats/atomic_file.h"
#include "common/infra/cli.h"
#include "common/infra/process_setup.h"
#include "common/model/job_config.h"
#include "common/model/job_model.h"
#include "common/rpc/grpc_log_limit.h"
#include "common/rpc/security_flags.h"
#include "server/rpc/coordinator_server.h"
#include "server/rpc/coordinator_stack.h"

namespace {

absl::Duration Seconds(double s) { return absl::Microseconds(std::llround(s * 1e6)); }

// The command line as parsed; ApplyFlags completes `options` from the rest.
struct Flags {
  zeroshard::CoordinatorOptions options;
  double settle = 1, heartbeat = 1, lease = 5, handoff_grace = 30;  // Seconds.
  std::string job_config_file, job_config_text;
  int keep_checkpoints = 0;
};

void AddServingFlags(CLI::App& app, Flags& f) {
  zeroshard::CoordinatorOptions& o = f.options;
  app.add_option("--listen", o.listen, "gRPC address to serve on (HOST:PORT; port 0 picks one)")
      ->capture_default_str();
  app.add_option("--metrics-listen", o.metrics_listen,
                 "HTTP address for /metrics, /healthz, /readyz (HOST:PORT; \"\" = off)")
      ->capture_default_str();
  zeroshard::AddServerTlsFlags(app, &o.security.tls);
  app.add_option("--token-file", o.security.token_file,
                 "tokens callers must present, one \"role token\" per line (roles reader, "
                 "worker, admin; '#' comments); default: none required")
      ->check(CLI::ExistingFile);
  app.add_flag("--insecure", o.security.insecure,
               "serve a non-loopback --listen without TLS and tokens (logged, and shown in "
               "zeroshard_build_info{insecure=\"true\"})");
  app.add_option_function<std::string>(
         "--worker-identity",
         [&o](const std::string& v) { o.security.bind_worker_identity = v == "cert"; },
         "none (default), or cert: a Join's worker_id must be a subjectAltName or the CN of "
         "the worker's client certificate (needs --tls-ca)")
      ->check(CLI::IsMember({"none", "cert"}));
  app.add_option("--state-dir", o.state_dir,
                 "directory for durable state (job config, generation counter, last step); "
                 "\"\" = nothing persisted");
}

void AddJobFlags(CLI::App& app, Flags& f) {
  zeroshard::server::CoreOptions& core = f.options.core;
  app.add_option("--job-id", core.job_id, "job id workers must name")->capture_default_str();
  app.add_option("--min-workers", core.min_workers, "members needed to form a generation")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--max-workers", core.max_workers, "largest world size")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--settle", f.settle, "seconds without membership change before forming")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--heartbeat-interval", f.heartbeat, "seconds between worker heartbeats")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  app.add_option("--lease-timeout", f.lease, "seconds of silence before a member is dropped")
      ->check(CLI::Range(0.002, 3600.0))
      ->capture_default_str();
  app.add_option("--handoff-grace", f.handoff_grace,
                 "seconds the ranks get to stop at a step boundary and hand their state to a "
                 "joiner before the generation is ended under them (0 = at once)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--max-kv-waits-per-caller", core.max_kv_waits_per_caller,
                 "KvWaits one peer host may have parked (RESOURCE_EXHAUSTED beyond)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-kv-waits", core.max_kv_waits, "KvWaits parked in all")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-streams-per-caller", f.options.max_streams_per_caller,
                 "open WatchGeneration, HeartbeatStream, UploadShard and DownloadRange streams "
                 "one peer host may hold (RESOURCE_EXHAUSTED beyond)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option_function<double>(
         "--handshake-timeout", [&](double s) { f.options.handshake_timeout = absl::Seconds(s); },
         "seconds a connection has to finish its TLS/HTTP2 handshake before it is closed "
         "(default 10)")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--max-streams", f.options.max_streams,
                 "open streams of all callers together (RESOURCE_EXHAUSTED beyond)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--heartbeat-stream-threads", f.options.heartbeat_stream_threads,
                 "threads serving the workers' HeartbeatStreams, each driving one completion queue")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--alignment", core.alignment, "shard plan alignment, elements")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  auto* file_opt = app.add_option("--job-config", f.job_config_file, "job config JSON file")
                       ->check(CLI::ExistingFile);
  app.add_option("--job-config-json", f.job_config_text, "job config as JSON text")
      ->excludes(file_opt);
}

void AddCheckpointFlags(CLI::App& app, Flags& f) {
  app.add_option("--local-reads", f.options.local_reads,
                 "let workers on this host read checkpoint ranges from the files themselves, "
                 "through descriptors handed over a Unix socket (false: every byte through "
                 "DownloadRange)")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", f.options.checkpoint_dir,
                 "where checkpoints are written (default: the job config's checkpoint_dir)");
  app.add_option("--keep-checkpoints", f.keep_checkpoints,
                 "committed checkpoints kept, oldest deleted first (0 = all)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
}

// Durations and the job config (read from --job-config, prepared to be
// served). Errors are the job config's: reading or preparing it.
absl::Status ApplyFlags(Flags& f) {
  zeroshard::server::CoreOptions& core = f.options.core;
  core.settle = Seconds(f.settle);
  core.heartbeat_interval = Seconds(f.heartbeat);
  core.lease_timeout = Seconds(f.lease);
  core.handoff_grace = Seconds(f.handoff_grace);
  core.job_config_json = f.job_config_text;
  if (!f.job_config_file.empty()) {
    absl::StatusOr<std::string> text = zeroshard::ReadWholeFile(f.job_config_file);
    if (!text.ok()) return text.status();
    core.job_config_json = *text;
  }
  absl::StatusOr<std::string> served =
      zeroshard::PrepareServedJobConfig(core.job_config_json, f.options.checkpoint_dir);
  if (!served.ok()) return served.status();
  core.job_config_json = *served;
  // A model no worker knows would be served as ready and fail every worker.
  if (!core.job_config_json.empty()) {
    absl::StatusOr<zeroshard::JobConfig> job = zeroshard::JobConfig::FromJson(core.job_config_json);
    if (job.ok()) {
      auto model = zeroshard::JobModel(job->model, job->model_desc, job->seq_len);
      if (!model.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("job config: ", model.status().message()));
      }
      // The model definition is the job config's, never a joiner's (issue 16).
      core.units = zeroshard::ModelUnits(*model);
    }
  }
  // The job's checkpoint_dir is where the coordinator stores checkpoints:
  // without --checkpoint-dir, serve that one. Otherwise its workers would
  // save and restore against a coordinator with no checkpoint service.
  if (f.options.checkpoint_dir.empty() && !core.job_config_json.empty()) {
    absl::StatusOr<zeroshard::JobConfig> job = zeroshard::JobConfig::FromJson(core.job_config_json);
    if (job.ok()) f.options.checkpoint_dir = job->checkpoint_dir;
  }
  return absl::OkStatus();
}

void PrintAddresses(const zeroshard::CoordinatorOptions& o,
                    const zeroshard::CoordinatorServer& server) {
  std::cout << "zeroshard-coordinator: listening on " << server.address() << " (grpc)";
  if (server.metrics_port() > 0) {
    std::cout << ", " << o.metrics_listen.substr(0, o.metrics_listen.rfind(':')) << ":"
              << server.metrics_port() << " (metrics)";
  }
  std::cout << "\nzeroshard-coordinator: job " << o.core.job_id << ", generation "
            << server.generation() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  zeroshard::SetUpProcess(argv[0]);
  zeroshard::InstallGrpcLogLimit();  // No log flood from connections anyone can open.
  CLI::App app{"zeroshard coordinator: membership, shard plan, rendezvous, state, metrics",
               "zeroshard-coordinator"};
  zeroshard::AddVersionFlag(app);
  Flags flags;
  flags.options.listen = "127.0.0.1:50051";
  flags.options.metrics_listen = "127.0.0.1:9464";
  AddServingFlags(app, flags);
  AddJobFlags(app, flags);
  AddCheckpointFlags(app, flags);
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  if (absl::Status st = ApplyFlags(flags); !st.ok()) {
    std::cerr << "zeroshard-coordinator: --job-config: " << st.message() << "\n";
    return 2;
  }
  const zeroshard::CoordinatorOptions& o = flags.options;

  sigset_t stop_signals = zeroshard::BlockStopSignals();
  // The checkpoint service shares the coordinator's port (checkpoint.proto).
  auto stack = zeroshard::StartCoordinatorStack(o, flags.keep_checkpoints);
  if (!stack.ok()) {
    std::cerr << "zeroshard-coordinator: " << stack.status().message() << "\n";
    return absl::IsInvalidArgument(stack.status()) ? 2 : 1;
  }
  PrintAddresses(o, *stack->server);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "zeroshard-coordinator: signal " << sig << ", shutting down" << std::endl;
  stack->server->Shutdown();
  return 0;
}
