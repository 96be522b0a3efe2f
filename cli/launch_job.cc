#include "cli/launch_job.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/launch_checks.h"
#include "cli/launch_monitor.h"
#include "cli/launch_summary.h"
#include "cli/launch_tokens.h"
#include "common/infra/child_process.h"
#include "common/infra/dir_lock.h"
#include "common/infra/process_memory.h"
#include "common/model/job_model.h"
#include "common/model/model_config.h"
#include "server/rpc/coordinator_stack.h"
#include "worker/trainer/worker_session.h"

namespace zeroshard::cli {
namespace {

std::atomic<int> g_interrupted{0};
void OnSignal(int) { g_interrupted.store(1); }

// Keeps the embedded coordinator serving /metrics a little after the job, so
// a Prometheus scraping it sees the last steps; a signal cuts it short.
void Linger(const LaunchOptions& o) {
  const bool fixed_port = !o.metrics_listen.empty() && !absl::EndsWith(o.metrics_listen, ":0");
  const double seconds = o.linger_seconds >= 0 ? o.linger_seconds : (fixed_port ? 5.0 : 0.0);
  if (seconds <= 0 || g_interrupted.load()) return;
  std::cout << "zeroshard launch: keeping the coordinator's /metrics up for " << seconds
            << " s (--linger) for a final scrape\n"
            << std::flush;
  const absl::Time until = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < until && !g_interrupted.load()) absl::SleepFor(absl::Milliseconds(50));
}

std::string SiblingBinary(const std::string& name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : self.parent_path()).append(name).string();
}

std::string DefaultRunDir() {
  return absl::StrCat("runs/", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone()));
}

std::vector<std::unique_ptr<ChildProcess>> StartWorkers(const LaunchOptions& o,
                                                        const std::string& address) {
  std::vector<std::unique_ptr<ChildProcess>> workers;
  const std::string bin = SiblingBinary("zeroshard-worker");
  std::vector<std::string> args{bin, "--coordinator", address, "--threads",
                                std::to_string(o.job.threads)};
  const std::pair<const char*, const std::string*> security[] = {
      {"--tls-ca", &o.security.tls.ca},
      {"--tls-cert", &o.security.tls.cert},
      {"--tls-key", &o.security.tls.key},
      {"--token-file", &o.security.token_file}};
  for (const auto& [flag, value] : security) {
    if (!value->empty()) args.insert(args.end(), {flag, *value});
  }
  if (o.security.insecure) args.push_back("--insecure");
  if (o.adamw_isa != "auto") args.insert(args.end(), {"--adamw-isa", o.adamw_isa});
  for (int i = 0; i < o.workers; ++i) {
    std::vector<std::string> argv = args;
    argv.insert(argv.end(), {"--worker-id", absl::StrCat("local-", i)});
    workers.push_back(std::make_unique<ChildProcess>(
        argv, absl::StrCat(o.run_dir, "/worker-", i, ".log"),
        // LOCAL_RANK picks worker i's GPU (i mod visible GPUs) with --device cuda.
        std::vector<std::string>{absl::StrCat("OPENBLAS_NUM_THREADS=", o.job.threads),
                                 absl::StrCat("LOCAL_RANK=", i)}));
  }
  return workers;
}

void PrintProgress(const ProgressState& progress, bool tty, int64_t* last_printed) {
  if (!progress.last) return;
  if (tty) {
    std::cout << "\r\033[K" << progress.Line() << std::flush;
    return;
  }
  const int64_t every = std::max<int64_t>(1, progress.total_steps / 20);
  const int64_t step = progress.last->step;
  if (step != *last_printed && (step - *last_printed >= every || progress.last->val_loss >= 0)) {
    std::cout << progress.Line() << "\n" << std::flush;
    *last_printed = progress.last->step;
  }
}

// A step's sample (--sample-every) on its own lines, above the progress line.
void PrintSample(const StepRecord& r, bool tty) {
  if (r.sample.empty()) return;
  std::cout << (tty ? "\r\033[K" : "") << "sample at step " << r.step << ":\n"
            << r.sample << "\n---\n"
            << std::flush;
}

// Every new record into the progress, its sample printed.
void Follow(StepLogFollower& follower, ProgressState& progress, bool tty) {
  for (const StepRecord& r : follower.Poll()) {
    progress.Add(r);
    PrintSample(r, tty);
  }
}

// The last non-empty line of a worker's log: its error, when it failed.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Each worker's peak RSS, from the line it prints as it finishes
// (common/infra/process_memory.h kPeakRssLinePrefix); "-" where a log lacks it.
void PrintPeakRss(const LaunchOptions& o) {
  std::string line = "zeroshard launch: peak RSS (VmHWM) bytes per worker:";
  for (int i = 0; i < o.workers; ++i) {
    std::ifstream in(absl::StrCat(o.run_dir, "/worker-", i, ".log"));
    std::string text, found = "-";
    while (std::getline(in, text)) {
      if (text.rfind(kPeakRssLinePrefix, 0) == 0)
        found = text.substr(sizeof(kPeakRssLinePrefix) - 1);
    }
    absl::StrAppend(&line, " ", found);
  }
  std::cout << line << "\n";
}

