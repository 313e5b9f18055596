// serve_openai.mjs — drives a running `eaas serve` with the official `openai`
// npm client, as any application would. Usage: node serve_openai.mjs BASE_URL MODEL
// (BASE_URL like http://127.0.0.1:PORT/v1). Prints one line per check and
// "N passed, N failed"; exits non-zero on any failure.
//
// What it asserts: models list and retrieve; non-streaming == streaming text (greedy) for
// completions and chat; usage arithmetic; stop strings (cut before the stop,
// never emitted, also when the stop spans a token boundary, streaming too);
// seeds (same seed -> same text, other seed -> other text); logprobs shapes
// and greedy = argmax; 404 for an unknown model; 400 naming an unknown field
// (never silently ignored); stop_token_ids and min_tokens; skip_special_tokens and
// include_stop_str_in_output; truncate_prompt_tokens; continuous_usage_stats; stop_reason; prompt_logprobs;
// and end-to-end determinism:
// 64 concurrent seeded requests with different prompts each return exactly
// the text they return alone.
import { createRequire } from 'module';
import { check, assert, eq, summary } from './check_lib.mjs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: process.env.EAAS_API_KEY || 'none', maxRetries: 0, timeout: 120000 });


const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const greedy = { model, temperature: 0, max_tokens: 24, ignore_eos: true };

async function completeText(extra) {
  const r = await client.completions.create({ ...greedy, prompt: PROMPT, ...extra });
  return r;
}
async function streamCompletion(extra) {
  const s = await client.completions.create({ ...greedy, prompt: PROMPT, stream: true, ...extra });
  const chunks = [];
  let usage = null, finish = null, stopReason;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      chunks.push(c.choices[0].text);
      if (c.choices[0].finish_reason) [finish, stopReason] = [c.choices[0].finish_reason, c.choices[0].stop_reason];
    }
  }
  return { text: chunks.join(''), chunks, usage, finish, stopReason };
}

await check('models list names the served model', async () => {
  const list = await client.models.list();
  eq(list.data.length, 1, 'one model');
  eq(list.data[0].id, model, 'model id');
});

let base;
await check('completions: non-streaming, usage, finish length', async () => {
  base = await completeText({});
  const c = base.choices[0];
  eq(base.object, 'text_completion', 'object');
  eq(c.finish_reason, 'length', 'finish_reason');
  eq(c.stop_reason, null, 'stop_reason (vLLM\'s) null: no stop string or id ended it');
  eq(base.usage.completion_tokens, 24, 'completion_tokens');
  assert(base.usage.prompt_tokens > 5, 'prompt_tokens > 5');
  eq(base.usage.total_tokens, base.usage.prompt_tokens + 24, 'total_tokens');
  assert(c.text.length > 0, 'some text');
});

await check('completions: streaming text == non-streaming text, usage chunk', async () => {
  const s = await streamCompletion({ stream_options: { include_usage: true } });
  eq(s.text, base.choices[0].text, 'streamed text');
  eq(s.finish, 'length', 'finish');
  assert(s.usage && s.usage.completion_tokens === 24, 'usage in the last chunk');
  eq(s.usage.prompt_tokens, base.usage.prompt_tokens, 'prompt_tokens');
});

