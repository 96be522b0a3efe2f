// GptModel and its configuration: presets and validation, initialisation
// statistics and determinism, the hook call order, input validation,
// gradient accumulation over micro-batches, activation accounting, and the
// off-CPU path (device-resident token ids and loss) against the CPU path.
// (Loss and gradients against an independent NumPy model: gpt_reference_test.)
#include "worker/model/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/model/model_config.h"
#include "gtest/gtest.h"
#include "worker/device/device_factory.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

ModelConfig Tiny() { return *ModelPreset("tiny"); }

std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 256);
  return t;
}

TEST(ModelConfigTest, PresetsAndErrors) {
  const ModelConfig tiny = Tiny();
  EXPECT_EQ(tiny.n_layer, 2);
  EXPECT_EQ(tiny.n_embd, 32);
  EXPECT_EQ(tiny.vocab, 256);
  ASSERT_TRUE(ModelPreset("small").ok());
  absl::StatusOr<ModelConfig> bad = ModelPreset("huge");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("huge"), std::string::npos);
  ModelConfig c = tiny;
  c.n_head = 3;  // 32 is not a multiple of 3.
  EXPECT_NE(ValidateModelConfig(c).message().find("n_head"), std::string::npos);
  c = tiny;
  c.n_ctx = 0;
  EXPECT_NE(ValidateModelConfig(c).message().find("n_ctx"), std::string::npos);
}

// The GPU presets have GPT-2's shapes; the parameter count by the formula
// L (12 C^2 + 13 C) + (V + ctx) C + 2 C (blocks, embeddings, ln_f); --help
// (ModelPresetFlagHelp) names every preset.
TEST(ModelConfigTest, Gpt2PresetsAndHelp) {
  struct Want {
    const char* name;
    int layers, width, heads, ctx;
  };
  for (const Want& w : {Want{"gpt2", 12, 768, 12, 1024}, Want{"gpt2-medium", 24, 1024, 16, 1024},
                        Want{"gpt2-xl", 48, 1600, 25, 1024}}) {
    absl::StatusOr<ModelConfig> c = ModelPreset(w.name);
    ASSERT_TRUE(c.ok()) << w.name;
    EXPECT_EQ(c->vocab, 256);
    EXPECT_EQ(c->n_layer, w.layers);
    EXPECT_EQ(c->n_embd, w.width);
    EXPECT_EQ(c->n_head, w.heads);
    EXPECT_EQ(c->n_ctx, w.ctx);
    const int64_t C = w.width;
    EXPECT_EQ(ModelParamCount(*c), w.layers * (12 * C * C + 13 * C) + (256 + w.ctx) * C + 2 * C);
  }
  EXPECT_EQ(ModelParamCount(*ModelPreset("gpt2")), 86039040);
  const std::string help = ModelPresetFlagHelp();
  for (const std::string& name : ModelPresetNames()) {
    EXPECT_NE(help.find(name), std::string::npos) << name;
  }
  EXPECT_EQ(ModelPresetNames().size(), 6u) << help;
}

TEST(ModelConfigTest, UnitsAndParameterCount) {
  const ModelConfig c = Tiny();
  const std::vector<UnitSpec> units = ModelUnits(c);
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[0].name, "embed");
  EXPECT_EQ(units[2].name, "block.1");
  // GPT-2 count by hand: wte V*C (tied head: once), wpe n_ctx*C, ln_f 2C;
  // per block 2C + (3C*C + 3C) + (C*C + C) + 2C + (4C*C + 4C) + (4C*C + C).
  const int64_t C = 32, V = 256, L = 2, ctx = 16;
  const int64_t expect = V * C + ctx * C + 2 * C + L * (12 * C * C + 13 * C);
  EXPECT_EQ(ModelParamCount(c), expect);
  EXPECT_EQ(ModelParamBytes(c), 4 * expect);
}