// Watches until every worker exits; returns the launch exit code.
int Watch(const LaunchOptions& o, std::vector<std::unique_ptr<ChildProcess>>& workers,
          ProgressState& progress) {
  StepLogFollower follower(o.job.log_path);
  const bool tty = isatty(STDOUT_FILENO);
  int64_t last_printed = 0;
  while (true) {
    Follow(follower, progress, tty);
    PrintProgress(progress, tty, &last_printed);
    if (g_interrupted.load()) {
      std::cout << "\nzeroshard launch: interrupted, stopping workers\n";
      for (auto& w : workers) w->Stop(absl::Seconds(5));
      return 130;
    }
    int running = 0;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (workers[i]->Running()) {
        ++running;
        continue;
      }
      const int code = workers[i]->Wait(absl::ZeroDuration());
      if (code != 0) {
        const std::string log = absl::StrCat(o.run_dir, "/worker-", i, ".log");
        std::cerr << "\nzeroshard launch: worker " << i << " exited with code " << code << ": "
                  << LastLine(log) << " (log: " << log << ")\n";
        for (auto& w : workers) w->Stop(absl::Seconds(5));
        return code == 2 ? 2 : 1;  // 2: the job cannot run as configured.
      }
    }
    if (running == 0) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  Follow(follower, progress, tty);
  if (tty) std::cout << "\r\033[K" << progress.Line() << "\n";
  return 0;
}

// The coordinator the workers join: embedded (started here with the job's
// config) or external (--coordinator; the job config is the one it serves).
struct CoordinatorHandle {
  CoordinatorStack stack;  // Empty when external.
  std::string address;
};

absl::StatusOr<CoordinatorHandle> StartEmbedded(const LaunchOptions& o) {
  CoordinatorOptions copts;
  copts.listen = "127.0.0.1:0";
  copts.metrics_listen = o.metrics_listen;
  copts.state_dir = o.run_dir + "/state";
  copts.core.job_id = "launch";
  copts.core.min_workers = o.workers;
  copts.core.max_workers = o.workers;
  copts.core.settle = absl::Milliseconds(200);
  copts.core.job_config_json = o.job.ToJson();
  copts.checkpoint_dir = o.job.checkpoint_dir;
  copts.security.tls = o.security.tls;
  copts.security.token_file = o.coordinator_token_file;
  if (auto model = JobModel(o.job.model, o.job.model_desc, o.job.seq_len); model.ok()) {
    copts.core.units = ModelUnits(*model);
  }
  auto stack = StartCoordinatorStack(copts, o.keep_checkpoints);
  if (!stack.ok()) return stack.status();
  CoordinatorHandle handle;
  handle.stack = *std::move(stack);
  const CoordinatorServer& server = *handle.stack.server;
  handle.address = absl::StrCat("127.0.0.1:", server.port());
  std::cout << "zeroshard launch: coordinator on " << handle.address
            << ", metrics on http://127.0.0.1:" << server.metrics_port() << "/metrics, logs in "
            << o.run_dir << "\n"
            << std::flush;
  return handle;
}

// Joins an external coordinator: its job config replaces the local flags.
absl::StatusOr<CoordinatorHandle> UseExternal(LaunchOptions& o) {
  CoordinatorClient::Options client_options;
  client_options.security = o.security;
  auto client = CoordinatorClient::Connect(o.coordinator, client_options);
  if (!client.ok()) return client.status();
  auto status = WorkerSession::ProbeJob(**client, absl::Seconds(10));
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("no reachable coordinator at ", o.coordinator, ": ",
                                               status.status().message()));
  }
  v1::GetGenerationRequest request;
  request.set_job_id(status->job_id());
  auto info = (*client)->GetGeneration(request);
  if (!info.ok()) return info.status();
  auto job = JobConfig::FromJson(info->job_config_json());
  if (!job.ok()) return job.status();
  o.job = *std::move(job);
  std::cout << "zeroshard launch: joining coordinator " << o.coordinator << " (job "
            << status->job_id() << "), logs in " << o.run_dir << "\n"
            << std::flush;
  return CoordinatorHandle{{}, o.coordinator};
}

// A launch without --resume or --resume-step is a new job: it forgets the
// run dir's coordinator state, as it truncates the step log (a job that
// completed there would otherwise turn the new workers away). Refused while
// another coordinator holds that state.
absl::Status StartFreshState(const std::string& state_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(state_dir, ec)) return absl::OkStatus();
  {
    absl::StatusOr<std::unique_ptr<DirLock>> lock =
        DirLock::Acquire(state_dir, CoordinatorServer::kStateLockName);
    if (!lock.ok()) return lock.status();
  }
  std::filesystem::remove_all(state_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(state_dir, ": ", ec.message()));
  return absl::OkStatus();
}

