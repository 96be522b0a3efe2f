#include "worker/model/gpt_model.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/device/device_factory.h"

namespace zeroshard {
namespace {

// Element counts of every buffer Allocate makes; ModelActivationBytes and
// Allocate share them so the estimate is exact.
struct ActSizes {
  int64_t btc, bt, qkv, att, fc, logits;
};

ActSizes Sizes(const ModelConfig& c, int B, int T) {
  const int64_t bt = int64_t{B} * T;
  return {bt * c.n_embd, bt, bt * 3 * c.n_embd, int64_t{B} * c.n_head * T * T,
          bt * 4 * c.n_embd, bt * c.vocab};
}

// fn(array) for every array of a GptModel's Acts (const or not), in layout
// order.
template <typename ActsT, typename Fn>
void ForEachArray(ActsT& acts, Fn&& fn) {
  for (auto* a :
       {&acts.encoded, &acts.lnf, &acts.lnf_mean, &acts.lnf_rstd, &acts.logits, &acts.losses,
        &acts.dresidual, &acts.dln, &acts.datty, &acts.dqkv, &acts.dfch, &acts.dfch_gelu}) {
    fn(*a);
  }
  for (auto& l : acts.blocks) {
    for (auto* a : {&l.ln1, &l.ln1_mean, &l.ln1_rstd, &l.qkv, &l.att, &l.atty, &l.res2, &l.ln2,
                    &l.ln2_mean, &l.ln2_rstd, &l.fch, &l.fch_gelu}) {
      fn(*a);
    }
  }
  for (auto& out : acts.outputs) fn(out);
}

int64_t Find(const UnitPlan& unit, const std::string& name) {
  for (const ParamPlacement& p : unit.params) {
    if (p.name == name) return p.offset;
  }
  ZS_CHECK(false && "parameter missing from the model's own units");
  return -1;
}

}  // namespace

int64_t ModelActivationBytes(const ModelConfig& c, int B, int T, ActivationCheckpointing mode) {
  const ActSizes s = Sizes(c, B, T);
  // One block's intermediates (BlockActs): ln1, atty, res2, ln2 (4 x btc),
  // 4 LayerNorm stats, qkv, att, fch and fch_gelu.
  const int64_t block = 4 * s.btc + 4 * s.bt + s.qkv + s.att + 2 * s.fc;
  // Every block's output res3, kept in both modes.
  const int64_t outputs = s.btc * c.n_layer;
  // encoded, lnf, lnf stats, logits (probs in place), losses; scratch:
  // dresidual, dln, datty, dqkv, dfch, dfch_gelu.
  const int64_t rest = 2 * s.btc + 3 * s.bt + s.logits + 3 * s.btc + s.qkv + 2 * s.fc;
  // kBlocks: one block's intermediates, the recompute workspace.
  const int64_t blocks = mode == ActivationCheckpointing::kBlocks ? 1 : c.n_layer;
  return 4 * (block * blocks + outputs + rest);
}

GptModel::GptModel(const ModelConfig& config, ActivationCheckpointing mode, Kernels& kernels,
                   Device* device)
    : config_(config), mode_(mode), k_(kernels), device_(device) {
  ZS_CHECK(ValidateModelConfig(config).ok());
  if (device_ == nullptr) {
    absl::StatusOr<std::unique_ptr<Device>> cpu = CreateDevice({"cpu", -1, 1});
    ZS_CHECK(cpu.ok());
    owned_device_ = std::move(cpu).value();
    device_ = owned_device_.get();
  }
  arena_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
  tokens_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
  loss_sum_ = DeviceBuffer(device_, &accountant_, MemoryKind::kBuffers);
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(ModelUnits(config), 1, 1);
  ZS_CHECK(plan.ok());
  const UnitPlan& e = plan->units[0];
  wte_ = Find(e, "wte");
  wpe_ = Find(e, "wpe");
  lnf_w_ = Find(e, "ln_f.weight");
  lnf_b_ = Find(e, "ln_f.bias");
  const UnitPlan& b = plan->units[1];
  auto f = [&b](const char* n) { return Find(b, absl::StrCat("block.0.", n)); };
  block_ = {f("ln_1.weight"), f("ln_1.bias"),     f("attn.qkv.weight"), f("attn.qkv.bias"),
            f("attn.proj.weight"), f("attn.proj.bias"), f("ln_2.weight"), f("ln_2.bias"),
            f("mlp.fc.weight"), f("mlp.fc.bias"), f("mlp.proj.weight"), f("mlp.proj.bias")};
}

absl::Status GptModel::Validate(const int32_t* inputs, const int32_t* targets, int B,
                                int T) const {
  if (inputs == nullptr || targets == nullptr) {
    return absl::InvalidArgumentError("model: inputs and targets must not be null");
  }
  if (B < 1) return absl::InvalidArgumentError(absl::StrCat("model: batch B must be >= 1, got ", B));
  if (T < 1 || T > config_.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("model: sequence length T must be in [1, ",
                                                   config_.n_ctx, "], got ", T));
  }
  const int64_t n = int64_t{B} * T;
  // Kernel sizes are int (BLAS): the widest activation must fit.
  const int64_t widest = n * std::max(4 * int64_t{config_.n_embd}, int64_t{config_.vocab});
  if (widest > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("model: micro-batch B * T = ", n,
                                                   " tokens is too large for one call"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (inputs[i] < 0 || inputs[i] >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("model: inputs[", i, "] = ", inputs[i],
                                                     " is outside [0, ", config_.vocab, ")"));
    }
    if (targets[i] < 0 || targets[i] >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("model: targets[", i, "] = ", targets[i],
                                                     " is outside [0, ", config_.vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status GptModel::Allocate(int B, int T) {
  if (acts_.B == B && acts_.T == T) return absl::OkStatus();
  const ActSizes s = Sizes(config_, B, T);
  acts_.B = B;
  acts_.T = T;
  acts_.blocks.resize(mode_ == ActivationCheckpointing::kBlocks ? 1 : config_.n_layer);
  acts_.outputs.resize(config_.n_layer);
  for (Array* a : {&acts_.encoded, &acts_.lnf, &acts_.dresidual, &acts_.dln, &acts_.datty}) {
    a->n = s.btc;
  }
  for (Array* a : {&acts_.lnf_mean, &acts_.lnf_rstd, &acts_.losses}) a->n = s.bt;
  acts_.logits.n = s.logits;
  acts_.dqkv.n = s.qkv;
  acts_.dfch.n = s.fc;
  acts_.dfch_gelu.n = s.fc;
  for (Array& out : acts_.outputs) out.n = s.btc;
  for (BlockActs& l : acts_.blocks) {
    for (Array* a : {&l.ln1, &l.atty, &l.res2, &l.ln2}) a->n = s.btc;
    for (Array* a : {&l.ln1_mean, &l.ln1_rstd, &l.ln2_mean, &l.ln2_rstd}) a->n = s.bt;
    l.qkv.n = s.qkv;
    l.att.n = s.att;
    l.fch.n = s.fc;
    l.fch_gelu.n = s.fc;
  }
  // Each array starts on a 64-byte boundary (16 floats).
  auto padded = [](int64_t n) { return (n + 15) / 16 * 16; };
  int64_t floats = 0;
  ForEachArray(acts_, [&](const Array& a) { floats += padded(a.n); });
  if (floats * 4 > arena_.bytes()) {
    // Zeroed: nothing reads before writing, but a recompute workspace or a
    // scratch never holds another allocation's leftovers.
    absl::Status grown = arena_.Allocate(floats * 4);
    if (!grown.ok()) {
      acts_.B = acts_.T = 0;
      return absl::Status(grown.code(), absl::StrCat("model activations (", floats * 4,
                                                     " bytes): ", grown.message()));
    }
  }
  float* next = arena_.as<float>();
  ForEachArray(acts_, [&](Array& a) {
    a.ptr = next;
    next += padded(a.n);
  });
  return absl::OkStatus();
}

int64_t GptModel::ActivationBytes() const {
  int64_t n = 0;
  ForEachArray(acts_, [&](const Array& a) { n += a.n; });
  return 4 * n;
}

absl::StatusOr<const int32_t*> GptModel::DeviceTokens(const int32_t* host, int which) {
  if (device_->kind() == DeviceKind::kCpu) return host;
  const int64_t bt = int64_t{acts_.B} * acts_.T;
  if (tokens_.bytes() < 2 * bt * 4) ZS_RETURN_IF_ERROR(tokens_.Allocate(2 * bt * 4));
  int32_t* dst = tokens_.as<int32_t>() + which * bt;
  // Stream-ordered after the previous call's kernels that read these ids.
  ZS_RETURN_IF_ERROR(device_->Copy(dst, host, bt * 4));
  return dst;
}

void GptModel::Zero(const Array& a) {
  absl::Status s = device_->Memset(a.ptr, 0, a.n * 4);
  if (status_.ok() && !s.ok()) status_ = s;
}

absl::Status GptModel::TakeErrors() {
  absl::Status s = std::exchange(status_, absl::OkStatus());
  absl::Status kernels = k_.TakeStatus();  // Taken either way: none outlives its call.
  if (s.ok()) s = kernels;
  // The call's work is done (or failed) before it returns, whatever happened.
  absl::Status done = device_->Synchronize(wait_);
  return s.ok() ? done : s;
}

absl::StatusOr<double> GptModel::FinishCall() {
  double sum = 0.0;
  absl::Status s = status_.ok() ? device_->Copy(&sum, loss_sum_.data(), sizeof(double))
                                : absl::OkStatus();
  absl::Status taken = TakeErrors();
  ZS_RETURN_IF_ERROR(s.ok() ? taken : s);
  return sum;
}

absl::StatusOr<double> GptModel::ForwardBackward(const int32_t* inputs,
                                                 const int32_t* targets, int B, int T,
                                                 float loss_scale, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  ZS_ASSIGN_OR_RETURN(const int32_t* in, DeviceTokens(inputs, 0));
  ZS_ASSIGN_OR_RETURN(const int32_t* tg, DeviceTokens(targets, 1));
  RunForward(in, tg, hooks);
  RunBackward(in, tg, loss_scale, hooks);
  return FinishCall();
}

absl::StatusOr<double> GptModel::Forward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  ZS_ASSIGN_OR_RETURN(const int32_t* in, DeviceTokens(inputs, 0));
  ZS_ASSIGN_OR_RETURN(const int32_t* tg, DeviceTokens(targets, 1));
  RunForward(in, tg, hooks);
  return FinishCall();
}

absl::Status GptModel::Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                              std::vector<float>* logits) {
  // The inputs stand in for targets: Validate checks their range once.
  ZS_RETURN_IF_ERROR(Validate(inputs, inputs, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  ZS_ASSIGN_OR_RETURN(const int32_t* in, DeviceTokens(inputs, 0));
  RunLogits(in, hooks);
  logits->resize(static_cast<size_t>(acts_.logits.n));
  absl::Status s = status_.ok() ? device_->Copy(logits->data(), acts_.logits.data(),
                                                acts_.logits.n * 4)
                                : absl::OkStatus();
  absl::Status taken = TakeErrors();
  return s.ok() ? taken : s;
}

}  // namespace zeroshard
