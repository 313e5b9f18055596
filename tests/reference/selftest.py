#!/usr/bin/python3
"""selftest.py -- internal consistency of the NumPy reference forward pass.

Builds tiny random models of every family in numpy (config.json + safetensors,
in F32, BF16 and F16, single file and sharded) in a temporary directory and checks:
  - KV-cache greedy decoding == greedy by full recomputation (ids and logits, bit-exact)
  - logits of a prefix == the first rows of the whole prompt's logits (bit-exact)
  - chunked prefill (two chunks through one cache) == one chunk (bit-exact)
  - greedy is deterministic across runs; logits are finite
  - a BF16 (F16) file gives exactly the logits of an F32 file holding the same
    rounded values; a sharded directory gives the logits of the single file
  - malformed files fail with an error naming the problem
  - routing on hand-computed cases: softmax top-k with and without renormalisation,
    DeepSeek-V2 group-limited greedy (group score = max), DeepSeek-V3 noaux_tc
    (group score = sum of top-2 of the biased scores; bias changes the selection,
    never the weights; routed_scaling_factor), ties -> lower id / lower group
  - RoPE hand cases: rotation of one pair, DeepSeek's interleave rearrangement,
    YaRN softmax scale, dynamic NTK unchanged inside max_position_embeddings
Prints "N passed, N failed" and exits 1 on any failure.
"""

import io
import json
import math
import os
import shutil
import sys
import tempfile
import contextlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import ref_forward as rf  # noqa: E402
import st_io  # noqa: E402

F32 = np.float32
_passed = 0
_failed = 0


def check(cond, what):
    global _passed, _failed
    if cond:
        _passed += 1
    else:
        _failed += 1
        print(f"FAIL: {what}")


def close(a, b, tol=1e-6):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


# ====================================================================== tiny models

V = 97          # vocabulary
H = 32          # hidden


