"""ref_hybrid.py -- the NumPy reference of the hybrid families qwen3_next and qwen3_5_moe.

Written from transformers' modeling_qwen3_next.py and the Qwen3.5 modeling files
(modular_qwen3_5.py, modular_qwen3_5_moe.py), nothing else. Imported by
ref_forward.py, which picks HybridModel for these model types; same interface as
its Model (new_cache, forward, cfg.vocab).

Layer l: gated full attention if layer_types[l] == "full_attention" (absent:
(l + 1) % full_attention_interval == 0), else Gated DeltaNet; then the MoE block.
All RMSNorms of the model scale by (1 + w); the DeltaNet output norm by w.

Gated attention: q_proj -> (n, heads, 2*D): query = [..., :D], gate = [..., D:];
q/k per-head norm, RoPE on the first int(D * partial_rotary_factor) dims,
causal softmax attention, o = attn * sigmoid(gate) (flattened), then o_proj.

Gated DeltaNet (nk key heads of dk, nv value heads of dv, r = nv / nk):
  qwen3_next in_proj_qkvz row blocks per key head g: [q (dk) | k (dk) | v (r*dv) | z (r*dv)],
             in_proj_ba per key head g: [b (r) | a (r)];
  qwen3_5    in_proj_qkv = [q (nk*dk) | k (nk*dk) | v (nv*dv)], in_proj_z, in_proj_b, in_proj_a.
  x = [q | k | v] (channels C), causal depthwise conv over time with kernel K
      out[t, c] = sum_j w[c, j] * x[t - K + 1 + j, c] (zeros before the sequence), then SiLU;
  beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)  (softplus(x) = x above 20);
  q, k L2-normalised per head (x * rsqrt(sum x^2 + 1e-6)), value head h reads key head h // r,
  q scaled by dk^-0.5; per value head the delta rule with state S (dk, dv), from zeros:
      S = S * exp(g_t); u = beta_t * (v_t - S^T k_t); S = S + k_t u^T; o_t = S^T q_t
  out = out_proj(rmsnorm(o) * w * silu(z)) per value head.

Forms (--linear-form): "chunked" (default) runs a multi-token call as
transformers' torch_chunk_gated_delta_rule does (chunks of 64 from the call's
first token, the WY form with the triangular solve), and a one-token call with
the recurrent step -- exactly what transformers does for a prompt then decode;
"recurrent" runs every token with the recurrent step. Both give the same values
in exact arithmetic; in float32 they differ by rounding.

MoE: softmax router, top-k, renormalised (qwen3_next: if norm_topk_prob; qwen3_5_moe:
always), slot-order sum, plus sigmoid(shared_expert_gate(x)) * shared_expert(x).
Qwen3.5 stores experts stacked: mlp.experts.gate_up_proj (E, 2F, H), gate rows first,
and mlp.experts.down_proj (E, H, F).
"""

import json
import os

import numpy as np

import ref_forward as rf

F32 = np.float32
HYBRID = ("qwen3_next", "qwen3_5_moe")
CHUNK = 64


def rms_norm_1p(x, w, eps):
    """Qwen3-Next RMSNorm: (x * rsqrt(mean(x^2) + eps)) * (1 + w), float32."""
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=F32)
    return (x * (F32(1.0) / np.sqrt(var + F32(eps)))) * (F32(1.0) + w)


def rms_norm_gated(x, w, z, eps):
    """RMSNormGated: w * (x * rsqrt(mean(x^2) + eps)), then * silu(z)."""
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=F32)
    return (w * (x * (F32(1.0) / np.sqrt(var + F32(eps))))) * rf.silu(z)


def l2norm(x, eps=1e-6):
    return x * (F32(1.0) / np.sqrt(np.sum(x * x, axis=-1, keepdims=True, dtype=F32) + F32(eps)))


def softplus(x):
    with np.errstate(over="ignore"):
        return np.where(x > F32(20.0), x, np.log1p(np.exp(x))).astype(F32)


