// tiktoken_ref.mjs — the JavaScript reference for eaas's tiktoken loader
// (Kimi K2's tiktoken.model + tokenizer_config.json).
//
//   node tiktoken_ref.mjs write DIR
//   node tiktoken_ref.mjs check DIR CORPUS.jsonl C_SPLIT.txt C_SPECIAL.txt
//   node tiktoken_ref.mjs kimi-model DIR
//   node tiktoken_ref.mjs kimi-tokenizer DIR
//
// `kimi-model` turns a tiny deepseek_v3 HF directory written by `eaas
// make-model` into a tiny Kimi K2 one, as Kimi K2 ships its files:
// model_type kimi_k2, tiktoken.model (o200k_base's first 128,000 ranks, so
// that the 256 special ids fit the model's 129,280 rows; the first ranks of a
// BPE vocabulary are a BPE vocabulary), tokenizer_config.json with Kimi's
// class, special tokens and a chat template in Kimi's format (kimi_template
// below, written for these tests), and generation_config's ids moved to
// Kimi's [BOS] and <|im_end|>. `kimi-tokenizer` writes only the tokenizer
// files (for the chat-template comparison).
//
// No Kimi vocabulary can be fetched here, so the model directory is a real
// tiktoken vocabulary of the same lineage: o200k_base, as js-tiktoken ships
// it, written as a tiktoken.model file ("<base64> <rank>" per line) with a
// tokenizer_config.json naming Kimi's tokenizer class and its special tokens
// (Kimi-K2-Instruct's names at the same offsets after the file's tokens).
// `check` encodes each corpus line with js-tiktoken, a port of tiktoken,
// given the same ranks, the 256 special tokens and Kimi's split pattern
// (tokenization_kimi.py's pat_str, with its class intersections written as
// lookaheads and (?i:...) spelled out, since JavaScript has neither), and
// compares with the ids eaas printed: with HF's special tokens as text
// (`--split-special`; the other added tokens, such as the tool-call markers,
// are recognised even then, as in HF's tokenizers) and with all recognised
// anywhere (the default; nothing is added before or after). Prints "N passed,
// N failed".
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const src = process.env.EA_SRC || path.resolve(here, "../..");
const require = createRequire(path.join(src, "tools/node/"));
const { Tiktoken } = require("js-tiktoken/lite");
const o200k = require("js-tiktoken/ranks/o200k_base");

// rank -> base64 token, from js-tiktoken's packed form ("! OFFSET tok tok ...")
function ranksOf(packed) {
  const byRank = [];
  for (const line of packed.split("\n").filter(Boolean)) {
    const [, off, ...toks] = line.split(" ");
    toks.forEach((t, i) => { byRank[Number(off) + i] = t; });
  }
  return byRank;
}
const [mode, dir] = process.argv.slice(2);
const byRank = ranksOf(o200k.bpe_ranks).slice(0, mode.startsWith("kimi-") ? 128000 : undefined);
const n = byRank.length;
for (let r = 0; r < n; r++) if (byRank[r] === undefined) throw new Error(`o200k_base has no rank ${r}`);

// Kimi-K2-Instruct's special tokens, by offset after the file's tokens
// (tokenizer_config.json's added_tokens_decoder), and K2-Thinking's <think>.
const named = { 0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
  6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
  11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
  14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>", 22: "<think>",
  23: "</think>", 254: "[UNK]", 255: "[PAD]" };
const special = {};
for (let i = 0; i < 256; i++) special[named[i] ?? `<|reserved_token_${n + i}|>`] = n + i;

// HF's special tokens of Kimi's class (bos, eos, unk, pad and its default
// additional_special_tokens): recognised only when special tokens are; the
// other added tokens (tool-call markers, <think>, reserved) are always.
const hfSpecial = new Set(["[BOS]", "[EOS]", "[UNK]", "[PAD]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>",
  "<|start_header_id|>", "<|end_header_id|>", "[EOT]", "<|im_system|>", "<|im_middle|>"]);
const alwaysText = Object.keys(special).filter((k) => !hfSpecial.has(k));

// A chat template in Kimi K2's format: turns <|im_ROLE|>ROLE<|im_middle|>...<|im_end|>,
// tools declared as JSON in a tool_declare turn, calls in sections with the
// call's id (functions.NAME:IDX), results as "## Return of ID".
const kimiTemplate = [
  "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}",
  "{%- for m in messages -%}",
  "{%- if loop.first and m.role != 'system' -%}<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|>{%- endif -%}",
  "{%- if m.role == 'tool' -%}<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}\n{{ m.content }}",
  "{%- else -%}",
  "{%- set role = 'im_system' if m.role == 'system' else ('im_user' if m.role == 'user' else 'im_assistant') -%}",
  "<|{{ role }}|>{{ m.role }}<|im_middle|>",
  "{%- if m.content is string -%}{{ m.content }}",
  "{%- elif m.content is not none -%}{%- for part in m.content -%}{{ part.text }}{%- endfor -%}{%- endif -%}",
  "{%- if m.tool_calls -%}<|tool_calls_section_begin|>",
  "{%- for tc in m.tool_calls -%}<|tool_call_begin|>{{ tc.id }}<|tool_call_argument_begin|>",
  "{%- if tc.function.arguments is string -%}{{ tc.function.arguments }}{%- else -%}{{ tc.function.arguments | tojson }}{%- endif -%}",
  "<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}",
  "{%- endif -%}<|im_end|>",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}",
].join("");

