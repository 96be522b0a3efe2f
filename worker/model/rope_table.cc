#include "worker/model/rope_table.h"

#include <cmath>

namespace zeroshard {
namespace {

// Llama 3.1's wavelength-dependent scaling, each step in fp32 as HF does.
void ScaleLlama3(const RopeScaling& r, std::vector<float>& inv_freq) {
  const float factor = static_cast<float>(r.factor);
  const float low = static_cast<float>(r.low_freq_factor);
  const float high = static_cast<float>(r.high_freq_factor);
  const float old_len = static_cast<float>(r.original_max_positions);
  const float low_freq_wavelen = old_len / low, high_freq_wavelen = old_len / high;
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
    float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (old_len / wavelen - low) / (high - low);
      scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
    }
    f = scaled;
  }
}

}  // namespace

std::vector<float> RopeInverseFrequencies(const ModelConfig& config) {
  const int D = config.head_size();
  std::vector<float> inv_freq(D / 2);
  const float base = static_cast<float>(config.rope_theta);
  for (int i = 0; i < D / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(base), exponent));
  }
  if (config.rope_scaling.type == "llama3") ScaleLlama3(config.rope_scaling, inv_freq);
  return inv_freq;
}

RopeTables MakeRopeTables(const ModelConfig& config, int positions) {
  const std::vector<float> inv_freq = RopeInverseFrequencies(config);
  const size_t half = inv_freq.size();
  RopeTables t;
  t.cos.resize(positions * half);
  t.sin.resize(positions * half);
  for (int p = 0; p < positions; ++p) {
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      t.cos[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      t.sin[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return t;
}

}  // namespace zeroshard
