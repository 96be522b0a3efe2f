// A model as data: the one description of a decoder-only transformer that
// the coordinator (units for the shard plan), the planner (sizes), the CLI,
// export and the worker's kernels all read. Two families:
//
// gpt2: zeroshard's reference model, GPT-2's layout (Radford et al., 2019;
//   pre-LayerNorm blocks, learned positions, GELU MLP, tied head), over a
//   byte vocabulary by default. Its parameters keep zeroshard's own names:
//   unit 0 "embed":  wte [V, C] (also the LM head), wpe [n_ctx, C],
//                    ln_f.weight [C], ln_f.bias [C]
//   unit 1+i "block.<i>": block.<i>.ln_1.{weight,bias} [C],
//                    block.<i>.attn.qkv.weight [3C, C], .qkv.bias [3C],
//                    block.<i>.attn.proj.weight [C, C], .proj.bias [C],
//                    block.<i>.ln_2.{weight,bias} [C],
//                    block.<i>.mlp.fc.weight [4C, C], .fc.bias [4C],
//                    block.<i>.mlp.proj.weight [C, 4C], .proj.bias [C]
//
// llama: Hugging Face's LlamaForCausalLM and its relatives Mistral (no
//   sliding window), Qwen2 (q/k/v bias) and Qwen3 (QK-norm, explicit
//   head_dim): RMSNorm (Zhang & Sennrich, 2019), rotary positions in the
//   rotate-half layout (Su et al., 2021), SwiGLU MLP (Shazeer, 2020) and
//   grouped-query attention (Ainslie et al., 2023). Parameters carry HF's
//   names, so weights load and export by name with no layout change
//   (D = head_dim, NH = n_head, KV = n_kv_head, I = n_inner):
//   unit 0 "embed": model.embed_tokens.weight [V, C]; when tied also
//                   model.norm.weight [C] (the head is embed_tokens)
//   unit 1+i "layers.<i>", names under model.layers.<i>.:
//                   input_layernorm.weight [C],
//                   self_attn.{q,k,v}_proj.weight [NH D | KV D | KV D, C],
//                   self_attn.{q,k,v}_proj.bias (qkv_bias),
//                   self_attn.{q,k}_norm.weight [D] (qk_norm),
//                   self_attn.o_proj.weight [C, NH D], .o_proj.bias (o_bias),
//                   post_attention_layernorm.weight [C],
//                   mlp.gate_proj.weight [I, C], mlp.up_proj.weight [I, C]
//                   (adjacent: one [2I, C] matmul), mlp.down_proj.weight [C, I]
//   unit L+1 "head" (untied only): model.norm.weight [C], lm_head.weight [V, C]
//
// Linear weights are [out, in] (y = x W^T + b), as torch.nn.Linear. Offsets
// inside a unit come from MakeShardPlan (common/shard_plan.h).
// Thread-safe: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job_choices.h"
#include "common/shard_plan.h"

namespace zeroshard {

enum class ModelFamily { kGpt2, kLlama };

// Rotary frequency scaling (HF rope_scaling / rope_parameters). "default":
// none; "llama3": Llama 3.1's wavelength-dependent scaling (HF
// _compute_llama3_parameters): wavelengths above original_max_positions /
// low_freq_factor are divided by `factor`, those below
// original_max_positions / high_freq_factor kept, a smooth blend between.
struct RopeScaling {
  std::string type = "default";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_positions = 8192;
};

struct ModelConfig {
  int vocab = 256;  // V. Byte-level tokens for the presets.
  int n_layer = 0;  // L.
  int n_embd = 0;   // C, the residual width (HF hidden_size).
  int n_head = 0;   // NH, query heads.
  int n_ctx = 0;    // Longest sequence trained on (tokens); gpt2: size of wpe.
  ModelFamily family = ModelFamily::kGpt2;
  // The llama family only (0 / defaults for gpt2).
  int n_kv_head = 0;       // KV (num_key_value_heads); NH a multiple of it.
  int head_dim = 0;        // D; C / NH unless the config says otherwise.
  int n_inner = 0;         // I (intermediate_size).
  double norm_eps = 1e-6;  // RMSNorm epsilon (rms_norm_eps).
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qkv_bias = false;  // q/k/v projections have biases (Qwen2, attention_bias).
  bool o_bias = false;    // o_proj has a bias (Llama's attention_bias).
  bool qk_norm = false;   // RMSNorm of each q and k head before rotary (Qwen3).
  bool tied = true;       // LM head = embedding (gpt2: always).
  int max_positions = 0;  // HF max_position_embeddings (export only).
  // The HF config.json this description was read from ("" for presets):
  // export writes it back, so fields zeroshard does not use (token ids,
  // architectures) survive a round trip.
  std::string hf_config_json;

  bool is_llama() const { return family == ModelFamily::kLlama; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  // Units: embed, L blocks, and "head" when a llama model is untied.
  int num_units() const { return n_layer + 1 + (is_llama() && !tied ? 1 : 0); }
  // The unit holding the final norm and the LM head (gpt2 and tied: 0).
  int head_unit() const { return is_llama() && !tied ? n_layer + 1 : 0; }
};

// A gpt2-family description of these sizes (the presets are such).
ModelConfig Gpt2Config(int vocab, int n_layer, int n_embd, int n_head, int n_ctx);

// INVALID_ARGUMENT naming the field: any size < 1, gpt2's n_embd not a
// multiple of n_head, llama's n_head not a multiple of n_kv_head, an odd
// head_dim, a rope type other than default/llama3, a non-positive eps.
absl::Status ValidateModelConfig(const ModelConfig& config);

// Named presets (gpt2 family): "tiny" (tests: 2 layers, 32 wide, 2 heads,
// ctx 16), "small" (the default for `zeroshard launch`), "medium" (CPU
// sizes), and GPT-2's shapes at the byte vocabulary for GPUs: "gpt2" (12
// layers, 768 wide, 12 heads, ctx 1024), "gpt2-medium" (24, 1024, 16, 1024),
// "gpt2-xl" (48, 1600, 25, 1024). NOT_FOUND naming the preset and listing
// the known ones otherwise. ModelPresetNames() lists them in this order.
absl::StatusOr<ModelConfig> ModelPreset(const std::string& name);
std::vector<std::string> ModelPresetNames();
// "model preset (tiny, small, ...) or a Hugging Face model directory", for
// a --model flag's help.
std::string ModelPresetFlagHelp();

// The model's units in plan order (see the header comment).
std::vector<UnitSpec> ModelUnits(const ModelConfig& config);

// Parameters (elements) of the whole model; a tied weight counted once.
int64_t ModelParamCount(const ModelConfig& config);
// fp32 bytes of one full copy of the parameters.
int64_t ModelParamBytes(const ModelConfig& config);

// The description as JSON (every field above) and back, for the job config
// the coordinator serves: workers learn the model from it, never from a
// file of their own. FromJson: INVALID_ARGUMENT naming a bad field, then
// ValidateModelConfig's errors.
std::string ModelConfigToJson(const ModelConfig& config);
absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json);

// ActivationCheckpointing: common/job_choices.h.
// "none" | "blocks"; INVALID_ARGUMENT naming the value and the choices.
absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(const std::string& text);
const char* ActivationCheckpointingName(ActivationCheckpointing mode);

}  // namespace zeroshard
