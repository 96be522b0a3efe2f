#!/usr/bin/env python3
"""Independent NumPy (float64) reference of the GPT-2 layout model.

Written from the GPT-2 equations (Radford et al., 2019; pre-LayerNorm blocks,
tanh-approximate GELU, causal softmax attention, LM head tied to wte), not from
the C++ code: vectorised forward and a hand-derived backward over whole arrays.

Usage: reference_gpt.py DIR [--selfcheck]
DIR/meta.txt lines (whitespace separated):
  config VOCAB N_LAYER N_EMBD N_HEAD N_CTX
  batch B T
  scale LOSS_SCALE
  param UNIT NAME OFFSET DIM...        (one per parameter, any order)
DIR/unit_<u>.f32   little-endian float32 flat buffer of unit u
DIR/inputs.i32, DIR/targets.i32   little-endian int32 [B, T]
Writes DIR/loss.f64 (sum of per-token cross-entropies, nats) and
DIR/grad_<u>.f64 (d(scale * loss)/d(unit u), same layout as unit_<u>.f32).
--selfcheck also compares a few backward entries against float64 central
finite differences and exits 1 if they disagree (checks this file itself).
"""
import os
import sys

import numpy as np

EPS = 1e-5
GELU_K = np.sqrt(2.0 / np.pi)


def read_meta(d):
    params = {}
    with open(os.path.join(d, "meta.txt")) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "config":
                vocab, n_layer, n_embd, n_head, n_ctx = map(int, w[1:6])
            elif w[0] == "batch":
                B, T = int(w[1]), int(w[2])
            elif w[0] == "scale":
                scale = float(w[1])
            elif w[0] == "param":
                params[w[2]] = (int(w[1]), int(w[3]), tuple(int(x) for x in w[4:]))
    cfg = dict(vocab=vocab, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_ctx=n_ctx)
    return cfg, B, T, scale, params


def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + EPS)
    xhat = (x - mu) * rstd
    return xhat * g + b, (xhat, rstd, g)


def layernorm_back(dy, cache):
    xhat, rstd, g = cache
    dxhat = dy * g
    C = dy.shape[-1]
    dx = rstd / C * (C * dxhat - dxhat.sum(-1, keepdims=True)
                     - xhat * (dxhat * xhat).sum(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, C).sum(0), dy.reshape(-1, C).sum(0)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_K * (x + 0.044715 * x ** 3)))


def gelu_back(x, dy):
    t = np.tanh(GELU_K * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * 0.044715 * x * x))


def attention(qkv, nh):
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // nh
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, nh, hs).transpose(0, 2, 1, 3)
               for i in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
    mask = np.tril(np.ones((T, T), dtype=bool))
    s = np.where(mask, s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    y = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y, (q, k, v, p, hs)


def attention_back(dy, cache):
    q, k, v, p, hs = cache
    B, nh, T, _ = q.shape
    dyh = dy.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)
    dp = dyh @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ dyh
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(hs)
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, nh * hs)
    return np.concatenate([merge(dq), merge(dk), merge(dv)], axis=-1)


