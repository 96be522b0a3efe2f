// CudaKernels (worker/model/cuda_kernels.h) at one transformer block of a
// preset (default gpt2: C 768, 12 heads) over B x T tokens: each kernel's
// median time (bench::TimeMedian) and, for the GEMMs, TFLOP/s (2 M N K per
// GEMM; attention counts its full T x T squares, as the kernels compute
// them), for other kernels GB/s of the bytes they must read and write, in
// fp32 and with TF32 matmuls. Inputs are zeros (tokens i mod V): speed
// does not depend on values here.
//
// Usage: model_kernels_bench [--model gpt2] [--batch 4] [--reps 10]
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/device/time_median.h"
#include "common/infra/cli.h"
#include "common/model/model_config.h"
#include "worker/device/device_buffer.h"
#include "worker/device/device_factory.h"
#include "worker/model/cuda_kernels.h"

namespace zeroshard {
namespace {

struct Args {
  std::string model = "gpt2";
  int batch = 4;
  int reps = 10;
};

struct Case {
  const char* name;
  double flops;  // 0: a memory-bound kernel, reported in GB/s of `bytes`.
  double bytes;
  std::function<void()> run;
};

absl::Status Report(Device& device, CudaKernels& k, const Case& c, int reps) {
  ZS_ASSIGN_OR_RETURN(const double s, bench::TimeMedian(device, reps, [&] {
                        c.run();
                        return k.TakeStatus();
                      }));
  if (c.flops > 0) {
    std::printf("  %-28s %9.3f ms %8.1f TFLOP/s\n", c.name, s * 1e3, c.flops / s / 1e12);
  } else {
    std::printf("  %-28s %9.3f ms %8.1f GB/s\n", c.name, s * 1e3, c.bytes / s / 1e9);
  }
  return absl::OkStatus();
}

// The block's tensors, carved from one zeroed arena: x, y [N,4C], w [4C,C],
// att [B,NH,T,T], qkv, dqkv [N,3C], logits [N,V], mean, rstd [N], wte
// [V,C], wpe [T,C], vec [4C] (gammas, biases), tokens [N] = i mod V.
struct Tensors {
  float *x, *y, *w, *att, *qkv, *dqkv, *logits, *mean, *rstd, *wte, *wpe, *vec;
  int32_t* tokens;
};

absl::StatusOr<Tensors> Carve(Device& device, DeviceBuffer& arena, int B, int T, int C, int NH,
                              int V) {
  const int64_t N = int64_t{B} * T, att_n = int64_t{B} * NH * T * T;
  const int64_t floats = 2 * N * 4 * C + 4 * int64_t{C} * C + att_n + 6 * N * C + N * V + 2 * N +
                         int64_t{V} * C + int64_t{T} * C + 4 * C;
  ZS_RETURN_IF_ERROR(arena.Allocate(floats * 4 + N * 4));
  Tensors t{};
  t.x = arena.as<float>();
  t.y = t.x + N * 4 * C;
  t.w = t.y + N * 4 * C;
  t.att = t.w + 4 * int64_t{C} * C;
  t.qkv = t.att + att_n;
  t.dqkv = t.qkv + 3 * N * C;
  t.logits = t.dqkv + 3 * N * C;
  t.mean = t.logits + N * V;
  t.rstd = t.mean + N;
  t.wte = t.rstd + N;
  t.wpe = t.wte + int64_t{V} * C;
  t.vec = t.wpe + int64_t{T} * C;
  t.tokens = reinterpret_cast<int32_t*>(t.vec + 4 * C);
  std::vector<int32_t> host_tokens(N);
  for (int64_t i = 0; i < N; ++i) host_tokens[i] = static_cast<int32_t>(i % V);
  ZS_RETURN_IF_ERROR(device.Copy(t.tokens, host_tokens.data(), N * 4));
  ZS_RETURN_IF_ERROR(device.Synchronize(absl::Seconds(60)));
  return t;
}

absl::Status Run(const Args& args) {
  ZS_ASSIGN_OR_RETURN(const ModelConfig m, ModelPreset(args.model));
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice({.kind = "cuda"}));
  const int B = args.batch, T = m.n_ctx, C = m.n_embd, NH = m.n_head, V = m.vocab;
  const int64_t N = int64_t{B} * T;
  MemoryAccountant accountant;
  DeviceBuffer arena(device.get(), &accountant, MemoryKind::kBuffers);
  ZS_ASSIGN_OR_RETURN(const Tensors t, Carve(*device, arena, B, T, C, NH, V));
  float *x = t.x, *y = t.y, *w = t.w, *att = t.att, *qkv = t.qkv, *dqkv = t.dqkv;
  float *logits = t.logits, *mean = t.mean, *rstd = t.rstd, *vec = t.vec;
  const int32_t* tokens = t.tokens;
  std::printf("model_kernels_bench: %s, %s, B=%d T=%d C=%d NH=%d V=%d, median of %d\n",
              device->name().c_str(), args.model.c_str(), B, T, C, NH, V, args.reps);
  for (bool tf32 : {false, true}) {
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<CudaKernels> k,
                        CudaKernels::Create(*device, {.allow_tf32 = tf32, .vocab = V}));
    std::printf(" matmuls %s\n", tf32 ? "TF32" : "fp32");
    const double gemm = 2.0 * N * C;
    const double square = 2.0 * B * NH * T * T * (C / NH);  // One T x T x hs GEMM, all pairs.
    const Case cases[] = {
        {"matmul qkv [N,C]x[C,3C]", gemm * 3 * C, 0,
         [&] { k->Matmul(false, true, N, 3 * C, C, 1.0f, x, w, 0.0f, y); }},
        {"matmul fc [N,C]x[C,4C]", gemm * 4 * C, 0,
         [&] { k->Matmul(false, true, N, 4 * C, C, 1.0f, x, w, 0.0f, y); }},
        {"matmul dW fc [4C,N]x[N,C]", gemm * 4 * C, 0,
         [&] { k->Matmul(true, false, 4 * C, C, N, 1.0f, y, x, 1.0f, w); }},
        {"attention forward", 2 * square, 0,
         [&] { k->AttentionForward(qkv, B, T, C, NH, x, att); }},
        {"attention backward", 4 * square, 0,
         [&] { k->AttentionBackward(x, qkv, att, B, T, C, NH, dqkv); }},
        {"layernorm forward", 0, 8.0 * N * C,
         [&] { k->LayerNormForward(x, vec, vec, N, C, y, mean, rstd); }},
        {"layernorm backward", 0, 16.0 * N * C,
         [&] { k->LayerNormBackward(x, x, vec, mean, rstd, N, C, y, vec, vec + C); }},
        {"gelu forward [N,4C]", 0, 32.0 * N * C, [&] { k->GeluForward(x, N * 4 * C, y); }},
        {"gelu backward [N,4C]", 0, 64.0 * N * C, [&] { k->GeluBackward(x, x, N * 4 * C, y); }},
        {"bias backward [N,4C]", 0, 16.0 * N * C, [&] { k->BiasBackward(x, N, 4 * C, vec); }},
        {"cross-entropy fwd+bwd", 0, 16.0 * N * V,
         [&] {
           k->SoftmaxCrossEntropyForward(logits, tokens, N, V, logits, mean);
           k->SoftmaxCrossEntropyBackward(logits, tokens, N, V, 1.0f, logits);
         }},
        {"embedding backward", 0, 4.0 * N * C,
         [&] { k->EmbeddingBackward(x, tokens, B, T, C, t.wte, t.wpe); }},
    };
    for (const Case& c : cases) ZS_RETURN_IF_ERROR(Report(*device, *k, c, args.reps));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Args args;
  CLI::App app("CudaKernels at one transformer block of a preset: time and throughput per kernel");
  app.add_option("--model", args.model, zeroshard::ModelPresetFlagHelp());
  app.add_option("--batch", args.batch, "sequences (B); T is the preset's context")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", args.reps, "timed repetitions (median)")->check(CLI::PositiveNumber);
  if (std::optional<int> code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status status = zeroshard::Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "model_kernels_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
