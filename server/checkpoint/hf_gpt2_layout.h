// The mapping from zeroshard's reference model (common/model/model_config.h)
// to Hugging Face transformers' GPT2LMHeadModel: tensor names, shapes and
// layouts, and the config.json that describes the same model.
//
// Both models are the same function. Checked facts that make the mapping exact:
//   - fused qkv: zeroshard's attn.qkv output channels are q, k, v consecutive
//     (C each), head h at channels [h*C/NH, (h+1)*C/NH) of each, which is how
//     GPT2Attention splits c_attn's output (split at n_embd, then heads);
//   - attention scaled by 1/sqrt(C/NH), causal mask, no per-layer scaling;
//   - GELU with the tanh approximation ("gelu_new"); LayerNorm eps 1e-5;
//   - every linear has a bias; the LM head is wte (tied, no bias), so no
//     lm_head tensor is written and config.json says tie_word_embeddings.
//
// Tensors (C = n_embd, V = vocab, P = n_ctx; all fp32 -> "F32", values
// bit-for-bit; "T" = transposed: zeroshard's Linear [out, in] becomes
// GPT-2's Conv1D [in, out], hf[i][j] = zs[j][i]):
//   transformer.wte.weight            [V, C]   <- wte [V, C]
//   transformer.wpe.weight            [P, C]   <- wpe [P, C]
//   transformer.h.<i>.ln_1.weight     [C]      <- block.<i>.ln_1.weight
//   transformer.h.<i>.ln_1.bias       [C]      <- block.<i>.ln_1.bias
//   transformer.h.<i>.attn.c_attn.weight [C, 3C] T <- block.<i>.attn.qkv.weight [3C, C]
//   transformer.h.<i>.attn.c_attn.bias   [3C]  <- block.<i>.attn.qkv.bias
//   transformer.h.<i>.attn.c_proj.weight [C, C] T <- block.<i>.attn.proj.weight [C, C]
//   transformer.h.<i>.attn.c_proj.bias   [C]   <- block.<i>.attn.proj.bias
//   transformer.h.<i>.ln_2.weight     [C]      <- block.<i>.ln_2.weight
//   transformer.h.<i>.ln_2.bias       [C]      <- block.<i>.ln_2.bias
//   transformer.h.<i>.mlp.c_fc.weight [C, 4C] T <- block.<i>.mlp.fc.weight [4C, C]
//   transformer.h.<i>.mlp.c_fc.bias   [4C]     <- block.<i>.mlp.fc.bias
//   transformer.h.<i>.mlp.c_proj.weight [4C, C] T <- block.<i>.mlp.proj.weight [C, 4C]
//   transformer.h.<i>.mlp.c_proj.bias [C]      <- block.<i>.mlp.proj.bias
//   transformer.ln_f.weight           [C]      <- ln_f.weight
//   transformer.ln_f.bias             [C]      <- ln_f.bias
// Tokens are bytes (ids 0..255); there is no tokenizer to export.
//
// Thread-safe: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/shard_plan.h"

namespace zeroshard::server {

struct HfTensor {
  std::string hf_name;         // e.g. "transformer.h.0.attn.c_attn.weight".
  std::string source;          // zeroshard's parameter, e.g. "block.0.attn.qkv.weight".
  std::vector<int64_t> shape;  // The Hugging Face shape (elements per dim).
  bool transpose = false;      // Source [rows, cols] is written as [cols, rows].
};

// The export's tensors in the order above (n_layer blocks). `config` must
// pass ValidateModelConfig.
std::vector<HfTensor> HfGpt2Tensors(const ModelConfig& config);

// config.json for GPT2LMHeadModel (model_type "gpt2", sizes from `config`,
// activation gelu_new, layer_norm_epsilon 1e-5, dropouts 0, tied
// embeddings, no bos/eos: byte vocabulary). Pretty-printed JSON text.
std::string HfGpt2ConfigJson(const ModelConfig& config);

// The model a checkpoint holds: `job_config_json` (a manifest's
// model_config_json, the job's JobConfig) carries its description in
// "model_desc" (a model directory's), or names a preset in "model".
// FAILED_PRECONDITION when it is not JSON, names none or its description is
// bad; NOT_FOUND for an unknown preset (as ModelPreset).
absl::StatusOr<ModelConfig> ModelConfigOfJob(const std::string& job_config_json);

// FAILED_PRECONDITION naming the first difference unless `plan` holds
// exactly the parameters of ModelUnits(config) (names, shapes, fp32), in
// units of the same names.
absl::Status CheckPlanIsModel(const ShardPlan& plan, const ModelConfig& config);

// dst [cols, rows] = transpose of src [rows, cols] (row-major fp32).
void TransposeInto(const float* src, int64_t rows, int64_t cols, float* dst);

}  // namespace zeroshard::server
