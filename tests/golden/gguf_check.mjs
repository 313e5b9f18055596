// gguf_check.mjs — validate a GGUF file written by `eaas make-model` against
// the HF directory written by the same command (same family and seed), with
// an independent GGUF parser (@huggingface/gguf) and an independent JS
// re-statement of what llama.cpp's convert_hf_to_gguf.py makes of that HF
// directory:
//   * general.architecture and the <arch>.* hyper-parameters (value AND GGUF
//     value type), tokenizer.ggml.* (tokens, token types, merges, special ids,
//     chat template), general.alignment 32;
//   * the tensor list: names, order, ggml shapes and types (1-D, *_norm and
//     routers in F32, Q8_0 -> F16 when ne0 % 32 != 0), offsets aligned and
//     back to back, file size = data start + padded end of the last tensor;
//   * every tensor value: GGUF element == HF element after the converter's
//     transforms (expert stacking, LlamaModel.permute of q/k rows for
//     `llama`, DeepSeek kv_b split into k_b (transposed) and v_b) — exact
//     for F32/F16/BF16, within half a quantisation step for Q8_0.
//
// usage: node gguf_check.mjs MODEL.gguf HF_DIR [--legacy-mla]
// Prints "N passed, N failed" and exits 1 on any failure.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

// the package lives in tools/node/node_modules (ESM ignores NODE_PATH)
const srcRoot = process.env.EA_SRC ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { gguf } = createRequire(path.join(srcRoot, "tools/node/"))("@huggingface/gguf");

const [file, hfdir, ...flags] = process.argv.slice(2);
const legacyMla = flags.includes("--legacy-mla");
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) passed++;
  else { failed++; if (failed < 40) console.error("FAIL " + what); }
}
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === "bigint" ? x.toString() : x));
function eq(a, b, what) { if (a === b) passed++; else check(false, `${what}: ${show(a)} !== ${show(b)}`); }

// ---------------------------------------------------------------- HF side
const cfg = JSON.parse(fs.readFileSync(path.join(hfdir, "config.json"), "utf8"));
const tcfg = JSON.parse(fs.readFileSync(path.join(hfdir, "tokenizer_config.json"), "utf8"));
const tokj = JSON.parse(fs.readFileSync(path.join(hfdir, "tokenizer.json"), "utf8"));

function readSafetensors(dir) {
  const files = fs.existsSync(path.join(dir, "model.safetensors.index.json"))
    ? [...new Set(Object.values(JSON.parse(fs.readFileSync(path.join(dir, "model.safetensors.index.json"), "utf8")).weight_map))]
    : ["model.safetensors"];
  const t = new Map();
  for (const f of files) {
    const buf = fs.readFileSync(path.join(dir, f));
    const n = Number(buf.readBigUInt64LE(0));
    const hdr = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
    for (const [name, e] of Object.entries(hdr)) {
      if (name === "__metadata__") continue;
      t.set(name, { dtype: e.dtype, shape: e.shape, data: buf.subarray(8 + n + e.data_offsets[0], 8 + n + e.data_offsets[1]) });
    }
  }
  return t;
}
const st = readSafetensors(hfdir);

const f16tab = new Float32Array(65536);
for (let h = 0; h < 65536; h++) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  f16tab[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}
const u32 = new Uint32Array(1), f32v = new Float32Array(u32.buffer);
const bf16 = (h) => { u32[0] = h << 16; return f32v[0]; };
function hfValue(t, i) {
  if (t.dtype === "F32") return t.data.readFloatLE(4 * i);
  if (t.dtype === "F16") return f16tab[t.data.readUInt16LE(2 * i)];
  return bf16(t.data.readUInt16LE(2 * i));
}

// ------------------------------------------------- expected conversion (JS)
const mt = cfg.model_type;
const arch = { qwen3_moe: "qwen3moe", qwen2_moe: "qwen2moe", mixtral: "llama", olmoe: "olmoe",
  deepseek_v2: "deepseek2", deepseek_v3: "deepseek2" }[mt];
const isDs = arch === "deepseek2";
const nExp = cfg.num_experts ?? cfg.num_local_experts ?? cfg.n_routed_experts;

function ggufBase(hf) {
  if (hf === "model.embed_tokens.weight") return "token_embd.weight";
  if (hf === "model.norm.weight") return "output_norm.weight";
  if (hf === "lm_head.weight") return "output.weight";
  const m = hf.match(/^model\.layers\.(\d+)\.(.*)$/);
  const L = m[1], r = m[2];
  const tab = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.q_a_proj.weight": "attn_q_a.weight", "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
    "self_attn.q_b_proj.weight": "attn_q_b.weight", "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
    "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight", "self_attn.kv_b_proj.weight": "attn_kv_b.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight", "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight", "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
  };
  if (!(r in tab)) throw new Error("no GGUF name for " + hf);
  return `blk.${L}.${tab[r]}`;
}

