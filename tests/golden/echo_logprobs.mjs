// echo_logprobs.mjs — `echo` with `logprobs` in /v1/completions through the
// official `openai` npm client against a running `eaas serve` (started by
// test_serve_echo_logprobs.sh on a tiny qwen3_moe with a small
// --max-batch-tokens, so a prompt's logits rows span several prefill steps).
// Each echoed prompt token's logprob (and top_logprobs) is checked against an
// independent path: the prompt's prefix alone, one token generated, that
// token forced with logit_bias +100 (the reported logprob is the model's, before
// the bias) — the last-row path of a different request, bit for bit.
// Usage: node echo_logprobs.mjs BASE_URL MODEL
// Prints one line per check and "N passed, N failed"; exits non-zero on any failure.
import { createRequire } from 'module';
import { check, assert, eq, summary } from './check_lib.mjs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const root = baseURL.replace(/\/v1$/, '');

async function tokenize(prompt) {
  const r = await fetch(root + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt }) });
  return (await r.json()).tokens;
}

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away, ' +
  'there lived a small model with random weights that could not say anything useful at all.';
const K = 3;
const greedy = { model, temperature: 0, max_tokens: 4, ignore_eos: true };
const ids = await tokenize(PROMPT);

// The independent path: logprob of ids[i] after ids[0..i), and its top K.
async function oneByOne(i) {
  const r = await client.completions.create({ ...greedy, prompt: ids.slice(0, i), max_tokens: 1, logprobs: K,
    logit_bias: { [ids[i]]: 100 } });
  const lp = r.choices[0].logprobs;
  eq(lp.tokens.length, 1, `prefix ${i}: one token`);
  return { lp: lp.token_logprobs[0], top: lp.top_logprobs[0] };
}

function sameTop(a, b, what) {
  eq(JSON.stringify(Object.entries(a).sort()), JSON.stringify(Object.entries(b).sort()), what);
}

let first; // the non-streaming answer, compared with the others
await check(`echo + logprobs: the ${ids.length} prompt tokens first (the first null), then the generated ones`, async () => {
  assert(ids.length > 32, `prompt long enough for several prefill steps (${ids.length} tokens)`);
  const plain = await client.completions.create({ ...greedy, prompt: PROMPT, logprobs: K });
  const r = await client.completions.create({ ...greedy, prompt: PROMPT, logprobs: K, echo: true });
  first = r;
  const lp = r.choices[0].logprobs, n = ids.length, g = plain.choices[0].logprobs;
  eq(r.choices[0].text, PROMPT + plain.choices[0].text, 'text: the prompt, then the completion');
  eq(lp.tokens.length, n + g.tokens.length, 'tokens: prompt + generated');
  eq(lp.token_logprobs.length, lp.tokens.length, 'token_logprobs length');
  eq(lp.top_logprobs.length, lp.tokens.length, 'top_logprobs length');
  eq(lp.text_offset.length, lp.tokens.length, 'text_offset length');
  eq(lp.token_logprobs[0], null, 'the first prompt token has no logprob');
  eq(lp.top_logprobs[0], null, 'nor top_logprobs');
  eq(lp.tokens.slice(0, n).join(''), PROMPT, 'the prompt tokens spell the prompt');
  for (let i = 1; i < n; i++) {
    assert(typeof lp.token_logprobs[i] === 'number' && lp.token_logprobs[i] <= 0, `prompt token ${i}: a logprob`);
    eq(Object.keys(lp.top_logprobs[i]).length <= K, true, `prompt token ${i}: at most ${K} top`);
  }
  for (let i = 0; i < n; i++) eq(lp.text_offset[i], lp.tokens.slice(0, i).join('').length, `text_offset ${i}`);
  for (let j = 0; j < g.tokens.length; j++) {
    eq(lp.tokens[n + j], g.tokens[j], `generated token ${j}`);
    eq(lp.token_logprobs[n + j], g.token_logprobs[j], `generated logprob ${j}`);
    sameTop(lp.top_logprobs[n + j], g.top_logprobs[j], `generated top ${j}`);
    eq(lp.text_offset[n + j], PROMPT.length + g.text_offset[j], `generated text_offset ${j} counts the echo`);
  }
  eq(r.usage.prompt_tokens, n, 'usage.prompt_tokens');
  eq(r.usage.completion_tokens, g.tokens.length, 'usage.completion_tokens');
});

