// bench_llamacpp.mjs — llama.cpp on the same GGUF files as bench_forward, for
// side-by-side figures (issue 3 quotes llama.cpp; this measures it here).
//
//   node bench/bench_llamacpp.mjs --model M.gguf [--threads 1,2] [--prefill 512] [--decode 32] [--reps 3]
//
// Uses llama.cpp through node-llama-cpp's prebuilt CPU binaries (ggml picks its
// CPU variant at run time; on this machine the sapphirerapids one). Prefill =
// one P-token prompt of fixed pseudo-random ids evaluated in one batch, best of
// R runs (a fresh sequence each run). Decode = N greedy tokens after a 16-token
// prompt at batch 1; tok/s over tokens 2..N. One JSON line per (threads, case).
// Install (not part of CI): bash bench/bench_llamacpp_prebuilt.sh installs the package
// into .cache/llamacpp and runs this script.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith("--") ? [...a, [v.slice(2), all[i + 1]]] : a), []));
if (!args.model) {
  console.error("usage: node bench_llamacpp.mjs --model M.gguf [--threads 1,2] [--prefill 512] [--decode 32] [--reps 3]");
  process.exit(2);
}
const threadsList = (args.threads ?? "1,2").split(",").map(Number);
const P = Number(args.prefill ?? 512), N = Number(args.decode ?? 32), R = Number(args.reps ?? 3);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model});
const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
let r = 12345n; // the same generator as bench_forward.c
const nextTok = () => {
  r = (r * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number((r >> 33n) % BigInt(vocab));
};
const arch = model.fileInfo.metadata.general.architecture;
const ftype = model.fileInfo.metadata.general.file_type;

for (const T of threadsList) {
  const ctx = await model.createContext({contextSize: P + N + 64, batchSize: P, threads: T, sequences: 1});
  const seq = ctx.getSequence();
  // prefill
  let best = Infinity, first = 0;
  for (let rep = 0; rep < R; rep++) {
    r = 12345n;
    const toks = Array.from({length: P}, nextTok);
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(toks);
    const dt = (performance.now() - t0) / 1000;
    if (rep === 0) first = dt;
    best = Math.min(best, dt);
  }
  console.log(JSON.stringify({bench: "llamacpp_prefill", arch, file_type: ftype, threads: T, prompt: P, reps: R,
                              seconds: +best.toFixed(4), tok_s: +(P / best).toFixed(2), first_tok_s: +(P / first).toFixed(2)}));
  // decode, batch 1
  await seq.clearHistory();
  const prompt = Array.from({length: 16}, nextTok);
  let n = 0, t1 = 0;
  for await (const _tok of seq.evaluate(prompt, {temperature: 0})) {
    n++;
    if (n === 1) t1 = performance.now();
    if (n >= N) break;
  }
  const dt = (performance.now() - t1) / 1000;
  console.log(JSON.stringify({bench: "llamacpp_decode", arch, file_type: ftype, threads: T, batch: 1, tokens: n - 1,
                              seconds: +dt.toFixed(4), tok_s: +((n - 1) / dt).toFixed(2)}));
  await ctx.dispose();
}
await model.dispose();
