// `zeroshard checkpoint now|list|export`.
//   now    [--coordinator HOST:PORT] asks the trainers to save at their next
//                                    step (bumps the coordinator's trigger).
//   list   [--coordinator HOST:PORT] committed checkpoints, oldest first, and
//                                    any rejected (manifest/file mismatch).
//   export --checkpoint DIR --out F  consolidated master weights as
//          [--format native|hf]      safetensors; DIR is a checkpoint dir
//          [--dtype fp32|bf16]       (its latest) or one checkpoint's dir.
//          [--max-shard-size 5GB]    native (default): F is one fp32 file in
//                                    zeroshard's names; hf (alias hf-gpt2):
//                                    F is a directory that transformers'
//                                    AutoModelForCausalLM loads (shards and
//                                    an index past --max-shard-size, and
//                                    config.json; server/checkpoint/
//                                    checkpoint_export.h ExportHf).
// The coordinator defaults as for `status` (commands.h: $ZEROSHARD_COORDINATOR,
// else 127.0.0.1:50051).
// Exit codes: 0 done, 1 the operation failed (message on stderr), 2 usage.
#include <iostream>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "common/rpc/security_flags.h"
#include "server/checkpoint/checkpoint_export.h"
#include "worker/checkpoint/checkpoint_client.h"

namespace zeroshard::cli {
namespace {

struct CheckpointFlags {
  std::string coordinator;
  std::string job_id;
  double timeout_seconds = 10;
  std::string checkpoint;
  std::string out;
  std::string format = "native";
  std::string dtype = "fp32";
  int64_t max_shard_bytes = 5'000'000'000;
  ClientSecurity security;
};

int RunNow(const CheckpointFlags& f) {
  auto client = checkpoint::CheckpointClient::Connect(f.coordinator, {}, f.security);
  if (!client.ok()) {
    std::cerr << "zeroshard checkpoint now: " << client.status().message() << "\n";
    return 1;
  }
  auto seq = (*client)->RequestCheckpoint(absl::Now() + absl::Seconds(f.timeout_seconds));
  if (!seq.ok()) {
    std::cerr << "zeroshard checkpoint now: " << seq.status().message() << "\n";
    return 1;
  }
  std::cout << "checkpoint requested (request " << *seq << "); trainers save at their next step\n";
  return 0;
}

int RunList(const CheckpointFlags& f) {
  auto client = checkpoint::CheckpointClient::Connect(f.coordinator, {}, f.security);
  if (!client.ok()) {
    std::cerr << "zeroshard checkpoint list: " << client.status().message() << "\n";
    return 1;
  }
  auto list = (*client)->List(f.job_id, absl::Now() + absl::Seconds(f.timeout_seconds));
  if (!list.ok()) {
    std::cerr << "zeroshard checkpoint list: " << list.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat("%-16s %-12s %10s %6s %6s %14s %s\n", "CHECKPOINT", "JOB", "STEP",
                               "WORLD", "STAGE", "BYTES", "COMMITTED (UTC)");
  for (const v1::CheckpointSummary& c : list->checkpoints()) {
    std::cout << absl::StrFormat(
        "%-16s %-12s %10d %6d %6d %14d %s\n", c.checkpoint_id(), c.job_id(), c.step(),
        c.world_size(), c.stage(), c.bytes(),
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(c.created_unix_ms()),
                         absl::UTCTimeZone()));
  }
  for (const std::string& r : list->rejected()) std::cout << "rejected: " << r << "\n";
  return 0;
}

int RunExport(const CheckpointFlags& f) {
  const bool hf = f.format == "hf" || f.format == "hf-gpt2";
  if (!hf && f.dtype != "fp32") {
    std::cerr << "zeroshard checkpoint export: --dtype " << f.dtype << " needs --format hf\n";
    return 2;
  }
  auto r = hf ? server::ExportHf(f.checkpoint, f.out, {f.dtype == "bf16", f.max_shard_bytes})
              : server::ExportSafetensors(f.checkpoint, f.out);
  if (!r.ok()) {
    std::cerr << "zeroshard checkpoint export: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << "exported " << r->checkpoint_dir << " (step " << r->step << "): " << r->tensors
            << " tensors, " << r->bytes << " bytes of " << f.dtype << " weights in " << r->files
            << " file(s) -> " << f.out << (hf ? " (Hugging Face: safetensors, config.json)" : "")
            << "\n";
  return 0;
}

}  // namespace

void RegisterCheckpointCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand("checkpoint", "trigger, list and export checkpoints");
  sub->require_subcommand(1);
  static CheckpointFlags flags;
  CLI::App* now = sub->add_subcommand("now", "ask the trainers to checkpoint at their next step");
  CLI::App* list = sub->add_subcommand("list", "list committed checkpoints");
  for (CLI::App* s : {now, list}) {
    AddCoordinatorOption(s, &flags.coordinator);
    AddClientSecurityFlags(*s, &flags.security);
    s->add_option("--timeout", flags.timeout_seconds, "RPC deadline in seconds")
        ->check(CLI::Range(0.1, 3600.0));
  }
  list->add_option("--job", flags.job_id, "only this job's checkpoints");
  CLI::App* exp = sub->add_subcommand("export", "write consolidated fp32 weights as safetensors");
  exp->add_option("--checkpoint", flags.checkpoint,
                  "checkpoint dir (its latest committed checkpoint) or one checkpoint's dir")
      ->required();
  exp->add_option("--out", flags.out,
                  "output: a file (native, e.g. model.safetensors) or a directory (hf)")
      ->required();
  exp->add_option("--format", flags.format,
                  "native (zeroshard's names, fp32) or hf (a directory transformers' "
                  "AutoModelForCausalLM loads; hf-gpt2 is an alias)")
      ->check(CLI::IsMember({"native", "hf", "hf-gpt2"}))
      ->capture_default_str();
  exp->add_option("--dtype", flags.dtype, "hf: the weights' dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  exp->add_option("--max-shard-size", flags.max_shard_bytes,
                  "hf: the largest safetensors file before the weights split into shards with "
                  "an index (bytes; 5GB, 100MB, ...)")
      ->transform(CLI::AsSizeValue(true))
      ->capture_default_str();
  commands.push_back({sub, [now, list, exp] {
                        if (now->parsed()) return RunNow(flags);
                        if (list->parsed()) return RunList(flags);
                        if (exp->parsed()) return RunExport(flags);
                        return 2;
                      }});
}

}  // namespace zeroshard::cli
