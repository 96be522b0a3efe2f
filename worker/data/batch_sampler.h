// Deterministic batches from (seed, split, global step, sample index).
// Tokens are the corpus's: text bytes or a token file's ids. For
// fine-tuning samples (a corpus of prompt/completion pairs) sample i of step
// s is pair HashWords(seed, split, s, i) mod (pairs in the split) instead,
// its prompt's targets and the padding past its end not counted
// (fine_tune_samples.h).
//
// How it works: a step's global batch is G samples numbered 0..G-1. Sample
// i of step s is the window of T+1 tokens starting at
//   offset = HashWords(seed, split, s, i) mod (split_tokens - T)
// (SplitMix64, worker/data/splitmix64.h); its first T tokens are the inputs
// and its last T the targets (next-token prediction). A sample depends on
// nothing else, so any world size N, even one that does not divide G, sees
// the same samples: rank r takes the contiguous index range SampleRange(G,
// N, r), and the union over ranks is exactly [0, G).
//
// Thread-safe: const methods over a read-only corpus.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/data/text_corpus.h"

namespace zeroshard {

struct SampleSpan {
  int64_t begin = 0;  // First sample index.
  int64_t end = 0;    // One past the last.
  int64_t size() const { return end - begin; }
};

// Rank `rank`'s samples of a global batch: [G*r/N, G*(r+1)/N), sizes differ
// by at most one. A rank may get none when N > G. INVALID_ARGUMENT naming
// the field for G < 1, N < 1 or rank outside [0, N).
absl::StatusOr<SampleSpan> SampleRange(int64_t global_batch, int world_size, int rank);

class BatchSampler {
 public:
  // `corpus` must outlive the sampler.
  BatchSampler(const TextCorpus& corpus, Split split, uint64_t seed);

  // Writes samples [sample_begin, sample_end) of `step` as rows of T tokens
  // into inputs and targets (int32, [(sample_end - sample_begin), T]).
  // INVALID_ARGUMENT for T < 1, the split shorter than T + 1 tokens (naming
  // both), step < 0 or a bad range.
  absl::Status FillBatch(int64_t step, int64_t sample_begin, int64_t sample_end, int T,
                         int32_t* inputs, int32_t* targets) const;

  // Targets the loss counts among samples [sample_begin, sample_end) of
  // `step`: (end - begin) * T for a token stream, fewer for fine-tuning
  // samples. Every rank computes the global batch's count alike, so the
  // loss is the mean over counted tokens whatever N.
  int64_t CountedTargets(int64_t step, int64_t sample_begin, int64_t sample_end, int T) const;

  // Token offset (fine-tuning: the pair's index) of sample i of `step`
  // within the split (for tests).
  int64_t SampleOffset(int64_t step, int64_t sample, int T) const;

 private:
  TokenView tokens_;
  absl::Span<const FineTuneSample> samples_;
  Split split_;
  uint64_t seed_;
};

}  // namespace zeroshard
