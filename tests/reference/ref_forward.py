#!/usr/bin/python3
"""ref_forward.py -- the NumPy reference forward pass (the oracle for the C engine).

    /usr/bin/python3 tests/reference/ref_forward.py --model DIR --tokens 1,2,3 \
        [--logits-out FILE] [--greedy N] [--positions-all]

Reads an HF model directory (config.json + safetensors, single file or shards;
F32/F16/BF16 upcast to float32) of one of the families qwen3_moe, qwen2_moe,
mixtral, olmoe, deepseek_v2, deepseek_v3 (and the hybrid qwen3_next,
qwen3_5_moe through ref_hybrid.py), runs the prompt through the model in
float32 and writes the logits of every prompt position to --logits-out as raw
little-endian float32, row-major (n_tokens x vocab). With --greedy N it then
decodes N tokens greedily (argmax, ties -> lowest id) with a KV cache. With
--positions-all the logits file also gets one row for every generated token
that was fed back (N-1 rows), so it holds the logits of every position the
model ran. stdout gets one JSON line:
    {"n_tokens": T, "vocab": V, "logits_rows": R, "greedy": [ids...]}

It is written from the families' published model definitions (HF transformers
modeling_qwen3_moe.py, modeling_qwen2_moe.py, modeling_mixtral.py,
modeling_olmoe.py; DeepSeek's modeling_deepseek.py for V2 and V3) and from
nothing in this project's C code. README.md lists every formula.

Numerics, deliberately: float32 arrays throughout (no float64 accumulation),
and every per-row result is computed the same way whatever the number of rows:
linear layers are one vector-matrix product per row, attention dot products
and softmax sums are elementwise reductions over exactly the causal keys (no
masked padding), expert outputs are summed per token in top-k slot order. So
the KV-cache decode and a full recomputation give bit-identical logits, and the
logits of a prefix do not depend on what follows it.
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_io import FormatError, SafetensorsDir  # noqa: E402

F32 = np.float32

# The KV cache's element type (eaas --kv-cache-dtype): keys and values are
# rounded to it, to nearest even, where the engine stores them (after RoPE and
# the q/k norms; MLA: the normed latent and the roped k_pe); "f32" keeps them.
KV_DTYPE = "f32"


def kv_round(x):
    x = np.asarray(x, dtype=F32)
    if KV_DTYPE == "f16":
        return x.astype(np.float16).astype(F32)
    if KV_DTYPE == "bf16":
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return u.astype(np.uint32).view(F32)
    return x
FAMILIES = ("qwen3_moe", "qwen2_moe", "mixtral", "olmoe", "deepseek_v2", "deepseek_v3")


class ConfigError(Exception):
    """config.json is missing a field, or asks for something the reference does not do."""


# ============================================================== basic blocks

def linear(x, w, b=None):
    """x (n, in) @ w(out, in)^T (+ b) -> (n, out); one vector-matrix product per row."""
    y = np.matmul(x[:, None, :], w.T)[:, 0, :]
    if b is not None:
        y = y + b
    return y


def rms_norm(x, w, eps):
    """HF RMSNorm in float32: w * (x * rsqrt(mean(x^2) + eps)), over the last axis."""
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=F32)
    return w * (x * (F32(1.0) / np.sqrt(var + F32(eps))))


def silu(x):
    with np.errstate(over="ignore"):
        return x / (F32(1.0) + np.exp(-x))


def sigmoid(x):
    with np.errstate(over="ignore"):
        return F32(1.0) / (F32(1.0) + np.exp(-x))


def softmax_rows(x):
    """Softmax over the last axis, float32."""
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True, dtype=F32)


def ffn(x, e):
    """SiLU-gated FFN: down(silu(gate(x)) * up(x)). e = (w_gate, w_up, w_down)."""
    wg, wu, wd = e
    return linear(silu(linear(x, wg)) * linear(x, wu), wd)


def seq_sum(cols):
    """Left-to-right float32 sum of a list of equally shaped arrays."""
    acc = cols[0]
    for c in cols[1:]:
        acc = acc + c
    return acc


# ============================================================== routing

def topk_desc(v, k):
    """Indices of the k largest values of each row of v, largest first; equal values in
    ascending index order (a stable sort of -v)."""
    return np.argsort(-v, axis=-1, kind="stable")[..., :k]


def route(logits, top_k, scoring="softmax", method="greedy", norm_topk_prob=False,
          n_group=1, topk_group=1, bias=None, scaling=1.0, weight_rule="hf"):
    """Router. logits (n, E) float32 -> (ids (n, top_k) int64, weights (n, top_k) float32),
    slots ordered by selection score descending (ties: lower expert id first).

    scoring: "softmax" | "sigmoid" -> scores s.
    method:  "greedy"               top-k of s
             "group_limited_greedy" (DeepSeek-V2) group score = max of s in the group
             "noaux_tc"             (DeepSeek-V3) c = s + bias; group score = sum of the
                                    2 largest c in the group; top-k of c
             For the two group methods, the topk_group best groups are kept and every
             expert of the other groups is excluded (-inf) before the final top-k.
    weights are s at the chosen ids (never the biased c), then
    weight_rule: "hf"  if norm_topk_prob: w / sum(w)               (qwen2/3, olmoe, mixtral)
                 "v2"  if top_k > 1 and norm: w / (sum(w) + 1e-20), else w * scaling
                 "v3"  if top_k > 1 and norm: w / (sum(w) + 1e-20); then w * scaling
    sums are left to right in slot order.
    """
    logits = np.asarray(logits, dtype=F32)
    n, E = logits.shape
    if scoring == "softmax":
        s = softmax_rows(logits)
    elif scoring == "sigmoid":
        s = sigmoid(logits)
    else:
        raise ConfigError(f"scoring_func {scoring!r} is not supported")
    if method in ("greedy", "gready"):
        choice = s
    elif method in ("group_limited_greedy", "noaux_tc"):
        if n_group < 1 or E % n_group != 0:
            raise ConfigError(f"n_group {n_group} does not divide {E} experts")
        if not 1 <= topk_group <= n_group:
            raise ConfigError(f"topk_group {topk_group} not in [1, n_group={n_group}]")
        per = E // n_group
        if top_k > topk_group * per:
            raise ConfigError(f"top_k {top_k} > experts in {topk_group} groups of {per}")
        if method == "noaux_tc":
            if bias is None:
                raise ConfigError("noaux_tc needs e_score_correction_bias")
            if per < 2:
                raise ConfigError("noaux_tc needs at least 2 experts per group")
            choice = s + bias[None, :].astype(F32)
            g = choice.reshape(n, n_group, per)
            top2 = -np.sort(-g, axis=-1, kind="stable")[..., :2]
            gscore = top2[..., 0] + top2[..., 1]
        else:
            choice = s
            gscore = s.reshape(n, n_group, per).max(axis=-1)
        keep = topk_desc(gscore, topk_group)
        gmask = np.zeros((n, n_group), dtype=bool)
        np.put_along_axis(gmask, keep, True, axis=1)
        emask = np.repeat(gmask, per, axis=1)
        choice = np.where(emask, choice, F32(-np.inf)).astype(F32)
    else:
        raise ConfigError(f"topk_method {method!r} is not supported")
    ids = topk_desc(choice, top_k)
    w = np.take_along_axis(s, ids, axis=1).astype(F32)
    cols = [w[:, j] for j in range(top_k)]
    if weight_rule == "hf":
        if norm_topk_prob:
            w = w / seq_sum(cols)[:, None]
    elif weight_rule == "v2":
        if top_k > 1 and norm_topk_prob:
            w = w / (seq_sum(cols)[:, None] + F32(1e-20))
        else:
            w = w * F32(scaling)
    elif weight_rule == "v3":
        if top_k > 1 and norm_topk_prob:
            w = w / (seq_sum(cols)[:, None] + F32(1e-20))
        w = w * F32(scaling)
    else:
        raise ValueError(weight_rule)
    return ids.astype(np.int64), w.astype(F32)


def experts_weighted_sum(x, ids, w, experts):
    """y[t] = sum over slots j (in order 0..k-1) of w[t, j] * expert_{ids[t, j]}(x[t])."""
    n, k = ids.shape
    out = np.zeros((n, k, x.shape[1]), dtype=F32)
    for e in np.unique(ids):
        rows, slots = np.nonzero(ids == e)
        out[rows, slots] = ffn(x[rows], experts[int(e)])
    y = np.zeros((n, x.shape[1]), dtype=F32)
    for j in range(k):
        y = y + w[:, j:j + 1] * out[:, j, :]
    return y


# ============================================================== RoPE

def _mscale(scale, mscale=1.0):
    """YaRN magnitude scale (same formula in HF and DeepSeek): 0.1*mscale*ln(scale)+1, 1 if scale<=1."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn_inv_freq(theta, dim, factor, orig_max_pos, beta_fast, beta_slow, truncate=True):
    """YaRN inverse frequencies (dim/2,) as float64 (cast by the caller)."""
    def corr_dim(n_rot):
        return (dim * math.log(orig_max_pos / (n_rot * 2 * math.pi))) / (2 * math.log(theta))
    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extra_factor = 1.0 - ramp                       # 1 = keep the original frequency
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_extra = 1.0 / pos_freqs
    inv_inter = 1.0 / (factor * pos_freqs)
    return inv_inter * (1.0 - extra_factor) + inv_extra * extra_factor


