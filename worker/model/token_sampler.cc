#include "worker/model/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace zeroshard {

int32_t TokenSampler::Next(absl::Span<const float> logits) {
  const int V = static_cast<int>(logits.size());
  if (o_.temperature <= 0.0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Ids by logit, highest first (ties: lowest id first), cut to top_k.
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int keep = o_.top_k > 0 ? std::min(o_.top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  order.resize(keep);
  // Softmax at the temperature, in double, over the kept ids.
  std::vector<double> p(keep);
  const double top = logits[order[0]];
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[order[i]] - top) / o_.temperature);
  // The nucleus: the fewest leading ids whose probability reaches top_p.
  int n = keep;
  if (o_.top_p < 1.0) {
    double mass = 0;
    for (n = 0; n < keep && mass < o_.top_p * sum;) mass += p[n++];
  }
  std::discrete_distribution<int> pick(p.begin(), p.begin() + n);
  return order[pick(rng_)];
}

}  // namespace zeroshard