await check('stream_options.continuous_usage_stats: every chunk has its choice\'s usage so far', async () => {
  const s = await client.completions.create({ ...greedy, prompt: PROMPT, n: 2, seed: 5, temperature: 0.7, stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true } });
  const last = [-1, -1];
  let chunks = 0, final = null;
  for await (const c of s) {
    if (!c.choices.length) { final = c.usage; continue; }
    const i = c.choices[0].index;
    chunks++;
    assert(c.usage, `chunk ${chunks} has usage`);
    eq(c.usage.prompt_tokens, base.usage.prompt_tokens, 'prompt_tokens in every chunk');
    assert(c.usage.completion_tokens >= last[i] && c.usage.completion_tokens >= 1 && c.usage.completion_tokens <= 24,
      `completion_tokens grows: ${last[i]} then ${c.usage.completion_tokens}`);
    eq(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens, 'total_tokens');
    last[i] = c.usage.completion_tokens;
  }
  eq(JSON.stringify(last), '[24,24]', 'each choice ends at its 24 tokens');
  eq(final.completion_tokens, 48, 'the last chunk: the request\'s usage');
  assert(chunks > 2, `chunks: ${chunks}`);
  // text held back (it may start a stop string) goes out after the last token: it is no token of its own
  const tail = Array.from(base.choices[0].text).pop();
  const h = await client.completions.create({ ...greedy, prompt: PROMPT, stream: true, stop: [tail + '\u0007'],
    stream_options: { include_usage: true, continuous_usage_stats: true } });
  let held = '', most = 0;
  for await (const c of h) if (c.choices.length) { held += c.choices[0].text; most = Math.max(most, c.usage.completion_tokens); }
  eq(held, base.choices[0].text, 'the held-back end of the text comes out');
  eq(most, 24, 'and counts no extra token');
  const cs = await client.chat.completions.create({ ...greedy, messages: [{ role: 'user', content: 'Hi' }], stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true } });
  const seen = [];
  for await (const c of cs) if (c.choices.length) seen.push(c.usage.completion_tokens);
  eq(seen[0], 0, 'chat: the role chunk has no tokens yet');
  eq(seen[seen.length - 1], 24, 'chat: the finish chunk has them all');
  try {
    await client.completions.create({ ...greedy, prompt: 'x', stream: true, stream_options: { continuous_usage_stats: true } });
    throw new Error('no error without include_usage');
  } catch (e) {
    eq(e.status, 400, 'without include_usage: status');
    eq(e.error && e.error.param, 'stream_options.continuous_usage_stats', 'param');
  }
});

const MESSAGES = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name three colours.' }];
await check('chat: non-streaming == streaming, role chunk, usage', async () => {
  const r = await client.chat.completions.create({ ...greedy, messages: MESSAGES });
  eq(r.object, 'chat.completion', 'object');
  eq(r.choices[0].message.role, 'assistant', 'role');
  eq(r.usage.completion_tokens, 24, 'completion_tokens');
  eq(r.choices[0].stop_reason, null, 'chat: stop_reason');
  const s = await client.chat.completions.create({ ...greedy, messages: MESSAGES, stream: true, stream_options: { include_usage: true } });
  let text = '', role = null, usage = null, finish = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    const d = c.choices[0].delta;
    if (d.role) role = d.role;
    if (d.content) text += d.content;
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  eq(role, 'assistant', 'streamed role');
  eq(text, r.choices[0].message.content, 'streamed content');
  eq(finish, 'length', 'finish');
  eq(usage.prompt_tokens, r.usage.prompt_tokens, 'usage prompt_tokens');
});

await check('stop strings: cut before the stop, never emitted, across token boundaries', async () => {
  const r = await completeText({ logprobs: 0, max_tokens: 32 });
  const toks = r.choices[0].logprobs.tokens;
  const full = r.choices[0].text;
  eq(toks.length, 32, 'one logprobs entry per token');
  // a stop made of the end of token k and the start of token k+1
  let stop = null;
  for (let k = 6; k + 1 < toks.length && !stop; k++) {
    const a = toks[k], b = toks[k + 1];
    if (a.length >= 1 && b.length >= 1 && !a.includes('\uFFFD') && !b.includes('\uFFFD')) stop = a.slice(-1) + b.slice(0, 1);
  }
  assert(stop, 'found two adjacent tokens to make a stop string from');
  const want = full.slice(0, full.indexOf(stop));
  const s1 = await completeText({ max_tokens: 32, stop: [stop, 'never-appears-ZZZ'] });
  eq(s1.choices[0].text, want, `non-streaming text with stop ${JSON.stringify(stop)}`);
  eq(s1.choices[0].finish_reason, 'stop', 'finish_reason');
  const s2 = await streamCompletion({ max_tokens: 32, stop });
  eq(s2.text, want, 'streamed text with stop');
  eq(s2.finish, 'stop', 'streamed finish');
  assert(!s2.text.includes(stop), 'stop never emitted');
  // chat too
  const c = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 32 });
  const ct = c.choices[0].message.content;
  const cstop = ct.slice(10, 12);
  const c2 = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 32, stop: cstop });
  eq(c2.choices[0].message.content, ct.slice(0, ct.indexOf(cstop)), 'chat stop');
  eq(c2.choices[0].finish_reason, 'stop', 'chat finish');
});

