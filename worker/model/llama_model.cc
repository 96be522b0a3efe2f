// LlamaModel's set-up, sizes and entry points; the passes are in
// llama_model_passes.cc.
#include "worker/model/llama_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/model/rope_table.h"

namespace zeroshard {
namespace {

constexpr int64_t kHeadChunkFloats = int64_t{1} << 25;

// Offset of `name` in `unit`, -1 when absent.
// Floats of the rotary tables, which live as long as the model.
int64_t RopeFloats(const ModelConfig& c) { return int64_t{c.n_ctx} * c.head_size(); }

}  // namespace

int LlamaHeadChunkTokens(int vocab) {
  return static_cast<int>(std::max<int64_t>(1, kHeadChunkFloats / std::max(1, vocab)));
}

void LlamaModel::Size(const ModelConfig& c, ActivationCheckpointing mode, int chunk, int B, int T,
                      Acts& acts) {
  const int64_t bt = int64_t{B} * T, C = c.n_embd, D = c.head_size(), Q = int64_t{c.n_head} * D,
                K = int64_t{c.kv_heads()} * D, I = c.n_inner;
  const int64_t norm = c.qk_norm ? 1 : 0;
  acts.B = B;
  acts.T = T;
  acts.blocks.resize(mode == ActivationCheckpointing::kBlocks ? 1 : c.n_layer);
  acts.outputs.resize(c.n_layer);
  for (Array* a : {&acts.encoded, &acts.lnf, &acts.dresidual, &acts.dln}) a->n = bt * C;
  for (Array* a : {&acts.lnf_rstd, &acts.losses}) a->n = bt;
  acts.logits.n = std::min<int64_t>(chunk, bt) * c.vocab;
  acts.datty.n = acts.dq.n = bt * Q;
  acts.dqkv.n = 3 * bt * Q;
  acts.dk.n = acts.dv.n = bt * K;
  acts.dqn.n = norm * bt * Q;
  acts.dkn.n = norm * bt * K;
  acts.dgu.n = 2 * bt * I;
  acts.dact.n = bt * I;
  for (Array& out : acts.outputs) out.n = bt * C;
  for (BlockActs& l : acts.blocks) {
    for (Array* a : {&l.ln1, &l.res2, &l.ln2}) a->n = bt * C;
    l.ln1_rstd.n = l.ln2_rstd.n = bt;
    l.q.n = l.atty.n = bt * Q;
    l.k.n = l.v.n = bt * K;
    l.qn.n = norm * bt * Q;
    l.kn.n = norm * bt * K;
    l.q_rstd.n = norm * bt * c.n_head;
    l.k_rstd.n = norm * bt * c.kv_heads();
    l.qkv.n = 3 * bt * Q;
    l.att.n = int64_t{B} * c.n_head * T * T;
    l.gu.n = 2 * bt * I;
    l.act.n = bt * I;
  }
}

std::vector<LlamaModel::Array*> LlamaModel::Arrays(Acts& acts) {
  std::vector<Array*> all = {&acts.encoded, &acts.lnf,       &acts.lnf_rstd, &acts.logits,
                             &acts.losses,  &acts.dresidual, &acts.dln,      &acts.datty,
                             &acts.dqkv,    &acts.dq,        &acts.dk,       &acts.dv,
                             &acts.dqn,     &acts.dkn,       &acts.dgu,      &acts.dact};
  for (BlockActs& l : acts.blocks) {
    for (Array* a : {&l.ln1, &l.ln1_rstd, &l.q, &l.k, &l.v, &l.qn, &l.kn, &l.q_rstd, &l.k_rstd,
                     &l.qkv, &l.att, &l.atty, &l.res2, &l.ln2, &l.ln2_rstd, &l.gu, &l.act}) {
      all.push_back(a);
    }
  }
  for (Array& out : acts.outputs) all.push_back(&out);
  return all;
}

int64_t LlamaActivationBytes(const ModelConfig& c, int B, int T, ActivationCheckpointing mode) {
  LlamaModel::Acts acts;
  LlamaModel::Size(c, mode, LlamaHeadChunkTokens(c.vocab), B, T, acts);
  int64_t n = RopeFloats(c);
  for (const ModelArray* a : LlamaModel::Arrays(acts)) n += a->n;
  return 4 * n;
}

LlamaModel::LlamaModel(const ModelConfig& config, ActivationCheckpointing mode, Kernels& kernels,
                       Device* device, int head_chunk_tokens)
    : config_(config), mode_(mode), k_(kernels), rt_(kernels, device) {
  ZS_CHECK(ValidateModelConfig(config).ok() && config.is_llama());
  chunk_ = head_chunk_tokens > 0 ? head_chunk_tokens : LlamaHeadChunkTokens(config.vocab);
  const LlamaLayout layout = MakeLlamaLayout(config);
  embed_ = layout.embed;
  norm_ = layout.norm;
  head_w_ = layout.head_w;
  block_ = layout.block;
  // The rotary tables, once, in the device's memory.
  const RopeTables tables = MakeRopeTables(config, config.n_ctx);
  rope_ = DeviceBuffer(&rt_.device(), &rt_.accountant(), MemoryKind::kBuffers);
  const int64_t half = static_cast<int64_t>(tables.cos.size());
  ZS_CHECK(rope_.Allocate(8 * half).ok());
  ZS_CHECK(rt_.device().Copy(rope_.as<float>(), tables.cos.data(), 4 * half).ok());
  ZS_CHECK(rt_.device().Copy(rope_.as<float>() + half, tables.sin.data(), 4 * half).ok());
}

absl::StatusOr<LlamaModel::DeviceIds> LlamaModel::Begin(const int32_t* inputs,
                                                        const int32_t* targets, bool train, int B,
                                                        int T) {
  if (train && targets == nullptr) {
    return absl::InvalidArgumentError("model: targets must not be null");
  }
  const int64_t widest =
      std::max<int64_t>({2 * int64_t{config_.n_inner},
                         3 * int64_t{config_.n_head} * config_.head_size(), config_.n_embd});
  ZS_RETURN_IF_ERROR(rt_.Validate(config_, inputs, targets, B, T, widest));
  if (acts_.B != B || acts_.T != T) {
    Size(config_, mode_, chunk_, B, T, acts_);
    absl::Status s = rt_.LayOut(Arrays(acts_));
    if (!s.ok()) {
      acts_.B = acts_.T = 0;
      return s;
    }
  }
  const int64_t bt = int64_t{B} * T;
  DeviceIds ids;
  ZS_ASSIGN_OR_RETURN(ids.inputs, rt_.DeviceTokens(inputs, 0, bt));
  if (targets != nullptr) {
    ZS_ASSIGN_OR_RETURN(ids.targets, rt_.DeviceTokens(targets, 1, bt));
  }
  return ids;
}

int64_t LlamaModel::ActivationBytes() const {
  int64_t n = RopeFloats(config_);
  for (const Array* a : Arrays(const_cast<Acts&>(acts_))) n += a->n;
  return 4 * n;
}

absl::StatusOr<double> LlamaModel::ForwardBackward(const int32_t* inputs, const int32_t* targets,
                                                   int B, int T, float loss_scale,
                                                   UnitHooks& hooks) {
  ZS_ASSIGN_OR_RETURN(const DeviceIds ids, Begin(inputs, targets, /*train=*/true, B, T));
  RunBlocks(ids.inputs, hooks);
  HeadForwardBackward(ids.targets, loss_scale, hooks);
  RunBackward(ids.inputs, hooks);
  return rt_.FinishCall();
}

absl::StatusOr<double> LlamaModel::Forward(const int32_t* inputs, const int32_t* targets, int B,
                                           int T, UnitHooks& hooks) {
  ZS_ASSIGN_OR_RETURN(const DeviceIds ids, Begin(inputs, targets, /*train=*/true, B, T));
  RunBlocks(ids.inputs, hooks);
  const int head = config_.head_unit();
  HeadChunks(hooks.PreForward(head), [&](int r0, int n) {
    k_.SoftmaxCrossEntropyForward(acts_.logits.data(), ids.targets + r0, n, config_.vocab,
                                  acts_.logits.data(), acts_.losses.data() + r0);
  });
  hooks.PostForward(head);
  SumLosses();
  return rt_.FinishCall();
}

absl::Status LlamaModel::Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                                std::vector<float>* logits) {
  ZS_ASSIGN_OR_RETURN(const DeviceIds ids, Begin(inputs, nullptr, /*train=*/false, B, T));
  const int64_t bt = int64_t{B} * T, V = config_.vocab;
  RunBlocks(ids.inputs, hooks);
  logits->resize(static_cast<size_t>(bt * V));
  const int head = config_.head_unit();
  HeadChunks(hooks.PreForward(head), [&](int r0, int n) {
    rt_.CopyToHost(logits->data() + r0 * V, acts_.logits.data(), int64_t{n} * V * 4);
  });
  hooks.PostForward(head);
  return rt_.Finish();
}

}  // namespace zeroshard