TEST(ModelConfigTest, InitIsDeterministicWithGpt2Statistics) {
  ModelConfig c = *ModelPreset("small");
  const auto a = InitUnits(c, 7), b = InitUnits(c, 7), other = InitUnits(c, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  const ShardPlan plan = *MakeShardPlan(ModelUnits(c), 1, 1);
  for (size_t u = 0; u < plan.units.size(); ++u) {
    for (const ParamPlacement& p : plan.units[u].params) {
      const float* v = a[u].data() + p.offset;
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < p.numel; ++i) {
        sum += v[i];
        sq += double{v[i]} * v[i];
      }
      const double mean = sum / p.numel, sd = std::sqrt(sq / p.numel - mean * mean);
      const bool is_bias = p.name.size() > 4 && p.name.substr(p.name.size() - 4) == "bias";
      if (is_bias) {
        EXPECT_EQ(sq, 0.0) << p.name;
      } else if (p.shape.size() == 1) {
        EXPECT_EQ(sum, static_cast<double>(p.numel)) << p.name << " (gamma = 1)";
      } else {
        const bool residual = p.name.find("proj.weight") != std::string::npos;
        const double want = residual ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02;
        // Sample sd of n normals is within ~5/sqrt(2n) relative w.h.p.
        EXPECT_NEAR(sd, want, want * 5.0 / std::sqrt(2.0 * p.numel)) << p.name;
        EXPECT_NEAR(mean, 0.0, 5.0 * want / std::sqrt(double(p.numel))) << p.name;
      }
    }
  }
}

TEST(GptModelTest, HookBracketsAndInitialLoss) {
  const ModelConfig c = Tiny();
  LocalParams hooks(InitUnits(c, 1));
  GptModel model(c);
  const int B = 2, T = 16;
  const auto x = Tokens(B * T, 1), y = Tokens(B * T, 2);
  absl::StatusOr<double> loss = model.Forward(x.data(), y.data(), B, T, hooks);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(hooks.forward_brackets(0), 2);  // Lookup and head.
  EXPECT_EQ(hooks.forward_brackets(1), 1);
  EXPECT_EQ(hooks.backward_brackets(0), 0);
  // Small initial weights: near-uniform predictions, loss ~ ln(256) per token.
  EXPECT_NEAR(*loss / (B * T), std::log(256.0), 0.05);
  loss = model.ForwardBackward(x.data(), y.data(), B, T, 1.0f, hooks);
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(hooks.forward_brackets(0), 4);
  EXPECT_EQ(hooks.backward_brackets(0), 2);
  EXPECT_EQ(hooks.backward_brackets(2), 1);
  EXPECT_EQ(model.ActivationBytes(), ModelActivationBytes(c, B, T));
}

// Logits are the pre-softmax scores: their cross-entropy, computed here in
// double (log-sum-exp minus the target's logit), is Forward's loss.
TEST(GptModelTest, LogitsGiveForwardsLoss) {
  const ModelConfig c = Tiny();
  LocalParams hooks(InitUnits(c, 4));
  GptModel model(c);
  const int B = 2, T = 9;
  const auto x = Tokens(B * T, 5), y = Tokens(B * T, 6);
  std::vector<float> logits;
  ASSERT_TRUE(model.Logits(x.data(), B, T, hooks, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(B * T * c.vocab));
  EXPECT_EQ(hooks.forward_brackets(0), 2);
  double want = 0.0;
  for (int n = 0; n < B * T; ++n) {
    const float* row = logits.data() + n * c.vocab;
    double mx = row[0], sum = 0.0;
    for (int v = 0; v < c.vocab; ++v) mx = std::max(mx, double{row[v]});
    for (int v = 0; v < c.vocab; ++v) sum += std::exp(row[v] - mx);
    want += mx + std::log(sum) - row[y[n]];
  }
  absl::StatusOr<double> loss = model.Forward(x.data(), y.data(), B, T, hooks);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, want, 1e-5 * want);
  EXPECT_FALSE(model.Logits(x.data(), B, 17, hooks, &logits).ok());  // T > n_ctx.
}

