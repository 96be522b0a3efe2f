#include "cli/launch_summary.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/zero_memory.h"

namespace zeroshard::cli {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string MiB(int64_t bytes) { return absl::StrFormat("%.3f", bytes / 1048576.0); }

// `activations`: false for the ZeRO formula, which has none ("-").
// `offloaded` (host memory or NVMe files under --offload-*) is outside the
// model-state total, which is what the device holds; shown when some rank
// offloads.
std::string Row(const std::string& label, const MemoryByKind& m, bool activations, bool offload) {
  std::string row = absl::StrFormat("  %-14s %10s %10s %10s %10s %11s %11s", label, MiB(m.params),
                                    MiB(m.grads), MiB(m.optimizer), MiB(m.buffers),
                                    MiB(m.model_state()), activations ? MiB(m.activations) : "-");
  if (offload) absl::StrAppend(&row, absl::StrFormat(" %10s", MiB(m.offloaded)));
  return row + "\n";
}

}  // namespace

std::string FormatSummary(const SummaryInputs& in) {
  const ProgressState& p = *in.progress;
  if (!p.last) return "no step completed\n";
  const StepRecord& last = *p.last;
  const int64_t ran = last.step - p.first_step + 1;
  std::string out =
      absl::StrFormat("\nzeroshard launch: %d steps in %.1f s, %d ranks, ZeRO stage %d\n", ran,
                      in.wall_seconds, last.world_size, in.stage);
  if (p.first_step > 1) {
    absl::StrAppend(&out,
                    absl::StrFormat("  resumed from the checkpoint at step %d; now at step %d\n",
                                    p.first_step - 1, last.step));
  }
  absl::StrAppend(&out,
                  absl::StrFormat("  train loss  %.4f -> %.4f   (ln %d = %.4f)\n", p.first_loss,
                                  last.loss, in.vocab, std::log(static_cast<double>(in.vocab))));
  if (p.last_val_loss >= 0) {
    absl::StrAppend(
        &out, absl::StrFormat("  val loss    %.4f at step %d\n", p.last_val_loss, p.last_val_step));
  }
  absl::StrAppend(&out, absl::StrFormat("  throughput  %.0f tokens/s (median over steps)\n",
                                        Median(p.tokens_per_second)));
  const MemoryByKind formula =
      ZeroFormulaBytes(in.stage, in.num_params, last.world_size, in.compute_bytes, in.grad_bytes);
  absl::StrAppend(&out, absl::StrFormat("\n  model-state memory per rank, MiB (peak; Ψ = %d "
                                        "parameters, formula without padding)\n",
                                        in.num_params));
  const bool offload = std::any_of(last.ranks.begin(), last.ranks.end(),
                                   [](const auto& r) { return r.peak_memory.offloaded > 0; });
  absl::StrAppend(&out, absl::StrFormat("  %-14s %10s %10s %10s %10s %11s %11s%s\n", "", "params",
                                        "grads", "optimizer", "buffers", "model state",
                                        "activations", offload ? "  offloaded" : ""));
  absl::StrAppend(&out, Row(absl::StrCat("ZeRO stage ", in.stage), formula, false, offload));
  for (size_t r = 0; r < last.ranks.size(); ++r) {
    absl::StrAppend(&out, Row(absl::StrCat("rank ", r), last.ranks[r].peak_memory, true, offload));
  }
  return out;
}

}  // namespace zeroshard::cli