function writeTokenizer(dir, extra) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tiktoken.model"), byRank.map((t, r) => `${t} ${r}\n`).join(""));
  const dec = {};
  for (const [i, c] of Object.entries(named))
    dec[String(n + Number(i))] = { content: c, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify({
    added_tokens_decoder: dec,
    auto_map: { AutoTokenizer: ["tokenization_kimi.TikTokenTokenizer", null] },
    bos_token: "[BOS]", eos_token: "[EOS]", pad_token: "[PAD]", unk_token: "[UNK]",
    tokenizer_class: "TikTokenTokenizer", model_max_length: 131072, ...extra,
  }, null, 1));
}

if (mode === "write") {
  writeTokenizer(dir, {});
  console.error(`wrote ${dir}: ${n} tokens + 256 special`);
  process.exit(0);
}
if (mode === "kimi-tokenizer") {
  writeTokenizer(dir, { chat_template: kimiTemplate });
  process.exit(0);
}
if (mode === "kimi-model") {
  const cfgPath = path.join(dir, "config.json");
  const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
  if (cfg.model_type !== "deepseek_v3" || cfg.vocab_size < n + 256) throw new Error(`${dir}: not a deepseek_v3 with ${n + 256} rows`);
  cfg.model_type = "kimi_k2";
  cfg.bos_token_id = n;
  cfg.eos_token_id = n + 1;
  fs.writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
  const gen = JSON.parse(fs.readFileSync(path.join(dir, "generation_config.json"), "utf8"));
  gen.bos_token_id = n;
  gen.eos_token_id = n + 2; /* <|im_end|> ends a turn */
  fs.writeFileSync(path.join(dir, "generation_config.json"), JSON.stringify(gen, null, 2));
  fs.rmSync(path.join(dir, "tokenizer.json"));
  writeTokenizer(dir, { chat_template: kimiTemplate });
  console.error(`wrote ${dir}: a kimi_k2 model, ${n} tokens + 256 special`);
  process.exit(0);
}

const notHan = (cls) => `(?:(?!\\p{Script=Han})[${cls}])`;
const contraction = "(?:'s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?";
const upper = notHan("\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}"), lower = notHan("\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}");
const patStr = [
  "[\\p{Script=Han}]+",
  `[^\\r\\n\\p{L}\\p{N}]?${upper}*${lower}+${contraction}`,
  `[^\\r\\n\\p{L}\\p{N}]?${upper}+${lower}*${contraction}`,
  "\\p{N}{1,3}", " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*", "\\s*[\\r\\n]+", "\\s+(?!\\S)", "\\s+",
].join("|");
const enc = new Tiktoken({ pat_str: patStr, special_tokens: special, bpe_ranks: o200k.bpe_ranks });

const [, , corpusPath, cPlainPath, cSpecialPath] = process.argv.slice(2);
const lines = (p) => fs.readFileSync(p, "utf8").split("\n").filter((l, i, a) => !(i === a.length - 1 && l === ""));
const corpus = lines(corpusPath).map((l) => JSON.parse(l));
const cPlain = lines(cPlainPath).map((l) => JSON.parse(l));
const cSpecial = lines(cSpecialPath).map((l) => JSON.parse(l));
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let passed = 0, failed = 0, tokens = 0, specials = 0;
if (cPlain.length !== corpus.length || cSpecial.length !== corpus.length) {
  console.error(`line counts differ: corpus ${corpus.length}, C ${cPlain.length}/${cSpecial.length}`);
  failed++;
}
for (let i = 0; i < corpus.length; i++) {
  const s = corpus[i];
  const jsPlain = enc.encode(s, alwaysText, []);
  const jsSpecial = enc.encode(s, "all");
  tokens += jsPlain.length;
  specials += jsSpecial.filter((id) => id >= n).length;
  let ok = true;
  for (const [what, js, c] of [["split special", jsPlain, cPlain[i]], ["special", jsSpecial, cSpecial[i]]])
    if (!c || !same(c, js)) {
      ok = false;
      console.error(`line ${i + 1} (${what}) ${JSON.stringify(s).slice(0, 120)}\n  js: ${JSON.stringify(js)}\n  c:  ${JSON.stringify(c)}`);
    }
  if (ok) passed++; else failed++;
}
console.error(`kimi tiktoken (o200k_base ranks): ${corpus.length} strings, ${tokens} tokens, ${specials} special tokens compared`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