await check('seeds: same seed -> same text; another seed -> another text', async () => {
  const p = { model, prompt: PROMPT, max_tokens: 24, temperature: 1.0, top_p: 0.95, ignore_eos: true };
  const a = await client.completions.create({ ...p, seed: 1234 });
  const b = await client.completions.create({ ...p, seed: 1234 });
  const c = await client.completions.create({ ...p, seed: 4321 });
  eq(a.choices[0].text, b.choices[0].text, 'same seed');
  assert(a.choices[0].text !== c.choices[0].text, 'different seeds gave the same 24 tokens');
  const s = await streamCompletion({ temperature: 1.0, top_p: 0.95, seed: 1234 });
  eq(s.text, a.choices[0].text, 'streaming with the same seed');
});

await check('logprobs: completions (int) and chat (bool + top_logprobs)', async () => {
  const r = await completeText({ logprobs: 3, max_tokens: 8 });
  const lp = r.choices[0].logprobs;
  eq(lp.tokens.length, 8, 'tokens');
  eq(lp.token_logprobs.length, 8, 'token_logprobs');
  eq(lp.top_logprobs.length, 8, 'top_logprobs');
  eq(lp.text_offset[0], 0, 'first text_offset');
  for (let i = 0; i < 8; i++) {
    assert(lp.token_logprobs[i] <= 0, 'logprob <= 0');
    const tops = Object.values(lp.top_logprobs[i]);
    assert(tops.length >= 1 && tops.length <= 3, 'at most 3 top entries');
    // greedy: the chosen token is the most likely one
    assert(Math.abs(Math.max(...tops) - lp.token_logprobs[i]) < 1e-5, 'greedy picks the argmax');
  }
  const c = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 6, logprobs: true, top_logprobs: 2 });
  const content = c.choices[0].logprobs.content;
  eq(content.length, 6, 'chat logprobs entries');
  for (const e of content) {
    eq(e.top_logprobs.length, 2, 'top_logprobs');
    assert(Array.isArray(e.bytes), 'bytes');
    assert(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, 'sorted');
    assert(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-5, 'greedy is top-1');
  }
  const none = await completeText({ max_tokens: 2 });
  eq(none.choices[0].logprobs, null, 'no logprobs unless asked');
});

await check('models.retrieve: the served model; another id -> 404 model_not_found', async () => {
  const m = await client.models.retrieve(model);
  eq(m.id, model, 'id');
  eq(m.object, 'model', 'object');
  assert(m.max_model_len > 0, 'max_model_len');
  try {
    await client.models.retrieve('no-such-model');
    throw new Error('no error');
  } catch (e) {
    eq(e.status, 404, 'status');
    eq(e.error && e.error.code, 'model_not_found', 'code');
  }
});

await check('unknown model -> 404 NotFoundError with an OpenAI error body', async () => {
  try {
    await client.completions.create({ ...greedy, model: 'no-such-model', prompt: 'x' });
    throw new Error('no error');
  } catch (e) {
    eq(e.status, 404, 'status');
    eq(e.error && e.error.code, 'model_not_found', 'code');
  }
});

await check('unknown field -> 400 BadRequestError naming it; documented no-effect fields accepted', async () => {
  for (const [create, body, field] of [
    [client.completions, { ...greedy, prompt: 'x', prompt_embeds: 'AAAA' }, 'prompt_embeds'],
    [client.chat.completions, { ...greedy, messages: MESSAGES, chat_template: '{{ messages }}' }, 'chat_template'],
  ]) {
    try {
      await create.create(body);
      throw new Error(`no error for ${field}`);
    } catch (e) {
      eq(e.status, 400, `${field}: status`);
      eq(e.error && e.error.type, 'invalid_request_error', `${field}: type`);
      eq(e.error && e.error.param, field, `${field}: param`);
      assert(e.message.includes(field), `${field}: the message names it: ${e.message}`);
    }
  }
  const r = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 2, user: 'u1', metadata: { k: 'v' }, store: false });
  eq(r.choices.length, 1, 'user/metadata/store accepted');
});

