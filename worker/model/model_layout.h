// Where each parameter sits in its unit, per family, as element offsets
// into the unit's flat buffer (ModelUnits' layout, common/model/model_config.h):
// one table the training models (gpt_model.h, llama_model.h) and the
// generation decoders (kv_decoder.h) read alike. Blocks share one layout,
// so a block's offsets are block 0's. -1 marks a parameter the variant has
// not (a Llama without biases or QK-norm).
// Thread-safe: pure functions.
#pragma once

#include <cstdint>

#include "common/model/model_config.h"

namespace zeroshard {

struct GptLayout {
  int64_t wte, wpe, lnf_w, lnf_b;  // In unit 0.
  struct Block {
    int64_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w,
        fcproj_b;
  } block;
};
// The gpt2 family's layout (checked: every parameter is there).
GptLayout MakeGptLayout(const ModelConfig& config);

struct LlamaLayout {
  int64_t embed;         // In unit 0.
  int64_t norm, head_w;  // In head_unit() (head_w: embed's, in unit 0, when tied).
  struct Block {
    int64_t ln1, q_w, k_w, v_w, q_b, k_b, v_b, q_norm, k_norm, o_w, o_b, ln2, gate_up, down;
  } block;
};
// The llama family's layout.
LlamaLayout MakeLlamaLayout(const ModelConfig& config);

}  // namespace zeroshard
