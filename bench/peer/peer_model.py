"""zeroshard's reference GPT (worker/model/model_config.h) in PyTorch.

The same layout and formulas as worker/model/gpt_model.cc: GPT-2 pre-LayerNorm
blocks (Radford et al., 2019), LayerNorm eps 1e-5, GELU with the tanh
approximation, causal attention scaled by 1/sqrt(head size) over a fused qkv
projection, and the LM head tied to wte with no bias. Module paths equal
zeroshard's parameter names ("block.3.attn.qkv.weight"; "wte" and "wpe" are
the embeddings' weights), so peer_fixture's init.safetensors loads by name.

Attention runs through torch's scaled_dot_product_attention (its fused CPU
kernel), as a PyTorch user would write the model.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Mlp(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = Attention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = Mlp(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, n_layer, n_embd, n_head, n_ctx):
        super().__init__()
        # Bare weights, so the parameters are named "wte" / "wpe" as in zeroshard.
        self.wte = nn.Parameter(torch.empty(vocab, n_embd))
        self.wpe = nn.Parameter(torch.empty(n_ctx, n_embd))
        self.block = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def blocks(self):
        """The modules FSDP2 shards one by one (peer_train.wrap)."""
        return self.block

    def forward(self, idx, targets):
        """Sum over all B*T tokens of the cross-entropy, in nats."""
        T = idx.shape[1]
        x = F.embedding(idx, self.wte) + self.wpe[:T]
        for block in self.block:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1),
                               reduction="sum")


class HfCausalLm(nn.Module):
    """transformers' AutoModelForCausalLM from a model directory in fp32 (its
    sdpa attention, as a PyTorch user runs it), with Gpt's interface: forward
    returns the summed token cross-entropy; blocks() are its decoder layers."""

    def __init__(self, path):
        super().__init__()
        import transformers
        self.hf = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation="sdpa")

    def blocks(self):
        return self.hf.model.layers

    def forward(self, idx, targets):
        logits = self.hf(input_ids=idx).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1),
                               reduction="sum")


def load_safetensors(model, path):
    """Copies every tensor of `path` into the parameter of the same name; raises
    on a name missing from either side or a shape that differs."""
    from safetensors.torch import load_file
    tensors = load_file(path)
    params = dict(model.named_parameters())
    missing = sorted(set(params) ^ set(tensors))
    if missing:
        raise ValueError(f"{path}: names differ from the model's: {missing[:5]}")
    with torch.no_grad():
        for name, value in tensors.items():
            if params[name].shape != value.shape:
                raise ValueError(f"{path}: {name} is {tuple(value.shape)}, "
                                 f"the model's is {tuple(params[name].shape)}")
            params[name].copy_(value)
