#include "worker/data/batch_sampler.h"

#include "absl/strings/str_cat.h"
#include "worker/data/splitmix64.h"

namespace zeroshard {

absl::StatusOr<SampleSpan> SampleRange(int64_t global_batch, int world_size, int rank) {
  if (global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch must be >= 1, got ", global_batch));
  }
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", world_size, "), got ", rank));
  }
  return SampleSpan{global_batch * rank / world_size, global_batch * (rank + 1) / world_size};
}

BatchSampler::BatchSampler(const TextCorpus& corpus, Split split, uint64_t seed)
    : tokens_(corpus.tokens(split)), samples_(corpus.samples(split)), split_(split), seed_(seed) {}

int64_t BatchSampler::CountedTargets(int64_t step, int64_t sample_begin, int64_t sample_end,
                                     int T) const {
  if (samples_.empty()) return (sample_end - sample_begin) * T;
  int64_t counted = 0;
  for (int64_t i = sample_begin; i < sample_end; ++i) {
    counted += zeroshard::CountedTargets(samples_[SampleOffset(step, i, T)], T);
  }
  return counted;
}

int64_t BatchSampler::SampleOffset(int64_t step, int64_t sample, int T) const {
  const uint64_t span = samples_.empty()
                            ? static_cast<uint64_t>(tokens_.count) - static_cast<uint64_t>(T)
                            : static_cast<uint64_t>(samples_.size());
  const uint64_t h = HashWords({seed_, static_cast<uint64_t>(split_), static_cast<uint64_t>(step),
                                static_cast<uint64_t>(sample)});
  return static_cast<int64_t>(h % span);
}

absl::Status BatchSampler::FillBatch(int64_t step, int64_t sample_begin, int64_t sample_end, int T,
                                     int32_t* inputs, int32_t* targets) const {
  if (T < 1)
    return absl::InvalidArgumentError(absl::StrCat("sequence length T must be >= 1, got ", T));
  if (samples_.empty() && tokens_.count < int64_t{T} + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data split ", split_ == Split::kTrain ? "train" : "validation", " has ",
                     tokens_.count, " tokens, fewer than sequence length T + 1 = ", T + 1));
  }
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step must be >= 0, got ", step));
  if (sample_begin < 0 || sample_end < sample_begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad sample range [", sample_begin, ", ", sample_end, ")"));
  }
  for (int64_t i = sample_begin; i < sample_end; ++i) {
    const int64_t at = SampleOffset(step, i, T);
    int32_t* in = inputs + (i - sample_begin) * T;
    int32_t* out = targets + (i - sample_begin) * T;
    if (!samples_.empty()) {
      FillSample(samples_[at], T, in, out);
      continue;
    }
    for (int t = 0; t < T; ++t) {
      in[t] = tokens_.at(at + t);
      out[t] = tokens_.at(at + t + 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