await check('stop_token_ids stop at the id (its text not shown); min_tokens holds stops back', async () => {
  const full = await completeText({ logprobs: 0 });
  const toks = full.choices[0].logprobs.tokens;
  const base = baseURL.replace(/\/v1$/, '');
  // a position k >= 2 whose token is one id that re-tokenizes to itself and whose text is new there
  let k = -1, id = -1;
  for (let i = 2; i < toks.length - 4 && k < 0; i++) {
    const prefix = toks.slice(0, i).join('');
    if (!toks[i].trim() || toks[i].includes('\ufffd') || prefix.includes(toks[i])) continue;
    const t = await (await fetch(`${base}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${client.apiKey}` },
      body: JSON.stringify({ prompt: toks[i], add_special_tokens: false }) })).json();
    if (t.tokens && t.tokens.length === 1) { k = i; id = t.tokens[0]; }
  }
  assert(k >= 0, `no usable token in ${JSON.stringify(toks)}`);
  const prefix = toks.slice(0, k).join('');
  const r = await completeText({ stop_token_ids: [id] });
  eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
  eq(r.choices[0].text, prefix, 'text up to the stop id, without it');
  eq(r.usage.completion_tokens, k + 1, 'the stop id counts as a completion token');
  eq(r.choices[0].stop_reason, id, 'stop_reason: the stop id');
  const s = await streamCompletion({ stop_token_ids: [id] });
  eq(s.text, prefix, 'streaming');
  eq(s.finish, 'stop', 'streaming finish_reason');
  eq(s.stopReason, id, 'streaming stop_reason');
  // min_tokens: neither the id nor a stop string may end the text before k + 2 tokens
  const m = await completeText({ stop_token_ids: [id], min_tokens: k + 2 });
  assert(m.usage.completion_tokens >= k + 2, `min_tokens: ${m.usage.completion_tokens} tokens`);
  assert(m.choices[0].text.startsWith(prefix) && m.choices[0].text.length > prefix.length, 'goes on past the id');
  const st = await completeText({ stop: [toks[k]], min_tokens: k + 2 });
  const without = await completeText({ stop: [toks[k]] });
  eq(without.choices[0].text, prefix, 'the stop string alone cuts at k');
  eq(without.choices[0].stop_reason, toks[k], 'stop_reason: the stop string');
  const two = await completeText({ stop: ['\u0007never', toks[k]] });
  eq(two.choices[0].stop_reason, toks[k], 'stop_reason: the one of two that matched');
  eq((await streamCompletion({ stop: [toks[k]] })).stopReason, toks[k], 'streaming stop_reason: the stop string');
  eq(st.choices[0].text.slice(0, full.choices[0].text.length), full.choices[0].text.slice(0, st.choices[0].text.length),
    'min_tokens with a stop string: the greedy text');
  assert(st.choices[0].text.includes(toks[k]), `the stop string before min_tokens is text: ${JSON.stringify(st.choices[0].text)}`);
  // include_stop_str_in_output (vLLM's): the stop string, or the stop id's text, ends the text
  const inc = await completeText({ stop: [toks[k]], include_stop_str_in_output: true });
  eq(inc.choices[0].text, prefix + toks[k], 'include_stop_str_in_output: the text ends with the stop string');
  eq(inc.choices[0].finish_reason, 'stop', 'include_stop_str_in_output: finish_reason');
  eq((await streamCompletion({ stop: [toks[k]], include_stop_str_in_output: true })).text, prefix + toks[k],
    'include_stop_str_in_output: streaming');
  const incId = await completeText({ stop_token_ids: [id], include_stop_str_in_output: true });
  eq(incId.choices[0].text, prefix + toks[k], 'include_stop_str_in_output: the stop id\'s text');
  eq((await streamCompletion({ stop_token_ids: [id], include_stop_str_in_output: true })).text, prefix + toks[k],
    'include_stop_str_in_output with a stop id: streaming');
});