// The run directory (made, absolute) and what lives in it: the step log,
// the coordinator's fresh state, and for a model directory's weights the
// checkpoint directory they are served through (model_weights_read.cc).
// Returns the exit code of a failure, else 0.
int PrepareRunDir(LaunchOptions& o, bool external) {
  if (o.run_dir.empty()) o.run_dir = DefaultRunDir();
  std::error_code ec;
  std::filesystem::create_directories(o.run_dir, ec);
  if (ec) {
    std::cerr << "zeroshard launch: --run-dir " << o.run_dir << ": " << ec.message() << "\n";
    return 2;
  }
  o.run_dir = std::filesystem::absolute(o.run_dir, ec).string();
  if (external) return 0;
  if (o.job.log_path.empty()) o.job.log_path = o.run_dir + "/steps.jsonl";
  if (o.job.loads_model_weights() && o.job.checkpoint_dir.empty()) {
    o.job.checkpoint_dir = o.run_dir + "/checkpoints";
  }
  std::filesystem::remove(o.job.log_path, ec);
  if (!o.job.resume && o.job.resume_step < 0) {
    if (absl::Status s = StartFreshState(o.run_dir + "/state"); !s.ok()) {
      std::cerr << "zeroshard launch: --run-dir " << o.run_dir << ": " << s.message() << "\n";
      return 1;
    }
  }
  return 0;
}

// The embedded coordinator's tokens: the user's --token-file, else fresh
// ones only this launch knows (launch_tokens.h). Returns an exit code.
int PrepareTokens(LaunchOptions& o, bool external) {
  if (external) return 0;
  if (!o.security.token_file.empty()) {
    o.coordinator_token_file = o.security.token_file;
    return 0;
  }
  absl::StatusOr<LocalTokens> tokens = WriteLocalTokens(o.run_dir);
  if (!tokens.ok()) {
    std::cerr << "zeroshard launch: --run-dir " << o.run_dir << ": " << tokens.status().message()
              << "\n";
    return 1;
  }
  o.coordinator_token_file = tokens->coordinator_file;
  o.security.token_file = tokens->worker_file;
  std::cout << "zeroshard launch: the job's tokens are new and known only to this launch; for "
               "zeroshard status|stop|checkpoint use --token-file "
            << tokens->admin_file << "\n";
  return 0;
}

}  // namespace

int RunLaunch(LaunchOptions o) {
  const bool external = !o.coordinator.empty();
  if (!external) {
    if (absl::Status s = PrepareLaunch(o); !s.ok()) {
      std::cerr << "zeroshard launch: " << s.message() << "\n";
      return 2;
    }
  }
  if (int code = PrepareRunDir(o, external); code != 0) return code;
  if (int code = PrepareTokens(o, external); code != 0) return code;

  auto coordinator = external ? UseExternal(o) : StartEmbedded(o);
  if (!coordinator.ok()) {
    std::cerr << "zeroshard launch: " << coordinator.status().message() << "\n";
    return 1;
  }
  std::cout << "zeroshard launch: " << o.workers << " workers, model " << o.job.model
            << absl::StrCat(", stage ", o.job.stage, ", ") << o.job.steps << " steps, global batch "
            << o.job.global_batch << ", " << DTypeName(o.job.compute_dtype) << " compute"
            << (o.job.activation_checkpointing == ActivationCheckpointing::kBlocks
                    ? ", activation checkpointing blocks"
                    : "")
            << ", text as "
            << (o.job.tokenizer == "bytes" ? "bytes" : "tokens of " + o.job.tokenizer) << "\n";

  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  const absl::Time start = absl::Now();
  auto workers = StartWorkers(o, coordinator->address);
  ProgressState progress;
  progress.total_steps = o.job.steps;
  const int code = Watch(o, workers, progress);
  if (coordinator->stack.server) {
    Linger(o);
    coordinator->stack.server->Shutdown();
  }
  if (code != 0) return code;

  SummaryInputs summary;
  summary.progress = &progress;
  summary.stage = o.job.stage;
  const ModelConfig model = *JobModel(o.job.model, o.job.model_desc, o.job.seq_len);
  summary.num_params = ModelParamCount(model);
  summary.vocab = model.vocab;
  summary.compute_bytes = static_cast<int>(DTypeSize(o.job.compute_dtype));
  summary.grad_bytes = static_cast<int>(DTypeSize(o.job.reduce_dtype));
  summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << FormatSummary(summary) << "  step log: " << o.job.log_path << "\n";
  if (!external) PrintPeakRss(o);
  return 0;
}

}  // namespace zeroshard::cli
