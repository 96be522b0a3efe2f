"""A random Llama-family model directory in BF16, written with numpy alone
(no torch): config.json in transformers 4's keys and safetensors shards of
one decoder layer each behind model.safetensors.index.json, the way
published checkpoints come. For tests and benches that need a model of a
chosen size without downloading one (tests/trainer/hf_bounded_load_test.py,
bench/model/hf_load_bench.py).
"""
import json
import os

import numpy as np


def _write_bf16(path, tensors):
    """safetensors with BF16 tensors given as uint16 arrays (numpy has no bf16)."""
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "BF16", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())


def _bf16(rng, shape, std):
    a = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
    return (a.view(np.uint32) >> 16).astype(np.uint16)  # Truncated: any bf16 will do.


def write_llama(out, vocab=512, hidden=1024, inner=2816, layers=12, heads=16, kv_heads=4,
                max_positions=256, seed=0):
    """Writes the model to `out`; returns its parameter count."""
    os.makedirs(out, exist_ok=True)
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=vocab,
                  hidden_size=hidden, intermediate_size=inner, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads,
                  max_position_embeddings=max_positions, rms_norm_eps=1e-5,
                  rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu",
                  torch_dtype="bfloat16")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rng = np.random.default_rng(seed)
    head_dim = hidden // heads
    one = np.uint16(0x3F80)  # 1.0 in bf16: the norms' weights.
    shards = []
    for i in range(layers):
        p = f"model.layers.{i}."
        shards.append({
            p + "input_layernorm.weight": np.full((hidden,), one),
            p + "self_attn.q_proj.weight": _bf16(rng, (heads * head_dim, hidden), 0.02),
            p + "self_attn.k_proj.weight": _bf16(rng, (kv_heads * head_dim, hidden), 0.02),
            p + "self_attn.v_proj.weight": _bf16(rng, (kv_heads * head_dim, hidden), 0.02),
            p + "self_attn.o_proj.weight": _bf16(rng, (hidden, heads * head_dim), 0.02),
            p + "post_attention_layernorm.weight": np.full((hidden,), one),
            p + "mlp.gate_proj.weight": _bf16(rng, (inner, hidden), 0.02),
            p + "mlp.up_proj.weight": _bf16(rng, (inner, hidden), 0.02),
            p + "mlp.down_proj.weight": _bf16(rng, (hidden, inner), 0.02)})
    shards.append({"model.embed_tokens.weight": _bf16(rng, (vocab, hidden), 0.02),
                   "model.norm.weight": np.full((hidden,), one),
                   "lm_head.weight": _bf16(rng, (vocab, hidden), 0.02)})
    weight_map, total, params = {}, 0, 0
    for k, tensors in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        _write_bf16(os.path.join(out, name), tensors)
        for key, a in tensors.items():
            weight_map[key] = name
            total += a.nbytes
            params += a.size
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return params