TEST(GptModelTest, BadInputIsRefusedBeforeAnyHook) {
  const ModelConfig c = Tiny();
  LocalParams hooks(InitUnits(c, 1));
  GptModel model(c);
  auto x = Tokens(2 * 17, 1), y = Tokens(2 * 17, 2);
  EXPECT_NE(
      model.ForwardBackward(x.data(), y.data(), 2, 17, 1.0f, hooks).status().message().find("T"),
      std::string::npos);  // T > n_ctx = 16.
  EXPECT_FALSE(model.Forward(x.data(), y.data(), 0, 4, hooks).ok());
  x[3] = 256;
  absl::Status s = model.Forward(x.data(), y.data(), 1, 4, hooks).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("inputs[3]"), std::string::npos);
  EXPECT_FALSE(model.Forward(nullptr, y.data(), 1, 4, hooks).ok());
  EXPECT_EQ(hooks.forward_brackets(0), 0);
}

TEST(GptModelTest, TwoMicroBatchesAccumulateToOneBatch) {
  const ModelConfig c = Tiny();
  const auto init = InitUnits(c, 3);
  const int T = 12;
  const auto x = Tokens(4 * T, 5), y = Tokens(4 * T, 6);
  GptModel model(c);
  LocalParams whole(init), parts(init);
  const double l_whole = *model.ForwardBackward(x.data(), y.data(), 4, T, 0.25f, whole);
  double l_parts = *model.ForwardBackward(x.data(), y.data(), 2, T, 0.25f, parts);
  l_parts += *model.ForwardBackward(x.data() + 2 * T, y.data() + 2 * T, 2, T, 0.25f, parts);
  EXPECT_NEAR(l_whole, l_parts, 1e-5 * l_whole);
  for (int u = 0; u < whole.num_units(); ++u) {
    float max_abs = 0.0f;
    for (float g : whole.grads(u)) max_abs = std::max(max_abs, std::abs(g));
    ASSERT_GT(max_abs, 0.0f);
    for (size_t i = 0; i < whole.grads(u).size(); ++i) {
      ASSERT_NEAR(whole.grads(u)[i], parts.grads(u)[i], 1e-5f * max_abs)
          << "unit " << u << " i " << i;
    }
  }
}

TEST(GptModelTest, PlainSgdFitsOneBatch) {
  // End to end: the gradients point downhill. 100 SGD steps on one repeated
  // batch of text-like tokens must cut the mean loss well below ln(256).
  const ModelConfig c = Tiny();
  LocalParams p(InitUnits(c, 4));
  GptModel model(c);
  const int B = 2, T = 16;
  std::vector<int32_t> x(B * T), y(B * T);
  for (int i = 0; i < B * T; ++i) {
    x[i] = 'a' + (i % 5);
    y[i] = 'a' + ((i + 1) % 5);
  }
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 100; ++step) {
    p.ZeroGrads();
    const double loss = *model.ForwardBackward(x.data(), y.data(), B, T, 1.0f / (B * T), p);
    if (step == 0) first = loss / (B * T);
    last = loss / (B * T);
    for (int u = 0; u < p.num_units(); ++u) {
      for (size_t i = 0; i < p.params(u).size(); ++i) p.params(u)[i] -= 0.5f * p.grads(u)[i];
    }
  }
  std::printf("mean loss: step 0 %.4f, step 99 %.4f\n", first, last);
  EXPECT_NEAR(first, std::log(256.0), 0.05);
  EXPECT_LT(last, 1.0) << "first " << first;
}