await check('skip_special_tokens false shows special tokens (stop strings match in them); EOS text with include_stop_str_in_output', async () => {
  const IM_START = 151644, IM_END = 151645; // special in the tiny model's tokenizer; <|im_end|> is an EOS id
  const said = (extra) => client.completions.create({ ...greedy, prompt: PROMPT, max_tokens: 3, ...extra });
  const only = { logit_bias: { [IM_START]: 100 } };
  const skipped = await said(only);
  eq(skipped.choices[0].text, '', 'default: special tokens give no text');
  eq(skipped.usage.completion_tokens, 3, 'three tokens were generated');
  const kept = await said({ ...only, skip_special_tokens: false });
  eq(kept.choices[0].text, '<|im_start|>'.repeat(3), 'skip_special_tokens false: their text');
  const keptStream = await streamCompletion({ ...only, max_tokens: 3, skip_special_tokens: false });
  eq(keptStream.text, '<|im_start|>'.repeat(3), 'skip_special_tokens false: streaming');
  const cut = await said({ ...only, skip_special_tokens: false, stop: ['|><|'] });
  eq(cut.choices[0].text, '<|im_start', 'a stop string inside special tokens\' text');
  eq(cut.choices[0].finish_reason, 'stop', 'finish_reason stop');
  const cutInc = await said({ ...only, skip_special_tokens: false, stop: ['|><|'], include_stop_str_in_output: true });
  eq(cutInc.choices[0].text, '<|im_start|><|', 'with include_stop_str_in_output');
  const eos = { logit_bias: { [IM_END]: 100 }, ignore_eos: false };
  const e0 = await said(eos);
  eq(JSON.stringify([e0.choices[0].text, e0.choices[0].finish_reason, e0.usage.completion_tokens]), '["","stop",1]', 'EOS ends the text');
  eq(e0.choices[0].stop_reason, null, 'EOS: stop_reason null');
  const e1 = await said({ ...eos, skip_special_tokens: false });
  eq(e1.choices[0].text, '', 'EOS text not shown without include_stop_str_in_output');
  const e2 = await said({ ...eos, skip_special_tokens: false, include_stop_str_in_output: true });
  eq(e2.choices[0].text, '<|im_end|>', 'EOS text with both');
  const e3 = await said({ ...eos, include_stop_str_in_output: true });
  eq(e3.choices[0].text, '', 'a special EOS has no text while specials are skipped');
  const chat = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 2, ...only, skip_special_tokens: false });
  eq(chat.choices[0].message.content, '<|im_start|>'.repeat(2), 'chat too');
});