def delta_recurrent(q, k, v, g, beta, S):
    """q, k (n, h, dk) normalised and q scaled; v (n, h, dv); g, beta (n, h); S (h, dk, dv)
    updated in place. Returns o (n, h, dv)."""
    n = q.shape[0]
    o = np.empty((n, v.shape[1], v.shape[2]), dtype=F32)
    for t in range(n):
        S *= np.exp(g[t])[:, None, None]
        mem = np.sum(S * k[t][:, :, None], axis=1, dtype=F32)             # (h, dv)
        u = (v[t] - mem) * beta[t][:, None]
        S += k[t][:, :, None] * u[:, None, :]
        o[t] = np.sum(S * q[t][:, :, None], axis=1, dtype=F32)
    return o


def delta_chunked(q, k, v, g, beta, S):
    """transformers' torch_chunk_gated_delta_rule over n tokens from state S (h, dk, dv),
    chunks of 64 from the first token (the last one zero-padded); S updated in place."""
    n, h, dk = q.shape
    dv = v.shape[2]
    pad = (CHUNK - n % CHUNK) % CHUNK
    def P(x):
        return np.concatenate([x, np.zeros((pad,) + x.shape[1:], dtype=F32)], axis=0) if pad else x
    # (h, chunks, 64, d)
    def C(x):
        x = P(x)
        return np.ascontiguousarray(np.moveaxis(x, 0, 1)).reshape((h, -1, CHUNK) + x.shape[2:])
    qc, kc, vc = C(q), C(k), C(v)
    bc, gc = C(beta), C(g)
    vb, kb = vc * bc[..., None], kc * bc[..., None]
    gc = np.cumsum(gc, axis=-1, dtype=F32)
    diff = gc[..., :, None] - gc[..., None, :]
    low = np.tril(np.ones((CHUNK, CHUNK), dtype=bool))
    decay = np.where(low, np.exp(np.where(low, diff, F32(0.0))), F32(0.0)).astype(F32)
    A = -(np.matmul(kb, np.swapaxes(kc, -1, -2)) * decay)
    A = np.where(np.tril(np.ones((CHUNK, CHUNK), dtype=bool), -1), A, F32(0.0)).astype(F32)
    for i in range(1, CHUNK):
        row = A[..., i, :i].copy()
        sub = A[..., :i, :i].copy()
        A[..., i, :i] = row + np.sum(row[..., :, None] * sub, axis=-2, dtype=F32)
    A = A + np.eye(CHUNK, dtype=F32)
    U = np.matmul(A, vb)
    W = np.matmul(A, kb * np.exp(gc)[..., None])
    out = np.zeros_like(U)
    strict = np.triu(np.ones((CHUNK, CHUNK), dtype=bool), 1)
    for c in range(qc.shape[1]):
        qi, ki = qc[:, c], kc[:, c]
        att = np.where(strict, F32(0.0), np.matmul(qi, np.swapaxes(ki, -1, -2)) * decay[:, c])
        vnew = U[:, c] - np.matmul(W[:, c], S)
        inter = np.matmul(qi * np.exp(gc[:, c])[..., None], S)
        out[:, c] = inter + np.matmul(att, vnew)
        glast = gc[:, c, -1]
        S[:] = S * np.exp(glast)[:, None, None] + np.matmul(
            np.swapaxes(ki * np.exp(glast[:, None] - gc[:, c])[..., None], -1, -2), vnew)
    o = out.reshape(h, -1, dv)[:, :n]
    return np.ascontiguousarray(np.moveaxis(o, 0, 1))


class HConfig:
    pass