// expected: [{name, shape (torch order, squeezed), get(i) -> HF value}]
const expected = [];
const names = [...st.keys()].sort();   // the converter reads tensors in name order
const seen = {};
for (const hf of names) {
  const t = st.get(hf);
  const em = hf.match(/^model\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight$/);
  if (em) {
    const L = em[1];
    seen[L] = (seen[L] ?? 0) + 1;
    if (seen[L] < 3 * nExp) continue;
    const parts = mt === "mixtral" ? [["w1", "ffn_gate_exps"], ["w2", "ffn_down_exps"], ["w3", "ffn_up_exps"]]
      : [["down_proj", "ffn_down_exps"], ["gate_proj", "ffn_gate_exps"], ["up_proj", "ffn_up_exps"]];
    const pre = mt === "mixtral" ? `model.layers.${L}.block_sparse_moe.experts.` : `model.layers.${L}.mlp.experts.`;
    for (const [w, g] of parts) {
      const srcs = [...Array(nExp).keys()].map((e) => st.get(`${pre}${e}.${w}.weight`));
      const per = srcs[0].shape[0] * srcs[0].shape[1];
      expected.push({ name: `blk.${L}.${g}.weight`, shape: [nExp, ...srcs[0].shape],
        get: (i) => hfValue(srcs[Math.floor(i / per)], i % per) });
    }
    continue;
  }
  const g = ggufBase(hf);
  let shape = t.shape.filter((d) => d !== 1);
  if (shape.length === 0) shape = [1];
  if (mt === "mixtral" && /self_attn\.[qk]_proj\.weight$/.test(hf)) {
    const nh = hf.includes("q_proj") ? cfg.num_attention_heads : cfg.num_key_value_heads;
    const rows = t.shape[0], cols = t.shape[1], hd = rows / nh;
    expected.push({ name: g, shape, get: (i) => {
      const r = Math.floor(i / cols), c = i % cols, h = Math.floor(r / hd), w = r % hd;
      return hfValue(t, (h * hd + (w % 2) * (hd / 2) + Math.floor(w / 2)) * cols + c);
    } });
    continue;
  }
  if (isDs && hf.endsWith("kv_b_proj.weight") && !legacyMla) {
    const nh = cfg.num_attention_heads, nope = cfg.qk_nope_head_dim, v = cfg.v_head_dim, kvl = cfg.kv_lora_rank;
    const L = hf.match(/layers\.(\d+)\./)[1];
    expected.push({ name: `blk.${L}.attn_k_b.weight`, shape: [nh, kvl, nope], get: (i) => {
      const h = Math.floor(i / (kvl * nope)), c = Math.floor(i / nope) % kvl, j = i % nope;
      return hfValue(t, (h * (nope + v) + j) * kvl + c);
    } });
    expected.push({ name: `blk.${L}.attn_v_b.weight`, shape: [nh, v, kvl], get: (i) => {
      const h = Math.floor(i / (v * kvl)), j = Math.floor(i / kvl) % v, c = i % kvl;
      return hfValue(t, (h * (nope + v) + nope + j) * kvl + c);
    } });
    continue;
  }
  expected.push({ name: g, shape, get: (i) => hfValue(t, i) });
}