await check('each echoed prompt logprob equals the prefix fed alone (logit_bias-forced token, bit for bit)', async () => {
  const lp = first.choices[0].logprobs;
  const n = ids.length;
  // every position of the first and last prefill chunk, and a spread in between
  const at = [...new Set([1, 2, 3, 7, 8, 9, 15, 16, 17, Math.floor(n / 2), n - 3, n - 2, n - 1])].filter((i) => i < n);
  for (const i of at) {
    const ref = await oneByOne(i);
    eq(lp.token_logprobs[i], ref.lp, `prompt token ${i} logprob`);
    sameTop(lp.top_logprobs[i], ref.top, `prompt token ${i} top_logprobs`);
  }
});

await check('a prefix-cache hit does not lose the prompt logprobs (same request again; a longer one sharing the prefix)', async () => {
  const again = await client.completions.create({ ...greedy, prompt: PROMPT, logprobs: K, echo: true });
  eq(JSON.stringify(again.choices[0].logprobs), JSON.stringify(first.choices[0].logprobs), 'repeat: same logprobs');
  const longer = PROMPT + ' The end.';
  const r = await client.completions.create({ ...greedy, prompt: longer, logprobs: K, echo: true });
  const a = r.choices[0].logprobs, b = first.choices[0].logprobs;
  for (let i = 0; i < ids.length; i++) {
    eq(a.tokens[i], b.tokens[i], `shared prefix token ${i}`);
    eq(a.token_logprobs[i], b.token_logprobs[i], `shared prefix logprob ${i}`);
  }
  const m = (await tokenize(longer)).length;
  eq(a.token_logprobs.filter((x) => x !== null).length, m - 1 + 4, 'every prompt token but the first has a logprob');
});

await check('streaming: the echo chunk carries the prompt logprobs; the whole equals the non-streaming answer', async () => {
  const s = await client.completions.create({ ...greedy, prompt: PROMPT, logprobs: K, echo: true, stream: true });
  let text = '';
  const acc = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let chunks = 0;
  for await (const c of s) {
    for (const ch of c.choices) {
      chunks++;
      if (chunks === 1) eq(ch.text, PROMPT, 'the first chunk is the echo');
      text += ch.text;
      if (ch.logprobs) for (const k of Object.keys(acc)) acc[k].push(...ch.logprobs[k]);
    }
  }
  eq(text, first.choices[0].text, 'streamed text');
  eq(JSON.stringify(acc), JSON.stringify(first.choices[0].logprobs), 'streamed logprobs');
});

await check('n = 2 and a batch of two prompts: every choice echoes its own prompt with its logprobs', async () => {
  const other = 'Another prompt, shorter.';
  const r = await client.completions.create({ ...greedy, prompt: [PROMPT, other], n: 2, logprobs: 0, echo: true });
  eq(r.choices.length, 4, 'choices');
  const solo = await client.completions.create({ ...greedy, prompt: other, logprobs: 0, echo: true });
  for (const c of r.choices) {
    const ref = c.index < 2 ? first.choices[0].logprobs : solo.choices[0].logprobs;
    eq(JSON.stringify(c.logprobs.token_logprobs), JSON.stringify(ref.token_logprobs), `choice ${c.index} token_logprobs`);
    eq(JSON.stringify(c.logprobs.tokens), JSON.stringify(ref.tokens), `choice ${c.index} tokens`);
    for (const t of c.logprobs.top_logprobs.slice(1)) eq(Object.keys(t).length, 0, 'logprobs 0: no top entries');
  }
});

await check('a one-token prompt: its logprob is null, then the generated ones', async () => {
  const r = await client.completions.create({ ...greedy, prompt: [ids[0]], logprobs: 1, echo: true, max_tokens: 2 });
  const lp = r.choices[0].logprobs;
  eq(lp.tokens.length, 3, 'tokens');
  eq(lp.token_logprobs[0], null, 'first null');
  assert(typeof lp.token_logprobs[1] === 'number', 'generated logprob');
});

summary();