// Host memory that calls itself a GPU: every operation goes to a CPU
// device, but kind() is kCuda, so GptModel takes its off-CPU path (token
// ids copied into its own buffer, the loss read back through Copy) with
// kernels that can run here. Counts the copies.
class HostMemoryAsGpu final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const std::string& name() const override { return name_; }
  int ordinal() const override { return 0; }
  void* stream() const override { return nullptr; }
  absl::StatusOr<void*> Allocate(int64_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* ptr) override { cpu_->Free(ptr); }
  absl::StatusOr<void*> AllocatePinnedHost(int64_t bytes) override {
    return cpu_->AllocatePinnedHost(bytes);
  }
  void FreePinnedHost(void* ptr) override { cpu_->FreePinnedHost(ptr); }
  absl::Status Memset(void* dst, int byte, int64_t bytes) override {
    return cpu_->Memset(dst, byte, bytes);
  }
  absl::Status Copy(void* dst, const void* src, int64_t bytes) override {
    ++copies;
    return cpu_->Copy(dst, src, bytes);
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override {
    return cpu_->RecordEvent();
  }
  absl::Status StreamWaitEvent(const DeviceEvent& event) override {
    return cpu_->StreamWaitEvent(event);
  }
  absl::Status Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                       int64_t n) override {
    return cpu_->Convert(src, src_dtype, dst, dst_dtype, n);
  }
  absl::Status AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                       int64_t n) override {
    return cpu_->AddInto(acc, acc_dtype, x, x_dtype, n);
  }
  absl::Status Scale(void* x, DType dtype, float alpha, int64_t n) override {
    return cpu_->Scale(x, dtype, alpha, n);
  }
  absl::Status SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) override {
    return cpu_->SumSquaresAccumulate(x, dtype, n, acc);
  }
  absl::Status AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                     const AdamWShard& shard) override {
    return cpu_->AdamW(hp, step, grad_scale, shard);
  }
  absl::StatusOr<MemoryInfo> memory_info() const override { return cpu_->memory_info(); }

  int copies = 0;

 private:
  std::unique_ptr<Device> cpu_ = *CreateDevice({"cpu", -1, 1});
  std::string name_ = "host memory as a gpu";
};

// The off-CPU path (what a GPU worker runs, less the CUDA kernels) gives
// the CPU path's bits: losses, gradients and logits, over two calls of
// different sizes (the buffers regrow); the token ids went through the
// device's Copy, and the caller's arrays were only read.
TEST(GptModelTest, OffCpuPathGivesTheCpuPathsBits) {
  const ModelConfig c = Tiny();
  HostMemoryAsGpu gpu;
  GptModel on_cpu(c), off_cpu(c, ActivationCheckpointing::kNone, CpuKernels(), &gpu);
  LocalParams a(InitUnits(c, 5)), b(InitUnits(c, 5));
  for (auto [B, T] : {std::pair{2, 8}, std::pair{3, 16}}) {
    const auto x = Tokens(B * T, 7), y = Tokens(B * T, 8);
    const auto x_before = x, y_before = y;
    const int copies_before = gpu.copies;
    absl::StatusOr<double> la = on_cpu.ForwardBackward(x.data(), y.data(), B, T, 0.5f, a);
    absl::StatusOr<double> lb = off_cpu.ForwardBackward(x.data(), y.data(), B, T, 0.5f, b);
    ASSERT_TRUE(la.ok() && lb.ok()) << la.status() << lb.status();
    EXPECT_EQ(*la, *lb) << "B=" << B << " T=" << T;
    // Inputs, targets and the loss: three copies a call.
    EXPECT_EQ(gpu.copies - copies_before, 3);
    EXPECT_EQ(x, x_before);
    EXPECT_EQ(y, y_before);
    for (int u = 0; u < a.num_units(); ++u) EXPECT_EQ(a.grads(u), b.grads(u)) << "unit " << u;
    std::vector<float> ga, gb;
    ASSERT_TRUE(on_cpu.Logits(x.data(), B, T, a, &ga).ok());
    ASSERT_TRUE(off_cpu.Logits(x.data(), B, T, b, &gb).ok());
    EXPECT_EQ(ga, gb);
    EXPECT_EQ(off_cpu.ActivationBytes(), ModelActivationBytes(c, B, T));
  }
}

}  // namespace
}  // namespace zeroshard