await check('truncate_prompt_tokens keeps the prompt\'s last tokens (usage, text, echo, chat); 0 is refused; add_special_tokens', async () => {
  const root = baseURL.replace(/\/v1$/, '');
  const post = async (path, body) => (await fetch(`${root}${path}`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${client.apiKey}` }, body: JSON.stringify(body) })).json();
  const ids = (await post('/tokenize', { prompt: PROMPT })).tokens;
  const k = 5;
  assert(ids.length > k + 2, `the prompt has ${ids.length} tokens`);
  const r = await completeText({ truncate_prompt_tokens: k });
  eq(r.usage.prompt_tokens, k, 'usage counts the kept tokens');
  const byIds = await client.completions.create({ ...greedy, prompt: ids.slice(-k) });
  eq(r.choices[0].text, byIds.choices[0].text, 'the text of the last k ids given as the prompt');
  eq((await completeText({ truncate_prompt_tokens: ids.length + 10 })).choices[0].text, base.choices[0].text,
    'a longer limit changes nothing');
  const echo = await completeText({ truncate_prompt_tokens: k, echo: true, max_tokens: 2 });
  const kept = (await post('/detokenize', { tokens: ids.slice(-k) })).prompt;
  assert(echo.choices[0].text.startsWith(kept) && !echo.choices[0].text.startsWith(PROMPT),
    `the echo is the kept tokens: ${JSON.stringify(echo.choices[0].text)}`);
  // add_special_tokens (vLLM's) is taken; this tokenizer (Qwen's) adds no BOS either way
  eq((await completeText({ add_special_tokens: false, max_tokens: 1 })).usage.prompt_tokens, ids.length,
    'add_special_tokens false');
  const chat = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 2, truncate_prompt_tokens: 6 });
  eq(chat.usage.prompt_tokens, 6, 'chat: the rendered prompt\'s last tokens');
  try {
    await completeText({ truncate_prompt_tokens: 0 });
    throw new Error('no error for truncate_prompt_tokens 0');
  } catch (e) {
    eq(e.status, 400, 'status of 0');
    eq(e.error && e.error.param, 'truncate_prompt_tokens', 'param');
  }
});

await check('prompt_logprobs (vLLM\'s): each prompt token with its rank and top alternatives; the echo\'s logprobs agree', async () => {
  const root = baseURL.replace(/\/v1$/, '');
  const ids = (await (await fetch(`${root}/tokenize`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${client.apiKey}` },
    body: JSON.stringify({ prompt: PROMPT }) })).json()).tokens;
  const r = await completeText({ prompt_logprobs: 3, logprobs: 1, max_tokens: 4 });
  const plp = r.choices[0].prompt_logprobs;
  eq(plp.length, ids.length, 'one entry per prompt token');
  eq(plp[0], null, 'the first has no context');
  const echo = await completeText({ echo: true, logprobs: 0, max_tokens: 1 });
  const elp = echo.choices[0].logprobs.token_logprobs;
  for (let i = 1; i < ids.length; i++) {
    const e = plp[i], mine = e[String(ids[i])];
    assert(mine && mine.rank >= 1, `entry ${i} has the prompt token ${ids[i]} with a rank: ${JSON.stringify(e)}`);
    eq(mine.logprob, elp[i], `entry ${i}: the echo's logprob of that token`);
    const ranks = Object.values(e).map(x => x.rank).sort((a, b) => a - b);
    assert(ranks[0] === 1 && ranks.includes(2) && ranks.includes(3) && Object.keys(e).length <= 4, `entry ${i}: ranks ${ranks}`);
    const best = Object.values(e).find(x => x.rank === 1);
    assert(Object.values(e).every(x => x.logprob <= best.logprob), `entry ${i}: rank 1 is the most likely`);
    if (mine.rank <= 3) eq(Object.keys(e).length, 3, `entry ${i}: the prompt token is one of the three`);
    assert(typeof mine.decoded_token === 'string', 'decoded_token');
  }
  for (const t of r.choices[0].logprobs.top_logprobs)
    assert(Object.keys(t).length <= 1, 'the generated tokens keep their own top (1)');
  // the greedy continuation appended to the prompt: each of its tokens was the argmax there, so rank 1
  const gen = [];
  for (const t of (await completeText({ logprobs: 0, max_tokens: 8 })).choices[0].logprobs.tokens) {
    const one = (await (await fetch(`${root}/tokenize`, { method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${client.apiKey}` },
      body: JSON.stringify({ prompt: t, add_special_tokens: false }) })).json()).tokens;
    if (!one || one.length !== 1) break;
    gen.push(one[0]);
  }
  assert(gen.length >= 2, `greedy tokens that are one id each: ${gen.length}`);
  const g = await client.completions.create({ ...greedy, prompt: [...ids, ...gen], max_tokens: 1, prompt_logprobs: 1 });
  for (let j = 0; j < gen.length; j++) {
    const e = g.choices[0].prompt_logprobs[ids.length + j], mine = e[String(gen[j])];
    eq(mine.rank, 1, `greedy token ${j} has rank 1`);
    eq(Object.keys(e).length, 1, `greedy token ${j} is its own top 1`);
  }
  const chat = await client.chat.completions.create({ ...greedy, messages: MESSAGES, max_tokens: 1, prompt_logprobs: 0 });
  eq(chat.prompt_logprobs.length, chat.usage.prompt_tokens, 'chat: at the top level, one per prompt token');
  assert(chat.prompt_logprobs.slice(1).every(e => Object.keys(e).length === 1), 'prompt_logprobs 0: the token alone');
  try {
    await client.completions.create({ ...greedy, prompt: 'x', stream: true, prompt_logprobs: 1 });
    throw new Error('no error with stream');
  } catch (e) {
    eq(e.status, 400, 'with stream: status');
    eq(e.error && e.error.param, 'prompt_logprobs', 'param');
  }
});

await check('determinism: 64 concurrent seeded requests == each alone', async () => {
  const reqs = [];
  for (let i = 0; i < 64; i++)
    reqs.push({ model, prompt: `Request ${i}: tell me about number ${i * 7919 % 1000} and ${'x'.repeat(i % 13)}`,
      max_tokens: 16, temperature: 0.8, top_k: 50, seed: 1000 + i, ignore_eos: true });
  const alone = [];
  for (const r of reqs) alone.push((await client.completions.create(r)).choices[0].text);
  const together = await Promise.all(reqs.map((r, i) => i % 2
    ? client.completions.create(r).then(x => x.choices[0].text)
    : client.completions.create({ ...r, stream: true }).then(async s => { let t = ''; for await (const c of s) if (c.choices.length) t += c.choices[0].text; return t; })));
  let diff = 0;
  for (let i = 0; i < 64; i++) if (alone[i] !== together[i]) { diff++; if (diff < 4) console.error(`  #${i}: ${JSON.stringify(alone[i])} vs ${JSON.stringify(together[i])}`); }
  eq(diff, 0, 'requests whose batched text differs from their text alone');
  assert(new Set(alone).size > 32, 'different prompts give different texts');
});

summary();
