#include "worker/model/model_init.h"

#include <cmath>
#include <string>

#include "common/status_macros.h"
#include "worker/data/splitmix64.h"

namespace zeroshard {
namespace {

bool EndsWith(const std::string& n, const std::string& s) {
  return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
}

double StdDev(const ModelConfig& c, const std::string& name) {
  const bool residual =
      !c.is_llama() && (EndsWith(name, "attn.proj.weight") || EndsWith(name, "mlp.proj.weight"));
  return residual ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02;
}

}  // namespace

std::vector<float> InitUnit(const ModelConfig& c, const UnitPlan& up, int u, uint64_t seed) {
  std::vector<float> buf(up.numel, 0.0f);
  for (size_t p = 0; p < up.params.size(); ++p) {
    const ParamPlacement& pp = up.params[p];
    float* dst = buf.data() + pp.offset;
    if (EndsWith(pp.name, "bias")) continue;  // Zero, including LayerNorm beta.
    if (pp.shape.size() == 1) {               // Norm weights.
      for (int64_t i = 0; i < pp.numel; ++i) dst[i] = 1.0f;
      continue;
    }
    const double stddev = StdDev(c, pp.name);
    // Box-Muller over a counter-based stream: element i depends only on
    // (seed, unit, parameter, i), so init never depends on call order.
    for (int64_t i = 0; i < pp.numel; i += 2) {
      const uint64_t h = HashWords({seed, static_cast<uint64_t>(u), p, static_cast<uint64_t>(i)});
      const double u1 = 1.0 - UnitInterval(h);  // (0, 1]
      const double u2 = UnitInterval(SplitMix64(h));
      const double r = std::sqrt(-2.0 * std::log(u1));
      dst[i] = static_cast<float>(stddev * r * std::cos(2.0 * M_PI * u2));
      if (i + 1 < pp.numel) {
        dst[i + 1] = static_cast<float>(stddev * r * std::sin(2.0 * M_PI * u2));
      }
    }
  }
  return buf;
}

std::vector<std::vector<float>> InitUnits(const ModelConfig& c, uint64_t seed) {
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(ModelUnits(c), 1, 1);
  ZS_CHECK(plan.ok());
  std::vector<std::vector<float>> out;
  for (size_t u = 0; u < plan->units.size(); ++u) {
    out.push_back(InitUnit(c, plan->units[u], static_cast<int>(u), seed));
  }
  return out;
}

}  // namespace zeroshard