def load_hybrid_config(model_dir, raw):
    path = os.path.join(model_dir, "config.json")
    c = HConfig()
    c.family = raw["model_type"]
    t = raw.get("text_config", raw) if c.family == "qwen3_5_moe" else raw
    c.raw = t

    def req(k):
        v = t.get(k)
        if v is None:
            raise rf.ConfigError(f"{path}: missing field {k}")
        return v

    c.vocab, c.hidden = int(req("vocab_size")), int(req("hidden_size"))
    c.n_layers = int(req("num_hidden_layers"))
    c.n_heads, c.n_kv = int(req("num_attention_heads")), int(req("num_key_value_heads"))
    c.head_dim = int(t.get("head_dim") or c.hidden // c.n_heads)
    c.eps = float(t.get("rms_norm_eps", 1e-6))
    c.tie = bool(raw.get("tie_word_embeddings", t.get("tie_word_embeddings", False)))
    c.max_pos = int(t.get("max_position_embeddings", 4096))
    rp = t.get("rope_parameters") if isinstance(t.get("rope_parameters"), dict) else {}
    theta = float(rp.get("rope_theta", t.get("rope_theta", 10000.0)))
    prf = float(rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 1.0)))
    kind = rp.get("rope_type", "default")
    if kind != "default" or t.get("rope_scaling"):
        raise rf.ConfigError(f"{path}: rope scaling is not supported for {c.family}")
    c.rot_dim = int(c.head_dim * prf)
    c.rope = rf.Rope(c.rot_dim, theta, None, c.max_pos, deepseek=False)
    c.softmax_scale = c.head_dim ** -0.5
    c.sliding_window = None
    interval = int(t.get("full_attention_interval", 4))
    lt = t.get("layer_types") or ["full_attention" if (l + 1) % interval == 0 else "linear_attention"
                                  for l in range(c.n_layers)]
    c.linear = [x == "linear_attention" for x in lt]
    c.nk, c.nv = int(req("linear_num_key_heads")), int(req("linear_num_value_heads"))
    c.dk, c.dv = int(req("linear_key_head_dim")), int(req("linear_value_head_dim"))
    c.conv_k = int(t.get("linear_conv_kernel_dim", 4))
    c.n_experts, c.top_k = int(req("num_experts")), int(req("num_experts_per_tok"))
    c.moe_inter = int(req("moe_intermediate_size"))
    c.shared_inter = int(t.get("shared_expert_intermediate_size") or 0)
    c.norm_topk_prob = True if c.family == "qwen3_5_moe" else bool(t.get("norm_topk_prob", False))
    if c.family == "qwen3_next":
        step = int(t.get("decoder_sparse_step") or 1)
        only = set(t.get("mlp_only_layers") or [])
        c.layer_moe = [(l not in only) and (l + 1) % step == 0 for l in range(c.n_layers)]
        c.inter = int(t.get("intermediate_size") or 0)
    else:
        c.layer_moe = [True] * c.n_layers
    return c