// ---------------------------------------------------------------- GGUF side
const { metadata, typedMetadata, tensorInfos, tensorDataOffset } = await gguf(file, { typedMetadata: true, allowLocalFile: true });
const fileBuf = fs.readFileSync(file);
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9 };
function kv(key, value, type) {
  const e = typedMetadata[key];
  check(e !== undefined, `metadata key ${key} present`);
  if (!e) return;
  eq(e.type, type, `${key} value type`);
  if (type === T.F32) check(Math.abs(e.value - value) <= 1e-6 * Math.max(1, Math.abs(value)), `${key} = ${e.value}, want ${value}`);
  else eq(typeof e.value === "bigint" ? Number(e.value) : e.value, value, key);
}
const A = (k) => `${arch}.${k}`;
eq(metadata.version, 3, "GGUF version");
kv("general.architecture", arch, T.STR);
kv("general.alignment", 32, T.U32);
kv("general.quantization_version", 2, T.U32);
kv(A("block_count"), cfg.num_hidden_layers, T.U32);
kv(A("context_length"), cfg.max_position_embeddings, T.U32);
kv(A("embedding_length"), cfg.hidden_size, T.U32);
kv(A("feed_forward_length"), cfg.intermediate_size, T.U32);
kv(A("attention.head_count"), cfg.num_attention_heads, T.U32);
kv(A("attention.head_count_kv"), isDs && !legacyMla ? 1 : cfg.num_key_value_heads, T.U32);
kv(A("rope.freq_base"), cfg.rope_theta, T.F32);
kv(A("attention.layer_norm_rms_epsilon"), mt === "olmoe" ? 1e-5 : cfg.rms_norm_eps, T.F32);
kv(A("expert_count"), nExp, T.U32);
kv(A("expert_used_count"), cfg.num_experts_per_tok, T.U32);
if (cfg.head_dim) { kv(A("attention.key_length"), cfg.head_dim, T.U32); kv(A("attention.value_length"), cfg.head_dim, T.U32); }
if (mt === "qwen3_moe" || mt === "qwen2_moe") kv(A("expert_feed_forward_length"), cfg.moe_intermediate_size, T.U32);
if (mt === "qwen2_moe") kv(A("expert_shared_feed_forward_length"), cfg.shared_expert_intermediate_size, T.U32);
if (mt === "mixtral") {
  kv(A("vocab_size"), cfg.vocab_size, T.U32);
  kv(A("rope.dimension_count"), cfg.hidden_size / cfg.num_attention_heads, T.U32);
}
if (isDs) {
  kv(A("leading_dense_block_count"), cfg.first_k_dense_replace, T.U32);
  kv(A("vocab_size"), cfg.vocab_size, T.U32);
  if (cfg.q_lora_rank) kv(A("attention.q_lora_rank"), cfg.q_lora_rank, T.U32);
  else check(!(A("attention.q_lora_rank") in metadata), "no q_lora_rank when q_lora_rank is null");
  kv(A("attention.kv_lora_rank"), cfg.kv_lora_rank, T.U32);
  if (legacyMla) { // older converters: per-head dims, kv_b unsplit
    kv(A("attention.key_length"), cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, T.U32);
    kv(A("attention.value_length"), cfg.v_head_dim, T.U32);
    check(!(A("attention.key_length_mla") in metadata), "legacy: no key_length_mla");
  } else { // MQA over the latent
    kv(A("attention.key_length"), cfg.kv_lora_rank + cfg.qk_rope_head_dim, T.U32);
    kv(A("attention.value_length"), cfg.kv_lora_rank, T.U32);
    kv(A("attention.key_length_mla"), cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, T.U32);
    kv(A("attention.value_length_mla"), cfg.v_head_dim, T.U32);
  }
  kv(A("expert_feed_forward_length"), cfg.moe_intermediate_size, T.U32);
  kv(A("expert_shared_count"), cfg.n_shared_experts, T.U32);
  kv(A("expert_weights_scale"), cfg.routed_scaling_factor, T.F32);
  if (cfg.norm_topk_prob) kv(A("expert_weights_norm"), true, T.BOOL);
  kv(A("expert_gating_func"), cfg.scoring_func === "sigmoid" ? 2 : 1, T.U32);
  kv(A("expert_group_count"), cfg.n_group, T.U32);
  kv(A("expert_group_used_count"), cfg.topk_group, T.U32);
  kv(A("rope.dimension_count"), cfg.qk_rope_head_dim, T.U32);
  const rs = cfg.rope_scaling;
  kv(A("rope.scaling.type"), "yarn", T.STR);
  kv(A("rope.scaling.factor"), rs.factor, T.F32);
  kv(A("rope.scaling.original_context_length"), rs.original_max_position_embeddings, T.U32);
  kv(A("rope.scaling.yarn_log_multiplier"), 0.1 * rs.mscale_all_dim, T.F32);
}
// tokenizer
kv("tokenizer.ggml.model", "gpt2", T.STR);
kv("tokenizer.ggml.pre", isDs ? "deepseek-v3" : "qwen2", T.STR);
const toks = typedMetadata["tokenizer.ggml.tokens"], types = typedMetadata["tokenizer.ggml.token_type"];
eq(toks?.subType, T.STR, "tokens element type");
eq(types?.subType, T.I32, "token_type element type");
eq(toks?.value.length, cfg.vocab_size, "token count = vocab_size");
eq(types?.value.length, cfg.vocab_size, "token_type count = vocab_size");
const byId = new Map(Object.entries(tokj.model.vocab).map(([k, v]) => [v, [k, 1]]));
for (const a of tokj.added_tokens) {
  const looks = /^<\|.*\|>$/s.test(a.content) || /^<｜.*｜>$/s.test(a.content);
  byId.set(a.id, [a.content, a.special || looks ? 3 : 4]);
}
let tokBad = 0, typeBad = 0;
for (let i = 0; i < cfg.vocab_size; i++) {
  const [s, ty] = byId.get(i) ?? [`[PAD${i}]`, 5];
  if (toks.value[i] !== s) tokBad++;
  if (types.value[i] !== ty) typeBad++;
}
eq(tokBad, 0, "tokens differing from tokenizer.json");
eq(typeBad, 0, "token types differing from the converter's rule");
const merges = tokj.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
const gm = typedMetadata["tokenizer.ggml.merges"]?.value ?? [];
eq(gm.length, merges.length, "merge count");
check(gm.every((m, i) => m === merges[i]), "merges equal tokenizer.json's, in order");
kv("tokenizer.ggml.bos_token_id", cfg.bos_token_id, T.U32);
kv("tokenizer.ggml.eos_token_id", cfg.eos_token_id, T.U32);
if (typeof tcfg.add_bos_token === "boolean") kv("tokenizer.ggml.add_bos_token", tcfg.add_bos_token, T.BOOL);
kv("tokenizer.chat_template", tcfg.chat_template, T.STR);