def base_config(family):
    c = {"model_type": family, "vocab_size": V, "hidden_size": H, "num_hidden_layers": 3,
         "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
         "hidden_act": "silu", "max_position_embeddings": 128, "rope_theta": 10000.0,
         "tie_word_embeddings": False}
    if family == "qwen3_moe":
        c.update(head_dim=12, num_experts=8, num_experts_per_tok=3, moe_intermediate_size=16,
                 intermediate_size=24, norm_topk_prob=True, decoder_sparse_step=1,
                 mlp_only_layers=[1],
                 rope_scaling={"rope_type": "yarn", "factor": 4.0,
                               "original_max_position_embeddings": 32})
    elif family == "qwen2_moe":
        c.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                 shared_expert_intermediate_size=20, intermediate_size=24,
                 norm_topk_prob=False, decoder_sparse_step=2, max_position_embeddings=16,
                 rope_scaling={"type": "dynamic", "factor": 2.0})
    elif family == "mixtral":
        c.update(num_local_experts=6, num_experts_per_tok=2, intermediate_size=16,
                 sliding_window=6, rope_theta=1e6, tie_word_embeddings=True,
                 rope_scaling={"rope_type": "linear", "factor": 2.0})
    elif family == "olmoe":
        c.update(num_experts=8, num_experts_per_tok=2, intermediate_size=16,
                 norm_topk_prob=False, clip_qkv=2.5, num_key_value_heads=4,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    elif family == "deepseek_v2":
        c.update(num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=12, qk_nope_head_dim=8,
                 qk_rope_head_dim=4, v_head_dim=6, n_routed_experts=8, n_shared_experts=2,
                 num_experts_per_tok=3, moe_intermediate_size=10, intermediate_size=24,
                 first_k_dense_replace=1, moe_layer_freq=1, topk_method="group_limited_greedy",
                 n_group=4, topk_group=2, scoring_func="softmax", norm_topk_prob=False,
                 routed_scaling_factor=1.5,
                 rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                               "beta_fast": 32, "beta_slow": 1, "mscale": 0.707,
                               "mscale_all_dim": 0.707})
    elif family == "deepseek_v3":
        c.update(num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8,
                 qk_rope_head_dim=4, v_head_dim=6, n_routed_experts=8, n_shared_experts=1,
                 num_experts_per_tok=3, moe_intermediate_size=10, intermediate_size=24,
                 first_k_dense_replace=1, moe_layer_freq=2, topk_method="noaux_tc",
                 n_group=4, topk_group=2, scoring_func="sigmoid", norm_topk_prob=True,
                 routed_scaling_factor=2.5, num_hidden_layers=3,
                 rope_scaling={"type": "yarn", "factor": 40.0,
                               "original_max_position_embeddings": 32, "beta_fast": 32,
                               "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})
    return c


def make_weights(cfg, rng):
    """Random weights with the HF names of cfg's family (float32)."""
    fam = cfg["model_type"]
    W = {}

    def mat(name, rows, cols):
        W[name] = (rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(F32)

    def vec(name, n, base=1.0, s=0.1):
        W[name] = (base + s * rng.standard_normal(n)).astype(F32)

    def ffn(prefix, inter, names=("gate_proj", "up_proj", "down_proj")):
        mat(prefix + names[0] + ".weight", inter, H)
        mat(prefix + names[1] + ".weight", inter, H)
        mat(prefix + names[2] + ".weight", H, inter)

    W["model.embed_tokens.weight"] = rng.standard_normal((V, H)).astype(F32)
    vec("model.norm.weight", H)
    if not cfg.get("tie_word_embeddings"):
        mat("lm_head.weight", V, H)
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    L = cfg["num_hidden_layers"]
    for l in range(L):
        p = f"model.layers.{l}."
        vec(p + "input_layernorm.weight", H)
        vec(p + "post_attention_layernorm.weight", H)
        a = p + "self_attn."
        if fam.startswith("deepseek"):
            qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
            if cfg["q_lora_rank"]:
                mat(a + "q_a_proj.weight", cfg["q_lora_rank"], H)
                vec(a + "q_a_layernorm.weight", cfg["q_lora_rank"])
                mat(a + "q_b_proj.weight", nh * qk, cfg["q_lora_rank"])
            else:
                mat(a + "q_proj.weight", nh * qk, H)
            mat(a + "kv_a_proj_with_mqa.weight", cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"], H)
            vec(a + "kv_a_layernorm.weight", cfg["kv_lora_rank"])
            mat(a + "kv_b_proj.weight", nh * (cfg["qk_nope_head_dim"] + cfg["v_head_dim"]),
                cfg["kv_lora_rank"])
            mat(a + "o_proj.weight", H, nh * cfg["v_head_dim"])
        else:
            D = cfg.get("head_dim") or H // nh
            mat(a + "q_proj.weight", nh * D, H)
            mat(a + "k_proj.weight", nkv * D, H)
            mat(a + "v_proj.weight", nkv * D, H)
            mat(a + "o_proj.weight", H, nh * D)
            if fam == "qwen2_moe":
                for t, n in (("q", nh * D), ("k", nkv * D), ("v", nkv * D)):
                    vec(a + f"{t}_proj.bias", n, 0.0, 0.2)
            if fam == "qwen3_moe":
                vec(a + "q_norm.weight", D)
                vec(a + "k_norm.weight", D)
            if fam == "olmoe":
                vec(a + "q_norm.weight", nh * D)
                vec(a + "k_norm.weight", nkv * D)
        # feed-forward
        if fam in ("qwen3_moe", "qwen2_moe"):
            moe = (l not in cfg.get("mlp_only_layers", [])) and \
                (l + 1) % cfg.get("decoder_sparse_step", 1) == 0
        elif fam.startswith("deepseek"):
            moe = l >= cfg["first_k_dense_replace"] and l % cfg["moe_layer_freq"] == 0
        else:
            moe = True
        m = p + ("block_sparse_moe." if fam == "mixtral" else "mlp.")
        if not moe:
            ffn(m, cfg["intermediate_size"])
            continue
        E = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
        mat(m + "gate.weight", E, H)
        inter = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
        for e in range(E):
            if fam == "mixtral":
                ffn(f"{m}experts.{e}.", inter, ("w1", "w3", "w2"))
            else:
                ffn(f"{m}experts.{e}.", inter)
        if fam == "qwen2_moe":
            ffn(m + "shared_expert.", cfg["shared_expert_intermediate_size"])
            mat(m + "shared_expert_gate.weight", 1, H)
        if fam.startswith("deepseek") and cfg["n_shared_experts"]:
            ffn(m + "shared_experts.", inter * cfg["n_shared_experts"])
        if fam == "deepseek_v3":
            W[m + "gate.e_score_correction_bias"] = (0.05 * rng.standard_normal(E)).astype(F32)
    return W


def round_to(W, dtype):
    """The float32 values a file of `dtype` will hold."""
    out = {}
    for k, v in W.items():
        if dtype == "BF16":
            out[k] = (st_io.float32_to_bf16_bits(v).astype(np.uint32) << 16).view(F32)
        elif dtype == "F16":
            out[k] = v.astype(np.float16).astype(F32)
        else:
            out[k] = v
    return out


def write_model(d, cfg, W, dtype="F32", shards=1):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if shards == 1:
        st_io.write_safetensors(os.path.join(d, "model.safetensors"), W, dtype)
        return d
    names = sorted(W)
    wm = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: W[n] for n in names[s::shards]}
        st_io.write_safetensors(os.path.join(d, fn), part, dtype)
        wm.update({n: fn for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return d


# ====================================================================== model checks

def check_family(tmp, fam, rng):
    cfg = base_config(fam)
    W = make_weights(cfg, rng)
    d = write_model(os.path.join(tmp, fam + "-f32"), cfg, W)
    model = rf.Model(d)
    prompt = [int(t) for t in rng.integers(0, V, 20)]
    G = 8

    logits, ids, extra = rf.run(model, prompt, G, positions_all=True, use_cache=True)
    check(logits.shape == (20, V) and logits.dtype == F32, f"{fam}: logits shape/dtype")
    check(np.isfinite(logits).all(), f"{fam}: finite logits")
    check(float(np.std(logits[0] - logits[-1])) > 1e-3, f"{fam}: logits depend on the position")
    check(len(ids) == G and len(extra) == G - 1, f"{fam}: greedy count")

    logits2, ids2, extra2 = rf.run(model, prompt, G, positions_all=True, use_cache=False)
    check(ids == ids2, f"{fam}: KV-cache greedy ids == recomputation ids ({ids} vs {ids2})")
    check(np.array_equal(logits, logits2) and
          all(np.array_equal(a, b) for a, b in zip(extra, extra2)),
          f"{fam}: KV-cache logits bit-identical to recomputation")
    for r, tok in zip([logits[-1]] + extra, ids):
        check(int(np.argmax(r)) == tok, f"{fam}: greedy token is the argmax")

    logits3, ids3, _ = rf.run(model, prompt, G, use_cache=True)
    check(ids3 == ids and np.array_equal(logits3, logits), f"{fam}: deterministic")

    pre = model.forward(prompt[:7], model.new_cache())
    check(np.array_equal(pre, logits[:7]), f"{fam}: prefix logits == prompt's first rows")

    cache = model.new_cache()
    a = model.forward(prompt[:5], cache)
    b = model.forward(prompt[5:], cache)
    check(np.array_equal(np.concatenate([a, b]), logits), f"{fam}: chunked prefill == one chunk")

    # routing sanity on this model's first MoE layer
    li = next(i for i, L in enumerate(model.layers) if L.moe)
    h = rng.standard_normal((5, H)).astype(F32)
    rid, rw = model.route(h, model.layers[li])
    check(rid.shape == (5, cfg["num_experts_per_tok"]) and
          all(len(set(r)) == len(r) for r in rid.tolist()), f"{fam}: distinct expert ids")
    if fam == "mixtral" or (fam in ("qwen3_moe",) and cfg["norm_topk_prob"]):
        check(close(rw.sum(axis=1), np.ones(5), 1e-6), f"{fam}: renormalised weights sum to 1")
    if fam == "deepseek_v3":
        check(close(rw.sum(axis=1), np.full(5, 2.5), 1e-6), f"{fam}: weights sum to scaling")

    # dtypes: a BF16/F16 file == an F32 file of the same rounded values
    for dt in (("BF16", "F16") if fam in ("qwen3_moe", "deepseek_v3") else ("BF16",)):
        Wr = round_to(W, dt)
        d16 = write_model(os.path.join(tmp, f"{fam}-{dt}"), cfg, W, dt)
        d32 = write_model(os.path.join(tmp, f"{fam}-{dt}-as-f32"), cfg, Wr, "F32")
        m16, m32 = rf.Model(d16), rf.Model(d32)
        check(m16.dtypes == [dt], f"{fam}: {dt} file read as {dt}")
        l16 = m16.forward(prompt, m16.new_cache())
        l32 = m32.forward(prompt, m32.new_cache())
        check(np.array_equal(l16, l32), f"{fam}: {dt} file == F32 file of the rounded values")
        check(np.isfinite(l16).all(), f"{fam}: {dt} finite")

    if fam in ("qwen2_moe", "deepseek_v2"):
        ds = write_model(os.path.join(tmp, fam + "-sharded"), cfg, W, "F32", shards=3)
        ms = rf.Model(ds)
        check(np.array_equal(ms.forward(prompt, ms.new_cache()), logits),
              f"{fam}: sharded == single file")
    return d, prompt, ids


# ====================================================================== routing by hand

def routing_cases():
    ln = np.log

    # softmax top-2: logits = log(p) with p summing to 1 gives scores p exactly-ish
    p = np.array([[0.1, 0.4, 0.2, 0.3]], dtype=np.float64)
    ids, w = rf.route(ln(p).astype(F32), 2, norm_topk_prob=False)
    check(ids.tolist() == [[1, 3]] and close(w, [[0.4, 0.3]]), "softmax top-2, no renorm")
    ids, w = rf.route(ln(p).astype(F32), 2, norm_topk_prob=True)
    check(ids.tolist() == [[1, 3]] and close(w, [[0.4 / 0.7, 0.3 / 0.7]]), "softmax top-2, renorm")

    # ties: equal logits -> lowest ids first, equal weights
    ids, w = rf.route(np.zeros((1, 6), dtype=F32), 3)
    check(ids.tolist() == [[0, 1, 2]] and close(w, [[1 / 6] * 3]), "ties -> lowest ids")
    ids, _ = rf.route(np.array([[0.0, 2.0, 1.0, 2.0, 1.0]], dtype=F32), 3)
    check(ids.tolist() == [[1, 3, 2]], "partial ties ordered by id")

    # DeepSeek-V2 group_limited_greedy: 4 groups of 2, group score = max
    s = np.array([[0.26, 0.01, 0.22, 0.21, 0.23, 0.02, 0.03, 0.02]])
    lg = ln(s).astype(F32)
    ids, w = rf.route(lg, 3, "softmax", "group_limited_greedy", False, 4, 2, None, 2.0, "v2")
    # groups by max: g0 .26, g2 .23 kept -> experts {0,1,4,5} -> 0, 4, 5
    check(ids.tolist() == [[0, 4, 5]], f"v2 group-limited selection {ids.tolist()}")
    check(close(w, [[0.52, 0.46, 0.04]], 1e-5), "v2 no-norm weights * routed_scaling_factor")
    ids, w = rf.route(lg, 3, "softmax", "group_limited_greedy", True, 4, 2, None, 2.0, "v2")
    check(close(w, [[0.26 / 0.51, 0.23 / 0.51, 0.02 / 0.51]], 1e-5),
          "v2 norm weights (no scaling factor)")
    ids, _ = rf.route(lg, 3, "softmax", "greedy", False, 1, 1, None, 1.0, "v2")
    check(ids.tolist() == [[0, 4, 2]], "v2 plain greedy picks the global top-3")

    # DeepSeek-V3 noaux_tc, sigmoid: same numbers as sigmoid scores
    lgt = ln(s / (1 - s)).astype(F32)
    zero = np.zeros(8, dtype=F32)
    ids, w = rf.route(lgt, 3, "sigmoid", "noaux_tc", True, 4, 2, zero, 2.5, "v3")
    # group score = sum of top-2: g0 .27, g1 .43, g2 .25, g3 .05 -> g1, g0 -> 2, 3, 0
    check(ids.tolist() == [[0, 2, 3]], f"v3 group score = sum of top-2 {ids.tolist()}")
    check(close(w, [[2.5 * 0.26 / 0.69, 2.5 * 0.22 / 0.69, 2.5 * 0.21 / 0.69]], 1e-5),
          "v3 weights normalised then * routed_scaling_factor")
    # bias: lift expert 5 (group 2) enough to win its group and the top-k, weights unchanged
    bias = np.zeros(8, dtype=F32)
    bias[5] = 0.5
    ids, w = rf.route(lgt, 3, "sigmoid", "noaux_tc", True, 4, 2, bias, 2.5, "v3")
    # biased: e5 .52 -> g2 = .52+.23 = .75, g1 .43 kept; top-3 of {2,3,4,5}: 5 (.52), 4, 2
    check(ids.tolist() == [[5, 4, 2]], f"v3 bias changes the selection {ids.tolist()}")
    check(close(w, [[2.5 * 0.02 / 0.47, 2.5 * 0.23 / 0.47, 2.5 * 0.22 / 0.47]], 1e-5),
          "v3 weights come from unbiased scores")
    ids, w = rf.route(lgt, 3, "sigmoid", "noaux_tc", False, 4, 2, bias, 2.5, "v3")
    check(close(w, [[2.5 * 0.02, 2.5 * 0.23, 2.5 * 0.22]], 1e-5), "v3 no-norm: scores * scaling")
    # bias can only re-rank: a uniform bias changes nothing
    ids0, w0 = rf.route(lgt, 3, "sigmoid", "noaux_tc", True, 4, 2, zero, 2.5, "v3")
    ids1, w1 = rf.route(lgt, 3, "sigmoid", "noaux_tc", True, 4, 2, zero + F32(0.3), 2.5, "v3")
    check(ids0.tolist() == ids1.tolist() and np.array_equal(w0, w1), "uniform bias is a no-op")
    # group ties -> lower group index
    ids, _ = rf.route(np.zeros((1, 8), dtype=F32), 2, "sigmoid", "noaux_tc", True, 4, 2,
                      zero, 1.0, "v3")
    check(ids.tolist() == [[0, 1]], f"group ties -> lower groups {ids.tolist()}")
    ids, _ = rf.route(np.zeros((1, 8), dtype=F32), 3, "softmax", "group_limited_greedy", False,
                      4, 2, None, 1.0, "v2")
    check(ids.tolist() == [[0, 1, 2]], f"v2 group ties {ids.tolist()}")
    # excluded groups are excluded even when their experts score higher than kept ones
    s2 = np.array([[0.9, 0.1, 0.8, 0.7, 0.85, 0.05, 0.2, 0.1]])
    ids, _ = rf.route(ln(s2 / (1 - s2)).astype(F32), 4, "sigmoid", "noaux_tc", True, 4, 2,
                      zero, 1.0, "v3")
    # group sums: g0 1.0, g1 1.5, g2 .9, g3 .3 -> g1, g0 -> 0, 2, 3, 1 (e4 .85 excluded)
    check(ids.tolist() == [[0, 2, 3, 1]], f"excluded group stays excluded {ids.tolist()}")


# ====================================================================== RoPE by hand

def rope_cases():
    r = rf.Rope(4, 10000.0, None, 128, deepseek=False)
    cos, sin = r.tables(np.array([3]))
    x = np.array([[[1.0, 2.0, 3.0, 4.0]]], dtype=F32)
    y = r.apply(x, cos, sin)[0, 0]
    f0, f1 = 1.0, 10000.0 ** -0.5
    exp = [1 * math.cos(3 * f0) - 3 * math.sin(3 * f0), 2 * math.cos(3 * f1) - 4 * math.sin(3 * f1),
           3 * math.cos(3 * f0) + 1 * math.sin(3 * f0), 4 * math.cos(3 * f1) + 2 * math.sin(3 * f1)]
    check(close(y, exp, 1e-5), f"rope halves pair rotation {y} vs {exp}")

    d = rf.Rope(4, 10000.0, None, 128, deepseek=True)
    cos, sin = d.tables(np.array([0]))
    y = d.apply(x, cos, sin)[0, 0]
    check(np.array_equal(y, np.array([1, 3, 2, 4], dtype=F32)), "deepseek interleave -> halves")
    cos, sin = d.tables(np.array([3]))
    y = d.apply(x, cos, sin)[0, 0]
    # pairs (x0,x1) and (x2,x3) rotate by 3*f0 and 3*f1
    exp = [1 * math.cos(3 * f0) - 2 * math.sin(3 * f0), 3 * math.cos(3 * f1) - 4 * math.sin(3 * f1),
           2 * math.cos(3 * f0) + 1 * math.sin(3 * f0), 4 * math.cos(3 * f1) + 3 * math.sin(3 * f1)]
    check(close(y, exp, 1e-5), "deepseek rope rotates interleaved pairs")

    dyn = rf.Rope(8, 10000.0, {"type": "dynamic", "factor": 2.0}, 16, deepseek=False)
    plain = rf.Rope(8, 10000.0, None, 16, deepseek=False)
    pos = np.arange(20)
    cd, _ = dyn.tables(pos)
    cp, _ = plain.tables(pos)
    check(np.array_equal(cd[:16], cp[:16]) and not np.array_equal(cd[16:], cp[16:]),
          "dynamic NTK changes only positions past max_position_embeddings")

    cfg = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    y4 = rf.Rope(8, 10000.0, cfg, 128, deepseek=False)
    check(abs(y4.attn_factor - (0.1 * math.log(4) + 1)) < 1e-12, "HF yarn attention factor")
    check(y4.inv_freq[0] == F32(1.0) and abs(y4.inv_freq[-1] - F32(10000 ** -0.75 / 4)) < 1e-9,
          "yarn keeps high frequencies, divides low ones by factor")

    # DeepSeek softmax scale with mscale_all_dim
    tmp = tempfile.mkdtemp(prefix="refst-")
    try:
        c = base_config("deepseek_v3")
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(c, f)
        cf = rf.load_config(tmp)
        m = 0.1 * 1.0 * math.log(40.0) + 1.0
        check(abs(cf.softmax_scale - m * m / math.sqrt(12)) < 1e-12, "deepseek yarn softmax scale")
        check(abs(cf.rope.attn_factor - 1.0) < 1e-12, "deepseek yarn cos/sin mscale ratio = 1")
    finally:
        shutil.rmtree(tmp)


# ====================================================================== errors and CLI

def error_cases(tmp, good_dir, prompt):
    def fails(d, needle):
        try:
            rf.Model(d)
        except (st_io.FormatError, rf.ConfigError) as e:
            return needle in str(e)
        return False

    bad = os.path.join(tmp, "bad-trunc")
    shutil.copytree(good_dir, bad)
    p = os.path.join(bad, "model.safetensors")
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - 10)
    check(fails(bad, "outside"), "truncated file -> error about offsets")

    with open(p, "r+b") as f:
        f.write((10 ** 12).to_bytes(8, "little"))
    check(fails(bad, "header length"), "huge header length -> error")

    cfg = json.load(open(os.path.join(good_dir, "config.json")))
    W = make_weights(cfg, np.random.default_rng(5))
    W2 = dict(W)
    del W2["model.layers.1.post_attention_layernorm.weight"]
    d = write_model(os.path.join(tmp, "bad-missing"), cfg, W2)
    check(fails(d, "missing tensor model.layers.1.post_attention_layernorm.weight"),
          "missing tensor named")
    W3 = dict(W)
    W3["model.norm.weight"] = np.ones(H + 1, dtype=F32)
    d = write_model(os.path.join(tmp, "bad-shape"), cfg, W3)
    check(fails(d, "model.norm.weight has shape [33]"), "wrong shape named")
    c2 = dict(cfg)
    c2["model_type"] = "llama"
    d = write_model(os.path.join(tmp, "bad-arch"), c2, W)
    check(fails(d, "model_type 'llama'"), "unsupported architecture named")

    out = os.path.join(tmp, "logits.bin")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = rf.main(["--model", good_dir, "--tokens", ",".join(map(str, prompt)),
                      "--logits-out", out, "--greedy", "4", "--positions-all"])
    res = json.loads(buf.getvalue())
    check(rc == 0 and res["logits_rows"] == len(prompt) + 3 and len(res["greedy"]) == 4,
          f"CLI result {res}")
    check(os.path.getsize(out) == (len(prompt) + 3) * V * 4, "CLI logits file size")
    m = rf.Model(good_dir)
    lg, ids, extra = rf.run(m, prompt, 4, positions_all=True)
    got = np.fromfile(out, dtype="<f4").reshape(-1, V)
    check(np.array_equal(got, np.concatenate([lg] + [e[None] for e in extra])) and
          res["greedy"] == ids, "CLI logits file == in-process logits")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = rf.main(["--model", good_dir, "--tokens", f"1,{V}"])
    check(rc == 2, "token id >= vocab rejected")


def main():
    rng = np.random.default_rng(1234)
    tmp = tempfile.mkdtemp(prefix="refselftest-")
    try:
        routing_cases()
        rope_cases()
        first = None
        for fam in rf.FAMILIES:
            d, prompt, ids = check_family(tmp, fam, rng)
            if first is None:
                first = (d, prompt)
        error_cases(tmp, *first)
    finally:
        shutil.rmtree(tmp)
    print(f"{_passed} passed, {_failed} failed")
    return 1 if _failed else 0


if __name__ == "__main__":
    sys.exit(main())