def forward_backward(cfg, W, inputs, targets, scale):
    """W: name -> float64 array. Returns (loss_sum, grads name -> array)."""
    B, T = inputs.shape
    V = cfg["vocab"]
    G = {n: np.zeros_like(a) for n, a in W.items()}
    x = W["wte"][inputs] + W["wpe"][:T][None]
    caches = []
    for l in range(cfg["n_layer"]):
        p = lambda n: W["block.%d.%s" % (l, n)]
        h1, c1 = layernorm(x, p("ln_1.weight"), p("ln_1.bias"))
        qkv = h1 @ p("attn.qkv.weight").T + p("attn.qkv.bias")
        a, ca = attention(qkv, cfg["n_head"])
        x2 = x + a @ p("attn.proj.weight").T + p("attn.proj.bias")
        h2, c2 = layernorm(x2, p("ln_2.weight"), p("ln_2.bias"))
        f = h2 @ p("mlp.fc.weight").T + p("mlp.fc.bias")
        fg = gelu(f)
        x3 = x2 + fg @ p("mlp.proj.weight").T + p("mlp.proj.bias")
        caches.append((h1, c1, a, ca, h2, c2, f, fg))
        x = x3
    hf, cf = layernorm(x, W["ln_f.weight"], W["ln_f.bias"])
    logits = hf @ W["wte"].T
    m = logits.max(-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(logits - m).sum(-1))
    tl = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    loss = float((lse - tl).sum())
    # Backward of scale * loss.
    probs = np.exp(logits - lse[..., None])
    dlogits = probs
    dlogits[np.arange(B)[:, None], np.arange(T)[None], targets] -= 1.0
    dlogits *= scale
    G["wte"] += dlogits.reshape(-1, V).T @ hf.reshape(-1, hf.shape[-1])
    dx, dg, db = layernorm_back(dlogits @ W["wte"], cf)
    G["ln_f.weight"] += dg
    G["ln_f.bias"] += db
    C = x.shape[-1]
    flat = lambda t: t.reshape(-1, t.shape[-1])
    for l in reversed(range(cfg["n_layer"])):
        pn = lambda n: "block.%d.%s" % (l, n)
        h1, c1, a, ca, h2, c2, f, fg = caches[l]
        G[pn("mlp.proj.bias")] += flat(dx).sum(0)
        G[pn("mlp.proj.weight")] += flat(dx).T @ flat(fg)
        df = gelu_back(f, dx @ W[pn("mlp.proj.weight")])
        G[pn("mlp.fc.bias")] += flat(df).sum(0)
        G[pn("mlp.fc.weight")] += flat(df).T @ flat(h2)
        d2, dg, db = layernorm_back(df @ W[pn("mlp.fc.weight")], c2)
        G[pn("ln_2.weight")] += dg
        G[pn("ln_2.bias")] += db
        dx = dx + d2
        G[pn("attn.proj.bias")] += flat(dx).sum(0)
        G[pn("attn.proj.weight")] += flat(dx).T @ flat(a)
        dqkv = attention_back(dx @ W[pn("attn.proj.weight")], ca)
        G[pn("attn.qkv.bias")] += flat(dqkv).sum(0)
        G[pn("attn.qkv.weight")] += flat(dqkv).T @ flat(h1)
        d1, dg, db = layernorm_back(dqkv @ W[pn("attn.qkv.weight")], c1)
        G[pn("ln_1.weight")] += dg
        G[pn("ln_1.bias")] += db
        dx = dx + d1
    np.add.at(G["wte"], inputs, dx)
    G["wpe"][:T] += dx.sum(0)
    assert C == cfg["n_embd"]
    return loss, G


def selfcheck(cfg, W, inputs, targets, scale, G):
    rng = np.random.default_rng(0)
    h = 1e-6
    worst = 0.0
    for name in sorted(W):
        for _ in range(3):
            idx = tuple(rng.integers(0, s) for s in W[name].shape)
            old = W[name][idx]
            W[name][idx] = old + h
            lp, _ = forward_backward(cfg, W, inputs, targets, scale)
            W[name][idx] = old - h
            lm, _ = forward_backward(cfg, W, inputs, targets, scale)
            W[name][idx] = old
            fd = scale * (lp - lm) / (2 * h)
            err = abs(fd - G[name][idx]) / max(1e-3, abs(fd))
            worst = max(worst, err)
    print("selfcheck worst relative error %.3g" % worst)
    return worst < 1e-4


def main():
    d = sys.argv[1]
    cfg, B, T, scale, params = read_meta(d)
    units = {}
    W = {}
    for name, (u, off, shape) in params.items():
        if u not in units:
            units[u] = np.fromfile(os.path.join(d, "unit_%d.f32" % u), dtype="<f4")
        n = int(np.prod(shape))
        W[name] = units[u][off:off + n].astype(np.float64).reshape(shape)
    inputs = np.fromfile(os.path.join(d, "inputs.i32"), dtype="<i4").reshape(B, T)
    targets = np.fromfile(os.path.join(d, "targets.i32"), dtype="<i4").reshape(B, T)
    loss, G = forward_backward(cfg, W, inputs, targets, scale)
    np.array([loss], dtype="<f8").tofile(os.path.join(d, "loss.f64"))
    for u, buf in units.items():
        g = np.zeros(buf.shape, dtype=np.float64)
        for name, (pu, off, shape) in params.items():
            if pu == u:
                g[off:off + int(np.prod(shape))] = G[name].ravel()
        g.astype("<f8").tofile(os.path.join(d, "grad_%d.f64" % u))
    if "--selfcheck" in sys.argv and not selfcheck(cfg, W, inputs, targets, scale, G):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