// ------------------------------------------------------------ tensors
const GT = { 0: "F32", 1: "F16", 8: "Q8_0", 30: "BF16" };
const wantType = { float32: "F32", float16: "F16", bfloat16: "BF16" }[cfg.torch_dtype];
const fileType = typedMetadata["general.file_type"]?.value;
const quant = fileType === 7; // MOSTLY_Q8_0
eq(tensorInfos.length, expected.length, "tensor count");
eq(tensorInfos.map((t) => t.name).join(","), expected.map((e) => e.name).join(","), "tensor names in converter order");
const rowBytes = { F32: (n) => 4 * n, F16: (n) => 2 * n, BF16: (n) => 2 * n, Q8_0: (n) => (n / 32) * 34 };
let nextOff = 0n;
for (let k = 0; k < Math.min(tensorInfos.length, expected.length); k++) {
  const ti = tensorInfos[k], ex = expected[k];
  const ne = ti.shape.map(Number);
  eq(ne.join("x"), [...ex.shape].reverse().join("x"), `${ti.name} ggml shape`);
  const gt = GT[ti.dtype];
  let want = quant ? "Q8_0" : wantType;
  if (ex.shape.length <= 1 || ti.name.endsWith("_norm.weight") || /\.ffn_gate_inp(_shexp)?\.weight$/.test(ti.name) || !ti.name.endsWith(".weight"))
    want = "F32";
  else if (want === "Q8_0" && ne[0] % 32 !== 0) want = "F16";
  eq(gt, want, `${ti.name} type`);
  eq(ti.offset, nextOff, `${ti.name} offset (aligned, back to back)`);
  const n = ne.reduce((a, b) => a * b, 1);
  const nbytes = BigInt(rowBytes[gt](ne[0]) * (n / ne[0]));
  nextOff = (ti.offset + nbytes + 31n) / 32n * 32n;
  // values
  const base = Number(tensorDataOffset + ti.offset);
  let bad = 0;
  if (gt === "Q8_0") {
    const nb = n / 32;
    // ggml's quantize_row_q8_0_ref in f32 arithmetic: d = amax/127, q = roundf(x * (1/d)), d stored as f16
    const fr = Math.fround, xs = new Float32Array(32);
    for (let b = 0; b < nb; b++) {
      const o = base + b * 34;
      let amax = 0;
      for (let j = 0; j < 32; j++) { xs[j] = ex.get(b * 32 + j); amax = Math.max(amax, Math.abs(xs[j])); }
      const d = fr(amax / 127), id = d ? fr(1 / d) : 0, d16 = f16tab[fileBuf.readUInt16LE(o)];
      if (!(Math.abs(d16 - d) <= d * 2 ** -11)) bad++;
      for (let j = 0; j < 32; j++) {
        const y = fr(xs[j] * id), q = Math.sign(y) * Math.round(Math.abs(y));
        if (fileBuf.readInt8(o + 2 + j) !== q) bad++;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const g = gt === "F32" ? fileBuf.readFloatLE(base + 4 * i) : gt === "F16" ? f16tab[fileBuf.readUInt16LE(base + 2 * i)] : bf16(fileBuf.readUInt16LE(base + 2 * i));
      let x = ex.get(i);
      if (gt === "F16" && quant) { // f16 fallback of f32 values: compare after rounding
        if (!(Math.abs(g - x) <= Math.abs(x) * 2 ** -11 + 2 ** -25)) bad++;
        continue;
      }
      if (!(g === x)) bad++;
    }
  }
  eq(bad, 0, `${ti.name} values differing from the HF tensor`);
}
eq(BigInt(fileBuf.length), tensorDataOffset + nextOff, "file size = data start + padded tensor data");
check(Number(tensorDataOffset) % 32 === 0, "data section aligned to 32");

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
