// The LM head and loss in chunks of tokens against whole logits: a
// Llama-family model with Llama 3's 128,256-entry vocabulary (and a small
// body, so the head dominates) runs forward and backward on B x T tokens,
// with the head in LlamaHeadChunkTokens' chunks (2^23 logits, 32 MiB) or,
// with --whole, in one chunk of all B*T tokens (the [B T x V] fp32 logits a
// framework without chunking holds). Prints one line per mode: the model's
// activation bytes (exact accounting), the process's VmHWM after the runs,
// and the median step time of --runs runs. Run each mode in its own process
// (VmHWM only grows).
//
// Usage: head_chunk_bench [--whole | --chunk N] [--batch 1] [--seq 2048] [--runs 3]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "common/model/model_config.h"
#include "worker/data/splitmix64.h"
#include "worker/model/llama_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

int main(int argc, char** argv) {
  bool whole = false;
  int batch = 1, seq = 2048, runs = 3, chunk = 0;
  CLI::App app{"The chunked LM head against whole logits (Llama 3's vocabulary)"};
  app.add_flag("--whole", whole, "one chunk of every token: whole logits");
  app.add_option("--batch", batch);
  app.add_option("--seq", seq);
  app.add_option("--runs", runs);
  app.add_option("--chunk", chunk, "tokens per chunk (0: LlamaHeadChunkTokens)");
  CLI11_PARSE(app, argc, argv);
  using namespace zeroshard;
  ModelConfig c = Gpt2Config(128256, 1, 256, 4, seq);
  c.family = ModelFamily::kLlama;
  c.n_kv_head = 2;
  c.n_inner = 688;
  c.tied = false;
  LocalParams params(InitUnits(c, 1));
  const int BT = batch * seq;
  LlamaModel model(c, ActivationCheckpointing::kNone, CpuKernels(), nullptr, whole ? BT : chunk);
  std::vector<int32_t> tokens(BT + 1);
  for (int i = 0; i <= BT; ++i) tokens[i] = static_cast<int32_t>(SplitMix64(i) % c.vocab);
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const absl::Time start = absl::Now();
    auto loss =
        model.ForwardBackward(tokens.data(), tokens.data() + 1, batch, seq, 1.0f / BT, params);
    if (!loss.ok()) {
      std::fprintf(stderr, "head_chunk_bench: %s\n", std::string(loss.status().message()).c_str());
      return 1;
    }
    seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  std::sort(seconds.begin(), seconds.end());
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::printf(
      "%s: V %d, %d tokens, chunk %d tokens: activations %.1f MiB, VmHWM %.1f MiB, "
      "step %.3f s (median of %d)\n",
      whole ? "whole logits" : "chunked head", c.vocab, BT, model.head_chunk_tokens(),
      model.ActivationBytes() / 1048576.0, u.ru_maxrss / 1024.0, seconds[seconds.size() / 2], runs);
  return 0;
}
