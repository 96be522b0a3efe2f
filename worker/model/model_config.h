// The reference model's shape: a decoder-only transformer in GPT-2 layout
// (Radford et al., 2019, "Language Models are Unsupervised Multitask
// Learners"; pre-LayerNorm blocks, tied embedding/head) over a byte-level
// vocabulary of 256.
//
// Units (the engine's flat buffers, in plan order):
//   unit 0 "embed":  wte [vocab, n_embd] (also the LM head: one parameter),
//                    wpe [n_ctx, n_embd], ln_f.weight [n_embd], ln_f.bias [n_embd]
//   unit 1+i "block.<i>": block.<i>.ln_1.{weight,bias} [C],
//                    block.<i>.attn.qkv.weight [3C, C], .qkv.bias [3C],
//                    block.<i>.attn.proj.weight [C, C], .proj.bias [C],
//                    block.<i>.ln_2.{weight,bias} [C],
//                    block.<i>.mlp.fc.weight [4C, C], .fc.bias [4C],
//                    block.<i>.mlp.proj.weight [C, 4C], .proj.bias [C]
// Linear weights are [out, in] (y = x W^T + b), as torch.nn.Linear.
// Offsets inside a unit come from MakeShardPlan (common/shard_plan.h).
//
// Thread-safe: pure functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/shard_plan.h"

namespace zeroshard {

struct ModelConfig {
  int vocab = 256;  // Byte-level tokens.
  int n_layer = 0;
  int n_embd = 0;   // C; a multiple of n_head.
  int n_head = 0;
  int n_ctx = 0;    // Longest sequence (tokens); size of wpe.
};

// INVALID_ARGUMENT naming the field: any size < 1, or n_embd not a multiple
// of n_head. (vocab may differ from 256 for tests; byte-level text needs 256.)
absl::Status ValidateModelConfig(const ModelConfig& config);

// Named presets: "tiny" (tests: 2 layers, 32 wide, 2 heads, ctx 16),
// "small" (the default for `zeroshard launch`), "medium" (CPU sizes), and
// GPT-2's shapes at the byte vocabulary for GPUs: "gpt2" (12 layers, 768
// wide, 12 heads, ctx 1024), "gpt2-medium" (24, 1024, 16, 1024), "gpt2-xl"
// (48, 1600, 25, 1024). NOT_FOUND naming the preset and listing the known
// ones otherwise. ModelPresetNames() lists them in this order (for --help).
absl::StatusOr<ModelConfig> ModelPreset(const std::string& name);
std::vector<std::string> ModelPresetNames();
// "model preset (tiny, small, ...)": every preset, for a --model flag's help.
std::string ModelPresetFlagHelp();

// The model's units in plan order (see the header comment).
std::vector<UnitSpec> ModelUnits(const ModelConfig& config);

// Parameters (elements) of the whole model; the tied weight counted once.
int64_t ModelParamCount(const ModelConfig& config);
// fp32 bytes of one full copy of the parameters.
int64_t ModelParamBytes(const ModelConfig& config);
// (Activation memory: ModelActivationBytes in gpt_model.h.)

// What the model keeps for backward (`--activation-checkpointing`):
//   kNone:   every block's activations, from forward to backward;
//   kBlocks: each block keeps only its input; its forward is recomputed
//            during backward (Chen et al., 2016, "Training Deep Nets with
//            Sublinear Memory Cost", section 3).
enum class ActivationCheckpointing { kNone, kBlocks };

// "none" | "blocks"; INVALID_ARGUMENT naming the value and the choices.
absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(const std::string& text);
const char* ActivationCheckpointingName(ActivationCheckpointing mode);

// Deterministic GPT-2 style initialisation: linear and embedding weights
// normal(0, 0.02), the two residual projections per block (attn.proj,
// mlp.proj) normal(0, 0.02 / sqrt(2 * n_layer)), LayerNorm gamma 1 and beta
// 0, biases 0. Returns one full fp32 buffer per unit (numel elements, plan
// layout at world size 1). Same (config, seed) -> same bits on any machine.
std::vector<std::vector<float>> InitUnits(const ModelConfig& config, uint64_t seed);

}  // namespace zeroshard