class HybridModel:
    def __init__(self, model_dir, linear_form="chunked"):
        with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
            raw = json.load(f)
        self.cfg = c = load_hybrid_config(model_dir, raw)
        self.linear_form = linear_form
        st = rf.SafetensorsDir(model_dir)
        self.dtypes = sorted({st.dtype_of(n) for n in st.entries})
        self.root = "model.language_model." if c.family == "qwen3_5_moe" else "model."
        H, V = c.hidden, c.vocab
        self.embed = st.get(self.root + "embed_tokens.weight", (V, H))
        self.norm = st.get(self.root + "norm.weight", (H,))
        self.lm_head = self.embed if c.tie else st.get("lm_head.weight", (V, H))
        self.layers = [self._load_layer(st, l) for l in range(c.n_layers)]

    def _load_layer(self, st, l):
        c = self.cfg
        H, D = c.hidden, c.head_dim
        p = f"{self.root}layers.{l}."
        L = rf.Layer()
        L.in_norm = st.get(p + "input_layernorm.weight", (H,))
        L.post_norm = st.get(p + "post_attention_layernorm.weight", (H,))
        L.linear = c.linear[l]
        if L.linear:
            a = p + "linear_attn."
            nk, nv, dk, dv = c.nk, c.nv, c.dk, c.dv
            C = 2 * nk * dk + nv * dv
            if c.family == "qwen3_next":
                L.qkvz = st.get(a + "in_proj_qkvz.weight", (C + nv * dv, H))
                L.ba = st.get(a + "in_proj_ba.weight", (2 * nv, H))
            else:
                L.qkv = st.get(a + "in_proj_qkv.weight", (C, H))
                L.z = st.get(a + "in_proj_z.weight", (nv * dv, H))
                L.b = st.get(a + "in_proj_b.weight", (nv, H))
                L.a = st.get(a + "in_proj_a.weight", (nv, H))
            L.conv = st.get(a + "conv1d.weight", (C, 1, c.conv_k))[:, 0, :]
            L.dt_bias = st.get(a + "dt_bias", (nv,))
            L.A_log = st.get(a + "A_log", (nv,))
            L.gnorm = st.get(a + "norm.weight", (dv,))
            L.out = st.get(a + "out_proj.weight", (H, nv * dv))
        else:
            a = p + "self_attn."
            L.q = st.get(a + "q_proj.weight", (2 * c.n_heads * D, H))
            L.k = st.get(a + "k_proj.weight", (c.n_kv * D, H))
            L.v = st.get(a + "v_proj.weight", (c.n_kv * D, H))
            L.o = st.get(a + "o_proj.weight", (H, c.n_heads * D))
            L.q_norm = st.get(a + "q_norm.weight", (D,))
            L.k_norm = st.get(a + "k_norm.weight", (D,))
        m = p + "mlp."
        L.moe = c.layer_moe[l]
        if not L.moe:
            L.dense = (st.get(m + "gate_proj.weight", (c.inter, H)), st.get(m + "up_proj.weight", (c.inter, H)),
                       st.get(m + "down_proj.weight", (H, c.inter)))
            return L
        E, F = c.n_experts, c.moe_inter
        L.gate = st.get(m + "gate.weight", (E, H))
        if c.family == "qwen3_5_moe":
            gu = st.get(m + "experts.gate_up_proj", (E, 2 * F, H))
            dn = st.get(m + "experts.down_proj", (E, H, F))
            L.experts = [(gu[e, :F], gu[e, F:], dn[e]) for e in range(E)]
        else:
            L.experts = [(st.get(f"{m}experts.{e}.gate_proj.weight", (F, H)),
                          st.get(f"{m}experts.{e}.up_proj.weight", (F, H)),
                          st.get(f"{m}experts.{e}.down_proj.weight", (H, F))) for e in range(E)]
        S = c.shared_inter
        L.shared = None
        if S:
            L.shared = (st.get(m + "shared_expert.gate_proj.weight", (S, H)),
                        st.get(m + "shared_expert.up_proj.weight", (S, H)),
                        st.get(m + "shared_expert.down_proj.weight", (H, S)))
            L.shared_gate = st.get(m + "shared_expert_gate.weight", (1, H))
        return L

    # ---------------------------------------------------------------- forward

    def new_cache(self):
        c = self.cfg
        C = 2 * c.nk * c.dk + c.nv * c.dv
        return {"n": 0, "k": [None] * c.n_layers, "v": [None] * c.n_layers,
                "conv": [np.zeros((c.conv_k - 1, C), dtype=F32) for _ in range(c.n_layers)],
                "ssm": [np.zeros((c.nv, c.dk, c.dv), dtype=F32) for _ in range(c.n_layers)]}

    def forward(self, tokens, cache):
        c = self.cfg
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or len(tokens) == 0:
            raise ValueError("forward needs a non-empty 1-D token list")
        if tokens.min() < 0 or tokens.max() >= c.vocab:
            raise ValueError(f"token id outside [0, {c.vocab})")
        pos = np.arange(cache["n"], cache["n"] + len(tokens))
        cos, sin = c.rope.tables(pos)
        x = self.embed[tokens].astype(F32)
        for l, L in enumerate(self.layers):
            h = rms_norm_1p(x, L.in_norm, c.eps)
            if L.linear:
                x = x + self._deltanet(h, L, cache, l)
            else:
                x = x + self._attn(h, pos, cos, sin, L, cache, l)
            h = rms_norm_1p(x, L.post_norm, c.eps)
            x = x + self._mlp(h, L)
        cache["n"] += len(tokens)
        return rf.linear(rms_norm_1p(x, self.norm, c.eps), self.lm_head)

    def _attn(self, h, pos, cos, sin, L, cache, l):
        c = self.cfg
        n, D, nh, nkv = h.shape[0], c.head_dim, c.n_heads, c.n_kv
        qg = rf.linear(h, L.q).reshape(n, nh, 2 * D)
        q, gate = qg[..., :D], qg[..., D:].reshape(n, nh * D)
        q = rms_norm_1p(q, L.q_norm, c.eps)
        k = rms_norm_1p(rf.linear(h, L.k).reshape(n, nkv, D), L.k_norm, c.eps)
        v = rf.linear(h, L.v).reshape(n, nkv, D)
        r = c.rot_dim
        q = np.concatenate([c.rope.apply(q[..., :r], cos, sin), q[..., r:]], axis=-1)
        k = np.concatenate([c.rope.apply(k[..., :r], cos, sin), k[..., r:]], axis=-1)
        kv_of_head = np.arange(nh) // (nh // nkv)
        o = rf.Model._attend(self, q.astype(F32), k.astype(F32), v.astype(F32), pos, cache, l,
                             kv_of_head, c.softmax_scale)
        return rf.linear(o * rf.sigmoid(gate), L.o)

    def _projections(self, h, L):
        """q, k, v (n, nk*dk | nk*dk | nv*dv) as one (n, C) block, z (n, nv, dv), b, a (n, nv)."""
        c = self.cfg
        n, nk, nv, dk, dv = h.shape[0], c.nk, c.nv, c.dk, c.dv
        if c.family == "qwen3_5_moe":
            return rf.linear(h, L.qkv), rf.linear(h, L.z).reshape(n, nv, dv), rf.linear(h, L.b), rf.linear(h, L.a)
        r = nv // nk
        qkvz = rf.linear(h, L.qkvz).reshape(n, nk, 2 * dk + 2 * r * dv)
        ba = rf.linear(h, L.ba).reshape(n, nk, 2 * r)
        q, k = qkvz[..., :dk], qkvz[..., dk:2 * dk]
        v, z = qkvz[..., 2 * dk:2 * dk + r * dv], qkvz[..., 2 * dk + r * dv:]
        b, a = ba[..., :r].reshape(n, nv), ba[..., r:].reshape(n, nv)
        mixed = np.concatenate([q.reshape(n, -1), k.reshape(n, -1), v.reshape(n, -1)], axis=-1)
        return mixed, z.reshape(n, nv, dv), b, a

    def _deltanet(self, h, L, cache, l):
        c = self.cfg
        n, nk, nv, dk, dv, K = h.shape[0], c.nk, c.nv, c.dk, c.dv, c.conv_k
        mixed, z, b, a = self._projections(h, L)
        xs = np.concatenate([cache["conv"][l], mixed], axis=0)              # (K-1+n, C)
        conv = np.zeros_like(mixed)
        for j in range(K):                                                 # taps in order
            conv = conv + L.conv[:, j] * xs[j:j + n]
        cache["conv"][l] = xs[n:].copy()
        conv = rf.silu(conv)
        q = l2norm(conv[:, :nk * dk].reshape(n, nk, dk))
        k = l2norm(conv[:, nk * dk:2 * nk * dk].reshape(n, nk, dk))
        v = np.ascontiguousarray(conv[:, 2 * nk * dk:].reshape(n, nv, dv))
        rep = nv // nk
        q = np.repeat(q, rep, axis=1) * F32(dk ** -0.5)
        k = np.repeat(k, rep, axis=1)
        beta = rf.sigmoid(b)
        g = (-np.exp(L.A_log) * softplus(a + L.dt_bias)).astype(F32)
        S = cache["ssm"][l]
        if self.linear_form == "recurrent" or n == 1:
            o = delta_recurrent(q.astype(F32), k.astype(F32), v, g, beta, S)
        else:
            o = delta_chunked(q.astype(F32), k.astype(F32), v, g, beta, S)
        o = rms_norm_gated(o, L.gnorm, z, c.eps)
        return rf.linear(o.reshape(n, nv * dv), L.out)

    def _mlp(self, h, L):
        c = self.cfg
        if not L.moe:
            return rf.ffn(h, L.dense)
        ids, w = rf.route(rf.linear(h, L.gate), c.top_k, norm_topk_prob=c.norm_topk_prob)
        y = rf.experts_weighted_sum(h, ids, w, L.experts)
        if L.shared is not None:
            y = y + rf.sigmoid(rf.linear(h, L.shared_gate)) * rf.ffn(h, L.shared)
        return y
