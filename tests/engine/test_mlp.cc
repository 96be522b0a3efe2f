#include "tests/engine/test_mlp.h"

#include <cmath>
#include <random>

namespace zeroshard::testing {

std::vector<UnitSpec> MlpUnits(const MlpDims& dims) {
  const int64_t d = dims.d, h = dims.h;
  return {{"embed", {{"w1", {h, d}, DType::kFp32}, {"b1", {h}, DType::kFp32}}},
          {"hidden", {{"w2", {h, h}, DType::kFp32}, {"b2", {h}, DType::kFp32}}},
          {"bias", {{"c", {d}, DType::kFp32}}}};
}

std::vector<std::vector<float>> MlpInit(const ShardPlan& plan, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<std::vector<float>> units;
  for (const UnitPlan& u : plan.units) {
    std::vector<float> v(static_cast<size_t>(u.numel));
    for (float& x : v) x = normal(rng);
    units.push_back(std::move(v));
  }
  return units;
}

Sample MakeSample(const MlpDims& dims, int step, int index) {
  std::mt19937 rng(static_cast<uint32_t>(step * 7919 + index));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Sample s{std::vector<float>(dims.d), std::vector<float>(dims.d)};
  for (float& x : s.x) x = normal(rng);
  for (float& t : s.t) t = normal(rng);
  return s;
}

namespace {

using Matrix = std::vector<std::vector<double>>;  // [sample][feature]

struct Activations {
  Matrix h1, h2, dy;  // dy = d(mean loss)/dy.
  double loss = 0.0;
};

Activations Forward(const MlpDims& dims, const ShardPlan& plan, UnitHooks& hooks,
                    const std::vector<Sample>& batch) {
  const int D = dims.d, H = dims.h, B = static_cast<int>(batch.size());
  const int64_t b1_off = plan.units[0].params[1].offset, b2_off = plan.units[1].params[1].offset;
  Matrix h1(B, std::vector<double>(H)), h2 = h1, y(B, std::vector<double>(D));
  const float* p = hooks.PreForward(0);
  for (int s = 0; s < B; ++s)
    for (int i = 0; i < H; ++i) {
      double a = p[b1_off + i];
      for (int j = 0; j < D; ++j) a += static_cast<double>(p[i * D + j]) * batch[s].x[j];
      h1[s][i] = std::tanh(a);
    }
  hooks.PostForward(0);
  p = hooks.PreForward(1);
  for (int s = 0; s < B; ++s)
    for (int i = 0; i < H; ++i) {
      double a = p[b2_off + i];
      for (int j = 0; j < H; ++j) a += static_cast<double>(p[i * H + j]) * h1[s][j];
      h2[s][i] = std::tanh(a);
    }
  hooks.PostForward(1);
  p = hooks.PreForward(0);
  for (int s = 0; s < B; ++s)
    for (int j = 0; j < D; ++j) {
      double a = 0.0;
      for (int i = 0; i < H; ++i) a += static_cast<double>(p[i * D + j]) * h2[s][i];
      y[s][j] = a;
    }
  hooks.PostForward(0);
  p = hooks.PreForward(2);
  Activations act{h1, h2, Matrix(B, std::vector<double>(D)), 0.0};
  for (int s = 0; s < B; ++s)
    for (int j = 0; j < D; ++j) {
      y[s][j] += p[j];
      const double e = y[s][j] - batch[s].t[j];
      act.loss += 0.5 * e * e / B;
      act.dy[s][j] = e / B;
    }
  hooks.PostForward(2);
  return act;
}

// Backward, reverse order; the model adds into the gradient views.
void Backward(const MlpDims& dims, const ShardPlan& plan, UnitHooks& hooks,
              const std::vector<Sample>& batch, const Activations& act) {
  const int D = dims.d, H = dims.h, B = static_cast<int>(batch.size());
  const int64_t b1_off = plan.units[0].params[1].offset, b2_off = plan.units[1].params[1].offset;
  const Matrix &h1 = act.h1, &h2 = act.h2, &dy = act.dy;
  UnitBackwardView v = hooks.PreBackward(2);
  for (int s = 0; s < B; ++s)
    for (int j = 0; j < D; ++j) v.grads[j] += static_cast<float>(dy[s][j]);
  hooks.PostBackward(2);
  Matrix dh2(B, std::vector<double>(H, 0.0)), dh1 = dh2;
  v = hooks.PreBackward(0);
  for (int i = 0; i < H; ++i)
    for (int j = 0; j < D; ++j) {
      double g = 0.0;
      for (int s = 0; s < B; ++s) {
        g += h2[s][i] * dy[s][j];
        dh2[s][i] += static_cast<double>(v.params[i * D + j]) * dy[s][j];
      }
      v.grads[i * D + j] += static_cast<float>(g);
    }
  hooks.PostBackward(0);
  v = hooks.PreBackward(1);
  for (int s = 0; s < B; ++s)
    for (int i = 0; i < H; ++i) dh2[s][i] *= 1.0 - h2[s][i] * h2[s][i];  // now d a2
  for (int i = 0; i < H; ++i) {
    double gb = 0.0;
    for (int s = 0; s < B; ++s) gb += dh2[s][i];
    v.grads[b2_off + i] += static_cast<float>(gb);
    for (int j = 0; j < H; ++j) {
      double g = 0.0;
      for (int s = 0; s < B; ++s) {
        g += dh2[s][i] * h1[s][j];
        dh1[s][j] += static_cast<double>(v.params[i * H + j]) * dh2[s][i];
      }
      v.grads[i * H + j] += static_cast<float>(g);
    }
  }
  hooks.PostBackward(1);
  v = hooks.PreBackward(0);
  for (int i = 0; i < H; ++i) {
    double gb = 0.0;
    for (int s = 0; s < B; ++s) {
      dh1[s][i] *= 1.0 - h1[s][i] * h1[s][i];  // now d a1
      gb += dh1[s][i];
    }
    v.grads[b1_off + i] += static_cast<float>(gb);
    for (int j = 0; j < D; ++j) {
      double g = 0.0;
      for (int s = 0; s < B; ++s) g += dh1[s][i] * batch[s].x[j];
      v.grads[i * D + j] += static_cast<float>(g);
    }
  }
  hooks.PostBackward(0);
}

}  // namespace

double MlpForwardBackward(const MlpDims& dims, const ShardPlan& plan, UnitHooks& hooks,
                          const std::vector<Sample>& batch) {
  const Activations act = Forward(dims, plan, hooks, batch);
  Backward(dims, plan, hooks, batch, act);
  return act.loss;
}

namespace {

// The plain unsharded holder: full fp32 params and grads per unit.
class PlainHolder : public UnitHooks {
 public:
  PlainHolder(std::vector<std::vector<float>> params) : params_(std::move(params)) {
    for (const auto& p : params_) grads_.emplace_back(p.size(), 0.0f);
  }
  const float* PreForward(int u) override { return params_[u].data(); }
  void PostForward(int) override {}
  UnitBackwardView PreBackward(int u) override { return {params_[u].data(), grads_[u].data()}; }
  void PostBackward(int) override {}
  std::vector<std::vector<float>> params_, grads_;
};

}  // namespace

std::vector<std::vector<float>> ReferenceTrain(const MlpDims& dims, const ShardPlan& plan,
                                               const RefAdamW& hp, int steps, int global_batch,
                                               std::vector<double>* norms,
                                               std::vector<double>* clip_coefs) {
  PlainHolder holder(MlpInit(plan, 42));
  std::vector<std::vector<double>> master, m, v;
  for (const auto& p : holder.params_) {
    master.emplace_back(p.begin(), p.end());
    m.emplace_back(p.size(), 0.0);
    v.emplace_back(p.size(), 0.0);
  }
  for (int step = 1; step <= steps; ++step) {
    std::vector<Sample> batch;
    for (int k = 0; k < global_batch; ++k) batch.push_back(MakeSample(dims, step, k));
    for (auto& g : holder.grads_) std::fill(g.begin(), g.end(), 0.0f);
    MlpForwardBackward(dims, plan, holder, batch);
    double sq = 0.0;
    for (const auto& g : holder.grads_)
      for (float x : g) sq += static_cast<double>(x) * x;
    const double norm = std::sqrt(sq);
    const double coef =
        hp.max_grad_norm > 0 ? std::min(1.0, hp.max_grad_norm / (norm + 1e-6)) : 1.0;
    if (norms != nullptr) norms->push_back(norm);
    if (clip_coefs != nullptr) clip_coefs->push_back(coef);
    const double bc1 = 1.0 - std::pow(hp.beta1, step), bc2 = 1.0 - std::pow(hp.beta2, step);
    for (size_t u = 0; u < master.size(); ++u) {
      for (size_t i = 0; i < master[u].size(); ++i) {
        const double g = holder.grads_[u][i] * coef;
        m[u][i] = hp.beta1 * m[u][i] + (1 - hp.beta1) * g;
        v[u][i] = hp.beta2 * v[u][i] + (1 - hp.beta2) * g * g;
        const double mh = m[u][i] / bc1, vh = v[u][i] / bc2;
        master[u][i] -= hp.lr * (mh / (std::sqrt(vh) + hp.eps) + hp.weight_decay * master[u][i]);
        holder.params_[u][i] = static_cast<float>(master[u][i]);
      }
    }
  }
  return holder.params_;
}

}  // namespace zeroshard::testing