class Rope:
    """cos/sin tables for a rotary dimension `dim` and the rotation itself.

    style "halves": HF rotate_half on [x1 | x2] halves.
    style "deepseek": DeepSeek first rearranges each vector from interleaved pairs to
    halves (x[0::2] then x[1::2]), then applies the same rotate_half rotation.
    """

    def __init__(self, dim, theta, scaling, max_pos, deepseek):
        self.dim = dim
        self.theta = float(theta)
        self.max_pos = int(max_pos)
        self.style = "deepseek" if deepseek else "halves"
        self.attn_factor = 1.0
        self.dynamic_factor = None
        base = self.theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        inv = 1.0 / base
        kind = "default"
        if scaling:
            kind = scaling.get("rope_type", scaling.get("type")) or "default"
        self.kind = kind
        if kind == "default":
            pass
        elif kind == "linear":
            inv = inv / float(scaling["factor"])
        elif kind == "dynamic":
            self.dynamic_factor = float(scaling["factor"])
        elif kind == "yarn":
            if deepseek:
                # DeepseekV2YarnRotaryEmbedding
                factor = float(scaling["factor"])
                orig = scaling.get("original_max_position_embeddings", 4096)
                inv = _yarn_inv_freq(self.theta, dim, factor, orig,
                                     scaling.get("beta_fast", 32), scaling.get("beta_slow", 1))
                self.attn_factor = (_mscale(factor, scaling.get("mscale", 1))
                                    / _mscale(factor, scaling.get("mscale_all_dim", 0)))
            else:
                # HF _compute_yarn_parameters (current rule: `factor` as given; it is derived
                # from max_position_embeddings / original only when absent)
                factor = scaling.get("factor")
                orig = scaling.get("original_max_position_embeddings") or self.max_pos
                if factor is None:
                    factor = self.max_pos / orig
                factor = float(factor)
                af = scaling.get("attention_factor")
                ms, msa = scaling.get("mscale"), scaling.get("mscale_all_dim")
                if af is None:
                    if ms and msa:
                        af = _mscale(factor, ms) / _mscale(factor, msa)
                    else:
                        af = _mscale(factor)
                self.attn_factor = float(af)
                inv = _yarn_inv_freq(self.theta, dim, factor, orig,
                                     scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1,
                                     scaling.get("truncate", True))
        elif kind == "llama3":
            factor = float(scaling["factor"])
            lo_f = float(scaling["low_freq_factor"])
            hi_f = float(scaling["high_freq_factor"])
            old = float(scaling["original_max_position_embeddings"])
            lo_wl, hi_wl = old / lo_f, old / hi_f
            wl = 2 * math.pi / inv
            scaled = np.where(wl > lo_wl, inv / factor, inv)
            smooth = (old / wl - lo_f) / (hi_f - lo_f)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wl < hi_wl) & ~(wl > lo_wl)
            inv = np.where(medium, smoothed, scaled)
        else:
            raise ConfigError(f"rope scaling type {kind!r} is not supported")
        self.inv_freq = inv.astype(F32)

    def _inv_freq_at(self, positions):
        """(n, dim/2) float32 inverse frequencies for each position."""
        if self.dynamic_factor is None:
            return np.broadcast_to(self.inv_freq, (len(positions), self.dim // 2))
        # Dynamic NTK, evaluated per position p with seq_len = max(p + 1, max_pos): the
        # base only changes past max_position_embeddings.
        f = self.dynamic_factor
        rows = []
        for p in positions:
            seq_len = max(int(p) + 1, self.max_pos)
            b = self.theta * ((f * seq_len / self.max_pos) - (f - 1)) ** (self.dim / (self.dim - 2))
            rows.append(1.0 / (b ** (np.arange(0, self.dim, 2, dtype=np.float64) / self.dim)))
        return np.array(rows).astype(F32)

    def tables(self, positions):
        """cos, sin: (n, dim) float32 = [cos(p*f) | cos(p*f)] * attention factor."""
        p = np.asarray(positions).astype(F32)[:, None]
        ang = p * self._inv_freq_at(positions)                     # float32 product
        emb = np.concatenate([ang, ang], axis=-1)
        af = F32(self.attn_factor)
        return (np.cos(emb) * af).astype(F32), (np.sin(emb) * af).astype(F32)

    def apply(self, x, cos, sin):
        """x (n, heads, dim); cos/sin (n, dim)."""
        if self.style == "deepseek":
            x = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
        half = self.dim // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos[:, None, :] + rot * sin[:, None, :]


# ============================================================== config

class Config:
    pass


def _rope_settings(raw, default_theta):
    """(theta, scaling dict or None), from rope_theta/rope_scaling or rope_parameters."""
    rp = raw.get("rope_parameters")
    if isinstance(rp, dict) and ("rope_type" in rp or "rope_theta" in rp):
        theta = rp.get("rope_theta", raw.get("rope_theta", default_theta))
        kind = rp.get("rope_type", rp.get("type", "default"))
        return float(theta), (None if kind == "default" else rp)
    sc = raw.get("rope_scaling")
    if sc is not None and not isinstance(sc, dict):
        raise ConfigError("config.json: rope_scaling is not an object")
    return float(raw.get("rope_theta", default_theta)), sc


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    c = Config()
    c.raw = raw
    c.family = raw.get("model_type")
    if c.family not in FAMILIES:
        raise ConfigError(f"{path}: model_type {c.family!r} is not one of {', '.join(FAMILIES)}")

    def req(k):
        v = raw.get(k)
        if v is None:
            raise ConfigError(f"{path}: missing field {k}")
        return v

    c.vocab = int(req("vocab_size"))
    c.hidden = int(req("hidden_size"))
    c.n_layers = int(req("num_hidden_layers"))
    c.n_heads = int(req("num_attention_heads"))
    c.n_kv = int(raw.get("num_key_value_heads") or c.n_heads)
    if c.n_heads % c.n_kv:
        raise ConfigError(f"{path}: num_attention_heads {c.n_heads} not a multiple of "
                          f"num_key_value_heads {c.n_kv}")
    c.eps = float(raw.get("rms_norm_eps", 1e-6))
    c.tie = bool(raw.get("tie_word_embeddings", False))
    c.max_pos = int(raw.get("max_position_embeddings", 4096))
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise ConfigError(f"{path}: hidden_act {act!r}: only silu is supported")
    c.theta, c.rope_scaling = _rope_settings(raw, 1e6 if c.family == "mixtral" else 10000.0)
    c.attention_bias = bool(raw.get("attention_bias", False))
    c.sliding_window = None
    fam = c.family
    if fam in ("qwen3_moe", "qwen2_moe"):
        if raw.get("use_sliding_window"):
            raise ConfigError(f"{path}: use_sliding_window is not supported by the reference")
    if fam == "mixtral" and raw.get("sliding_window"):
        c.sliding_window = int(raw["sliding_window"])

    if fam.startswith("deepseek"):
        c.q_lora_rank = raw.get("q_lora_rank")
        c.kv_lora_rank = int(req("kv_lora_rank"))
        c.qk_nope = int(req("qk_nope_head_dim"))
        c.qk_rope = int(req("qk_rope_head_dim"))
        c.v_dim = int(req("v_head_dim"))
        c.n_experts = raw.get("n_routed_experts")
        c.n_experts = int(c.n_experts) if c.n_experts else 0
        c.top_k = int(raw.get("num_experts_per_tok") or 0)
        c.moe_inter = int(raw.get("moe_intermediate_size") or 0)
        c.inter = int(req("intermediate_size"))
        c.n_shared = int(raw.get("n_shared_experts") or 0)
        c.first_dense = int(raw.get("first_k_dense_replace") or 0)
        c.moe_freq = int(raw.get("moe_layer_freq") or 1)
        v3 = fam == "deepseek_v3"
        c.scoring = raw.get("scoring_func") or ("sigmoid" if v3 else "softmax")
        c.topk_method = raw.get("topk_method") or ("noaux_tc" if v3 else "greedy")
        c.norm_topk_prob = bool(raw.get("norm_topk_prob", v3))
        c.scaling = float(raw.get("routed_scaling_factor") or 1.0)
        c.n_group = int(raw.get("n_group") or 1)
        c.topk_group = int(raw.get("topk_group") or 1)
        c.weight_rule = "v3" if v3 else "v2"
        c.layer_moe = [c.n_experts > 0 and l >= c.first_dense and l % c.moe_freq == 0
                       for l in range(c.n_layers)]
        # softmax scale: 1/sqrt(qk_head_dim), times mscale(factor, mscale_all_dim)^2
        c.softmax_scale = (c.qk_nope + c.qk_rope) ** -0.5
        if c.rope_scaling is not None:
            msa = c.rope_scaling.get("mscale_all_dim", 0)
            if msa:
                m = _mscale(float(c.rope_scaling["factor"]), msa)
                c.softmax_scale = c.softmax_scale * m * m
        c.rope = Rope(c.qk_rope, c.theta, c.rope_scaling, c.max_pos, deepseek=True)
        return c

    c.head_dim = int(raw.get("head_dim") or c.hidden // c.n_heads)
    c.softmax_scale = c.head_dim ** -0.5
    prf = float(raw.get("partial_rotary_factor") or 1.0)
    c.rot_dim = int(c.head_dim * prf)
    c.rope = Rope(c.rot_dim, c.theta, c.rope_scaling, c.max_pos, deepseek=False)
    c.top_k = int(req("num_experts_per_tok"))
    c.scoring, c.topk_method, c.weight_rule = "softmax", "greedy", "hf"
    c.n_group = c.topk_group = 1
    c.scaling = 1.0
    c.clip_qkv = None
    if fam in ("qwen3_moe", "qwen2_moe"):
        c.n_experts = int(req("num_experts"))
        c.moe_inter = int(req("moe_intermediate_size"))
        c.inter = int(raw.get("intermediate_size") or 0)
        c.norm_topk_prob = bool(raw.get("norm_topk_prob", False))
        step = int(raw.get("decoder_sparse_step") or 1)
        only = set(raw.get("mlp_only_layers") or [])
        c.layer_moe = [(l not in only) and c.n_experts > 0 and (l + 1) % step == 0
                       for l in range(c.n_layers)]
        c.shared_inter = int(raw.get("shared_expert_intermediate_size") or 0) \
            if fam == "qwen2_moe" else 0
    elif fam == "mixtral":
        c.n_experts = int(req("num_local_experts"))
        c.moe_inter = int(req("intermediate_size"))
        c.norm_topk_prob = True
        c.layer_moe = [True] * c.n_layers
        c.shared_inter = 0
    elif fam == "olmoe":
        c.n_experts = int(req("num_experts"))
        c.moe_inter = int(req("intermediate_size"))
        c.norm_topk_prob = bool(raw.get("norm_topk_prob", False))
        c.layer_moe = [True] * c.n_layers
        c.shared_inter = 0
        c.clip_qkv = raw.get("clip_qkv")
    return c


# ============================================================== model

class Layer:
    pass


class Model:
    def __init__(self, model_dir):
        self.cfg = c = load_config(model_dir)
        st = SafetensorsDir(model_dir)
        self.dtypes = sorted({st.dtype_of(n) for n in st.entries})
        H, V = c.hidden, c.vocab
        self.embed = st.get("model.embed_tokens.weight", (V, H))
        self.norm = st.get("model.norm.weight", (H,))
        if c.tie:
            self.lm_head = self.embed
        else:
            if "lm_head.weight" not in st:
                raise FormatError(f"{model_dir}: tie_word_embeddings is false and there is no "
                                  f"lm_head.weight")
            self.lm_head = st.get("lm_head.weight", (V, H))
        self.layers = [self._load_layer(st, l) for l in range(c.n_layers)]

    # ---------------------------------------------------------------- loading

    def _load_layer(self, st, l):
        c = self.cfg
        H = c.hidden
        p = f"model.layers.{l}."
        L = Layer()
        L.in_norm = st.get(p + "input_layernorm.weight", (H,))
        L.post_norm = st.get(p + "post_attention_layernorm.weight", (H,))
        a = p + "self_attn."
        if c.family.startswith("deepseek"):
            nh, qk = c.n_heads, c.qk_nope + c.qk_rope
            ab = c.attention_bias
            if c.q_lora_rank:
                r = int(c.q_lora_rank)
                L.q_a = st.get(a + "q_a_proj.weight", (r, H))
                L.q_a_b = st.get(a + "q_a_proj.bias", (r,)) if ab else None
                L.q_a_norm = st.get(a + "q_a_layernorm.weight", (r,))
                L.q_b = st.get(a + "q_b_proj.weight", (nh * qk, r))
            else:
                L.q = st.get(a + "q_proj.weight", (nh * qk, H))
            L.kv_a = st.get(a + "kv_a_proj_with_mqa.weight", (c.kv_lora_rank + c.qk_rope, H))
            L.kv_a_b = st.get(a + "kv_a_proj_with_mqa.bias", (c.kv_lora_rank + c.qk_rope,)) \
                if ab else None
            L.kv_a_norm = st.get(a + "kv_a_layernorm.weight", (c.kv_lora_rank,))
            L.kv_b = st.get(a + "kv_b_proj.weight", (nh * (c.qk_nope + c.v_dim), c.kv_lora_rank))
            L.o = st.get(a + "o_proj.weight", (H, nh * c.v_dim))
            L.o_b = st.get(a + "o_proj.bias", (H,)) if ab else None
        else:
            D, nh, nkv = c.head_dim, c.n_heads, c.n_kv
            L.q = st.get(a + "q_proj.weight", (nh * D, H))
            L.k = st.get(a + "k_proj.weight", (nkv * D, H))
            L.v = st.get(a + "v_proj.weight", (nkv * D, H))
            L.o = st.get(a + "o_proj.weight", (H, nh * D))
            qkv_bias = c.attention_bias
            o_bias = c.attention_bias
            if c.family == "qwen2_moe":
                qkv_bias, o_bias = bool(c.raw.get("qkv_bias", True)), False
            if c.family == "mixtral":
                qkv_bias = o_bias = False
            L.q_b = st.get(a + "q_proj.bias", (nh * D,)) if qkv_bias else None
            L.k_b = st.get(a + "k_proj.bias", (nkv * D,)) if qkv_bias else None
            L.v_b = st.get(a + "v_proj.bias", (nkv * D,)) if qkv_bias else None
            L.o_b = st.get(a + "o_proj.bias", (H,)) if o_bias else None
            L.q_norm = L.k_norm = None
            if c.family == "qwen3_moe":
                L.q_norm = st.get(a + "q_norm.weight", (D,))
                L.k_norm = st.get(a + "k_norm.weight", (D,))
            elif c.family == "olmoe":
                L.q_norm = st.get(a + "q_norm.weight", (nh * D,))
                L.k_norm = st.get(a + "k_norm.weight", (nkv * D,))

        L.moe = c.layer_moe[l]
        m = p + ("block_sparse_moe." if c.family == "mixtral" else "mlp.")

        def expert(prefix, inter, names=("gate_proj", "up_proj", "down_proj")):
            return (st.get(prefix + names[0] + ".weight", (inter, H)),
                    st.get(prefix + names[1] + ".weight", (inter, H)),
                    st.get(prefix + names[2] + ".weight", (H, inter)))

        L.shared = None
        L.shared_gate = None
        L.e_bias = None
        if not L.moe:
            if not c.inter:
                raise ConfigError(f"layer {l} is dense but intermediate_size is not set")
            L.dense = expert(m, c.inter)
            return L
        E = c.n_experts
        L.gate = st.get(m + "gate.weight", (E, H))
        if c.family == "mixtral":
            L.experts = [expert(f"{m}experts.{e}.", c.moe_inter, ("w1", "w3", "w2"))
                         for e in range(E)]
        else:
            L.experts = [expert(f"{m}experts.{e}.", c.moe_inter) for e in range(E)]
        if c.family == "qwen2_moe" and c.shared_inter:
            L.shared = expert(m + "shared_expert.", c.shared_inter)
            L.shared_gate = st.get(m + "shared_expert_gate.weight", (1, H))
        if c.family.startswith("deepseek"):
            if c.n_shared:
                L.shared = expert(m + "shared_experts.", c.moe_inter * c.n_shared)
            if c.topk_method == "noaux_tc":
                L.e_bias = st.get(m + "gate.e_score_correction_bias", (E,))
        return L

    # ---------------------------------------------------------------- forward

    def new_cache(self):
        return {"n": 0, "k": [None] * self.cfg.n_layers, "v": [None] * self.cfg.n_layers}

    def forward(self, tokens, cache):
        """Run `tokens` (the next tokens of the sequence held by `cache`) and return their
        logits (n, vocab). Appends to the cache."""
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
            h = rms_norm(x, L.in_norm, c.eps)
            if c.family.startswith("deepseek"):
                x = x + self._mla(h, pos, cos, sin, L, cache, l)
            else:
                x = x + self._attn(h, pos, cos, sin, L, cache, l)
            h = rms_norm(x, L.post_norm, c.eps)
            x = x + self._mlp(h, L)
        cache["n"] += len(tokens)
        return linear(rms_norm(x, self.norm, c.eps), self.lm_head)

    def _attend(self, q, k, v, pos, cache, l, kv_of_head, scale):
        """Append k, v to layer l's cache; causal attention of q (n, nh, dq) over the cache.
        Returns (n, nh * dv). Each query row reads exactly its visible keys."""
        K = k if cache["k"][l] is None else np.concatenate([cache["k"][l], k], axis=0)
        Vv = v if cache["v"][l] is None else np.concatenate([cache["v"][l], v], axis=0)
        cache["k"][l], cache["v"][l] = K, Vv
        Kh, Vh = K[:, kv_of_head, :], Vv[:, kv_of_head, :]        # (T, nh, d)
        win = self.cfg.sliding_window
        out = np.empty((q.shape[0], q.shape[1], Vv.shape[2]), dtype=F32)
        for i, p in enumerate(pos):
            lo = max(0, p - win + 1) if win else 0
            s = np.sum(Kh[lo:p + 1] * q[i][None], axis=-1, dtype=F32) * F32(scale)  # (L, nh)
            m = np.max(s, axis=0, keepdims=True)
            e = np.exp(s - m)
            pr = e / np.sum(e, axis=0, keepdims=True, dtype=F32)
            out[i] = np.sum(pr[:, :, None] * Vh[lo:p + 1], axis=0, dtype=F32)
        return out.reshape(q.shape[0], -1)

    def _attn(self, h, pos, cos, sin, L, cache, l):
        c = self.cfg
        n, D, nh, nkv = h.shape[0], c.head_dim, c.n_heads, c.n_kv
        q = linear(h, L.q, L.q_b)
        k = linear(h, L.k, L.k_b)
        v = linear(h, L.v, L.v_b)
        if c.family == "olmoe":                      # norm over the whole projection
            q = rms_norm(q, L.q_norm, c.eps)
            k = rms_norm(k, L.k_norm, c.eps)
            if c.clip_qkv is not None:
                cl = F32(c.clip_qkv)
                q, k, v = np.clip(q, -cl, cl), np.clip(k, -cl, cl), np.clip(v, -cl, cl)
        q = q.reshape(n, nh, D)
        k = k.reshape(n, nkv, D)
        v = v.reshape(n, nkv, D)
        if c.family == "qwen3_moe":                  # norm per head
            q = rms_norm(q, L.q_norm, c.eps)
            k = rms_norm(k, L.k_norm, c.eps)
        r = c.rot_dim
        if r == D:
            q, k = c.rope.apply(q, cos, sin), c.rope.apply(k, cos, sin)
        else:
            q = np.concatenate([c.rope.apply(q[..., :r], cos, sin), q[..., r:]], axis=-1)
            k = np.concatenate([c.rope.apply(k[..., :r], cos, sin), k[..., r:]], axis=-1)
        kv_of_head = np.arange(nh) // (nh // nkv)
        o = self._attend(q.astype(F32), kv_round(k), kv_round(v), pos, cache, l,
                         kv_of_head, c.softmax_scale)
        return linear(o, L.o, L.o_b)

    def _mla(self, h, pos, cos, sin, L, cache, l):
        c = self.cfg
        n, nh = h.shape[0], c.n_heads
        if c.q_lora_rank:
            q = linear(rms_norm(linear(h, L.q_a, L.q_a_b), L.q_a_norm, c.eps), L.q_b)
        else:
            q = linear(h, L.q)
        q = q.reshape(n, nh, c.qk_nope + c.qk_rope)
        q_nope, q_pe = q[..., :c.qk_nope], q[..., c.qk_nope:]
        ckv = linear(h, L.kv_a, L.kv_a_b)
        latent, k_pe = ckv[:, :c.kv_lora_rank], ckv[:, c.kv_lora_rank:]
        kv = linear(kv_round(rms_norm(latent, L.kv_a_norm, c.eps)), L.kv_b).reshape(
            n, nh, c.qk_nope + c.v_dim)
        k_nope, v = kv[..., :c.qk_nope], kv[..., c.qk_nope:]
        q_pe = c.rope.apply(q_pe, cos, sin)
        k_pe = kv_round(c.rope.apply(k_pe[:, None, :], cos, sin))  # one rope key for all heads
        qf = np.concatenate([q_nope, q_pe], axis=-1).astype(F32)
        kf = np.concatenate([k_nope, np.broadcast_to(k_pe, (n, nh, c.qk_rope))],
                            axis=-1).astype(F32)
        o = self._attend(qf, kf, np.ascontiguousarray(v, dtype=F32), pos, cache, l,
                         np.arange(nh), c.softmax_scale)
        return linear(o, L.o, L.o_b)

    def route(self, h, L):
        c = self.cfg
        return route(linear(h, L.gate), c.top_k, c.scoring, c.topk_method, c.norm_topk_prob,
                     c.n_group, c.topk_group, L.e_bias, c.scaling, c.weight_rule)

    def _mlp(self, h, L):
        if not L.moe:
            return ffn(h, L.dense)
        ids, w = self.route(h, L)
        y = experts_weighted_sum(h, ids, w, L.experts)
        if L.shared is not None:
            s = ffn(h, L.shared)
            if L.shared_gate is not None:
                s = sigmoid(linear(h, L.shared_gate)) * s
            y = y + s
        return y


# ============================================================== driving

def open_model(model_dir, linear_form="chunked"):
    """Model, or ref_hybrid.HybridModel for qwen3_next / qwen3_5_moe."""
    try:
        with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as f:
            mt = json.load(f).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError) as e:
        raise ConfigError(f"{model_dir}/config.json: {e}") from None
    import ref_hybrid
    if mt in ref_hybrid.HYBRID:
        return ref_hybrid.HybridModel(model_dir, linear_form)
    return Model(model_dir)


def run(model, tokens, greedy=0, positions_all=False, use_cache=True):
    """Prompt logits (T, V), greedy ids, and the extra logits rows of the fed-back tokens."""
    cache = model.new_cache()
    logits = model.forward(tokens, cache)
    out_ids, extra = [], []
    last = logits[-1]
    seq = list(tokens)
    for i in range(greedy):
        nxt = int(np.argmax(last))                 # first maximum = lowest id on ties
        out_ids.append(nxt)
        seq.append(nxt)
        if i + 1 == greedy:
            break
        if use_cache:
            row = model.forward([nxt], cache)[-1]
        else:
            row = model.forward(seq, model.new_cache())[-1]
        extra.append(row)
        last = row
    return logits, out_ids, (extra if positions_all else [])


def main(argv=None):
    ap = argparse.ArgumentParser(description="NumPy reference forward pass")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--logits-out")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--positions-all", action="store_true")
    ap.add_argument("--no-cache", action="store_true",
                    help="greedy by recomputing the whole sequence each step")
    ap.add_argument("--linear-form", choices=("chunked", "recurrent"), default="chunked",
                    help="qwen3_next / qwen3_5_moe: DeltaNet of a multi-token call in the chunked "
                         "form (as transformers runs a prompt) or token by token (ref_hybrid.py)")
    ap.add_argument("--kv-dtype", choices=("f32", "f16", "bf16"), default="f32",
                    help="round keys and values as eaas --kv-cache-dtype stores them")
    a = ap.parse_args(argv)
    global KV_DTYPE
    KV_DTYPE = a.kv_dtype
    try:
        tokens = [int(t) for t in a.tokens.split(",") if t.strip() != ""]
    except ValueError:
        print("ref_forward: error: --tokens must be comma-separated integers", file=sys.stderr)
        return 2
    if not tokens or a.greedy < 0:
        print("ref_forward: error: need at least one token and --greedy >= 0", file=sys.stderr)
        return 2
    try:
        model = open_model(a.model, a.linear_form)
        logits, ids, extra = run(model, tokens, a.greedy, a.positions_all, not a.no_cache)
    except (FormatError, ConfigError, ValueError, OSError) as e:
        print(f"ref_forward: error: {e}", file=sys.stderr)
        return 2
    rows = np.concatenate([logits] + [r[None] for r in extra], axis=0) if extra else logits
    if a.logits_out:
        rows.astype("<f4").tofile(a.logits_out)
    res = {"n_tokens": len(tokens), "vocab": model.cfg.vocab, "logits_rows": int(rows.shape[0]),
           "finite": bool(np.isfinite(rows).all())}
    if a.greedy:
        res["greedy"] = ids
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
