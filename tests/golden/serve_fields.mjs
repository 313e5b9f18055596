// serve_fields.mjs — the request fields of issue 23 items 2-4, each shown to change
// what it should, through the official `openai` npm client against a running
// `eaas serve` (started by test_serve_fields.sh with EAAS_TEST_HOOKS=1 and
// --reasoning-parser qwen3 on a tiny qwen3_moe model).
// Usage: node serve_fields.mjs BASE_URL MODEL [deepseek|qwen3_5|kimi]
// (with "deepseek": only the DeepSeek-V3 tool-call checks, for a deepseek_v3 model;
// with "qwen3_5": only the checks of Qwen3.5's XML calls and opened think block).
// Prints one line per check and "N passed, N failed"; exits non-zero on any failure.
import { createRequire } from 'module';
import { check, assert, eq, summary } from './check_lib.mjs';
import fs from 'fs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

const [baseURL, model, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const root = baseURL.replace(/\/v1$/, '');

async function post(path, body) {
  const r = await fetch(root + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}
async function tokenize(body) { return (await post('/tokenize', body)).body; }
async function detok(tokens) { return (await post('/detokenize', { tokens })).body.prompt; }
async function refused(p, what) {
  try {
    await p;
  } catch (e) {
    eq(e.status, 400, `${what}: status`);
    return e;
  }
  throw new Error(`${what}: no error`);
}

const PROMPT = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const sampled = { model, temperature: 1.0, top_p: 1, max_tokens: 12, ignore_eos: true };
const greedy = { model, temperature: 0, max_tokens: 12, ignore_eos: true };
const USER = [{ role: 'user', content: 'What is the weather in Paris?' }];
const TOOLS = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}, {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } },
}];

const TOOLS3 = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object',
    properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['C', 'F'] } }, required: ['city', 'unit'] } },
}, {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string', pattern: '^[A-Z]{3}$' } }, required: ['tz'] } },
}, {
  type: 'function',
  function: { name: 'book_table', parameters: { type: 'object', properties: {
    people: { type: 'integer', minimum: 1, maximum: 12 }, date: { type: 'string', format: 'date' }, vip: { type: 'boolean' },
    tags: { type: 'array', items: { enum: ['window', 'quiet', 'bar'] }, maxItems: 3 } }, required: ['people', 'date'] } },
}];
/* Call ids: ours (call_ and 24 hex digits), or Kimi's own functions.NAME:IDX. */
const kimiIds = mode === 'kimi';
function validCalls(calls, tools, what) {
  assert(calls && calls.length >= 1, `${what}: no tool_calls`);
  for (const c of calls) {
    const t = tools.find((x) => x.function.name === c.function.name);
    assert(t, `${what}: unknown function ${c.function.name}`);
    const idOk = kimiIds ? c.id === `functions.${c.function.name}:${c.id.split(':').pop()}` && /:[0-9]{1,4}$/.test(c.id)
      : /^call_[0-9a-f]{24}$/.test(c.id);
    assert(idOk && c.type === 'function', `${what}: id/type ${JSON.stringify(c)}`);
    let args;
    try { args = JSON.parse(c.function.arguments); } catch (e) { throw new Error(`${what}: arguments do not parse: ${c.function.arguments}`); }
    assert(ajv.validate(t.function.parameters, args), `${what}: ${c.function.name} ${c.function.arguments}: ${ajv.errorsText()}`);
  }
  return calls.map((c) => [c.function.name, c.function.arguments]);
}
/* A forced answer ends "tool_calls", or "length" when max_tokens cut it (then after at least one whole call:
 * the random model may go on writing calls; the one cut short is no call). */
function callsFinish(r, what, maxTokens = 300) {
  const c = r.choices[0];
  if (c.finish_reason === 'length') eq(r.usage.completion_tokens, maxTokens, `${what}: "length" only at max_tokens`);
  assert(c.finish_reason === 'tool_calls' || (c.finish_reason === 'length' && c.message.tool_calls && c.message.tool_calls.length >= 1),
    `${what}: finish_reason ${c.finish_reason} (content ${JSON.stringify(c.message.content)})`);
}
const req3 = (extra) => ({ model, temperature: 1.0, max_tokens: 300, ignore_eos: false, messages: USER, tools: TOOLS3, tool_choice: 'required', ...extra });

/* tool_choice "required" in the family's format: 4 seeds whose calls validate, the stream helper assembling the
 * same calls, then a named function. */
async function requiredCalls() {
    for (let seed = 1; seed <= 4; seed++) {
      const r = await client.chat.completions.create(req3({ seed }));
      callsFinish(r, `seed ${seed}`);
      const got = validCalls(r.choices[0].message.tool_calls, TOOLS3, `seed ${seed}`);
      const f = await client.beta.chat.completions.stream(req3({ seed })).finalChatCompletion();
      eq(JSON.stringify(validCalls(f.choices[0].message.tool_calls, TOOLS3, `seed ${seed} streamed`)), JSON.stringify(got), `seed ${seed}: assembled`);
    }
    const r = await client.chat.completions.create(req3({ seed: 9, tool_choice: { type: 'function', function: { name: 'get_time' } } }));
    eq(r.choices[0].message.tool_calls.map((c) => c.function.name).join(), 'get_time', 'named');
}

async function one(prompt, extra) {
  return (await client.completions.create({ ...sampled, prompt, ...extra })).choices[0].text;
}

// ---------------------------------------------------------------- DeepSeek-V3
if (mode === 'deepseek') {
  const DS = 'I will look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n' +
    '{"city": "Paris"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n' +
    '{"tz": "CET"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>';
  await check('deepseek_v3: tool-call tokens parsed into tool_calls (non-streaming and the stream helper)', async () => {
    const r = await client.chat.completions.create({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: DS });
    const m = r.choices[0].message;
    eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    eq(m.content, 'I will look.', 'content before the calls');
    eq(m.tool_calls.length, 2, 'two calls');
    eq(m.tool_calls[0].function.name, 'get_weather', 'name 0');
    eq(JSON.parse(m.tool_calls[0].function.arguments).city, 'Paris', 'arguments 0');
    eq(m.tool_calls[1].function.name, 'get_time', 'name 1');
    const s = client.beta.chat.completions.stream({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: DS });
    const f = await s.finalChatCompletion();
    eq(f.choices[0].finish_reason, 'tool_calls', 'streamed finish');
    eq(JSON.stringify(f.choices[0].message.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments])),
      JSON.stringify(m.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments])), 'assembled calls');
  });
  await check('deepseek_v3: tool_choice required writes its marker-token format; calls validate, stream helper agrees', requiredCalls);
  await check('deepseek_v3: an assistant tool-call turn (content null) and a tool result are rendered', async () => {
    const hist = [...USER, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] }, { role: 'tool', tool_call_id: 'call_1', content: 'rain' }];
    const t = await tokenize({ messages: hist, tools: TOOLS });
    const text = await detok(t.tokens);
    assert(text.includes('<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather') && text.includes('<｜tool▁output▁begin｜>rain'),
      `rendered: ${JSON.stringify(text)}`);
    const r = await client.chat.completions.create({ ...greedy, messages: hist, tools: TOOLS });
    eq(r.usage.prompt_tokens, t.count, 'the chat prompt is the one rendered');
  });
  summary();
}

// ---------------------------------------------------------------- Kimi K2 (sections, the model's call ids)
if (mode === 'kimi') {
  const KIMI = 'I will look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>' +
    '{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>' +
    '{"tz": "CET"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>';
  await check('kimi_k2: section markers parsed into tool_calls with the model\'s ids (non-streaming and the stream helper)', async () => {
    const r = await client.chat.completions.create({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: KIMI });
    const m = r.choices[0].message;
    eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    eq(m.content, 'I will look.', 'content before the calls');
    eq(JSON.stringify(m.tool_calls.map((c) => [c.id, c.type, c.function.name, JSON.parse(c.function.arguments)])),
      JSON.stringify([['functions.get_weather:0', 'function', 'get_weather', { city: 'Paris' }],
        ['functions.get_time:1', 'function', 'get_time', { tz: 'CET' }]]), 'calls');
    const f = await client.beta.chat.completions.stream({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: KIMI }).finalChatCompletion();
    eq(f.choices[0].finish_reason, 'tool_calls', 'streamed finish');
    eq(JSON.stringify(f.choices[0].message.tool_calls.map((c) => [c.id, c.function.name, c.function.arguments])),
      JSON.stringify(m.tool_calls.map((c) => [c.id, c.function.name, c.function.arguments])), 'assembled calls');
  });
  await check('kimi_k2: tool_choice required writes sections with functions.NAME:IDX ids; calls validate, stream helper agrees', requiredCalls);
  await check('kimi_k2: the returned id goes back into the conversation; the tokenizer is tiktoken\'s', async () => {
    const r = await client.chat.completions.create({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: KIMI });
    const call = r.choices[0].message.tool_calls[0];
    const hist = [...USER, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'rain' }];
    const t = await tokenize({ messages: hist, tools: TOOLS });
    const text = await detok(t.tokens);
    assert(text.includes('<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":"Paris"}<|tool_call_end|>') &&
      text.includes('## Return of functions.get_weather:0\nrain<|im_end|>') && text.endsWith('<|im_assistant|>assistant<|im_middle|>'),
      `rendered: ${JSON.stringify(text)}`);
    const r2 = await client.chat.completions.create({ ...greedy, messages: hist, tools: TOOLS });
    eq(r2.usage.prompt_tokens, t.count, 'the chat prompt is the one rendered');
    /* o200k_base's ids for a plain text (js-tiktoken gives the same; test_tokenizer_tiktoken compares 426 strings) */
    eq(JSON.stringify((await tokenize({ prompt: 'Hello world' })).tokens), JSON.stringify([13225, 2375]), 'Hello world');
  });
  summary();
}

// ---------------------------------------------------------------- Qwen3.5 (XML calls)
if (mode === 'qwen3_5') {
  const X = (name, params) => `<tool_call>\n<function=${name}>\n` +
    Object.entries(params).map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`).join('') + '</function>\n</tool_call>';
  const SAID = 'the user wants the weather\n</think>\n\nI will look.\n\n' + X('get_weather', { city: 'Paris', unit: 'C' }) + '\n' +
    X('book_table', { people: 4, date: '2026-12-01', vip: 'True', tags: '["window", "bar"]' }) + '<|im_end|>';
  const said = { ...greedy, ignore_eos: false, max_tokens: 200, messages: USER, tools: TOOLS3, eaas_test_forced_text: SAID };
  await check('qwen3_5: <function=...> calls parsed, values typed by the schema (ajv), thinking the prompt opened is reasoning', async () => {
    const r = await client.chat.completions.create(said);
    const m = r.choices[0].message;
    eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    eq(m.reasoning_content, 'the user wants the weather\n', 'reasoning_content');
    eq((m.content || '').trim(), 'I will look.', 'content before the calls');
    eq(JSON.stringify(validCalls(m.tool_calls, TOOLS3, 'auto')), JSON.stringify([['get_weather', '{"city":"Paris","unit":"C"}'],
      ['book_table', '{"people":4,"date":"2026-12-01","vip":true,"tags":["window","bar"]}']]), 'calls');
    const f = await client.beta.chat.completions.stream(said).finalChatCompletion();
    eq(f.choices[0].finish_reason, 'tool_calls', 'streamed finish');
    eq(JSON.stringify(validCalls(f.choices[0].message.tool_calls, TOOLS3, 'streamed')), JSON.stringify(validCalls(m.tool_calls, TOOLS3, 'auto')),
      'assembled calls');
  });
  /* thinking off: the template closes the think block, so the grammar holds from the first token */
  const nothink = { chat_template_kwargs: { enable_thinking: false } };
  await check('qwen3_5: tool_choice required writes <parameter=...> blocks; calls validate (ajv), stream helper agrees', async () => {
    for (let seed = 1; seed <= 4; seed++) {
      const r = await client.chat.completions.create(req3({ seed, ...nothink }));
      callsFinish(r, `seed ${seed}`);
      const got = validCalls(r.choices[0].message.tool_calls, TOOLS3, `seed ${seed}`);
      const f = await client.beta.chat.completions.stream(req3({ seed, ...nothink })).finalChatCompletion();
      eq(JSON.stringify(validCalls(f.choices[0].message.tool_calls, TOOLS3, `seed ${seed} streamed`)), JSON.stringify(got), `seed ${seed}: assembled`);
    }
    const r = await client.chat.completions.create(req3({ seed: 9, ...nothink, tool_choice: { type: 'function', function: { name: 'book_table' } } }));
    eq(r.choices[0].message.tool_calls.map((c) => c.function.name).join(), 'book_table', 'named');
    validCalls(r.choices[0].message.tool_calls, TOOLS3, 'named');
  });
  await check('qwen3_5: reasoning first: the think block the prompt opened is free, the grammar starts after </think>', async () => {
    const think = 'which tool fits? booking, then weather</think>'; /* said first (test hook), against no grammar */
    for (let seed = 1; seed <= 3; seed++) {
      const q = req3({ seed, eaas_test_forced_text: think });
      const r = await client.chat.completions.create(q);
      const m = r.choices[0].message;
      callsFinish(r, `seed ${seed}`);
      eq(m.reasoning_content, 'which tool fits? booking, then weather', `seed ${seed}: reasoning_content`);
      const got = validCalls(m.tool_calls, TOOLS3, `seed ${seed}`);
      const f = await client.beta.chat.completions.stream(q).finalChatCompletion();
      eq(JSON.stringify(validCalls(f.choices[0].message.tool_calls, TOOLS3, `seed ${seed} streamed`)), JSON.stringify(got), `seed ${seed}: assembled`);
    }
    const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['city', 'days'], additionalProperties: false };
    const r = await client.chat.completions.create({ model, seed: 3, temperature: 1.0, max_tokens: 200, messages: USER, eaas_test_forced_text: think,
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema } } });
    eq(r.choices[0].message.reasoning_content, 'which tool fits? booking, then weather', 'json_schema: reasoning_content');
    assert(ajv.validate(schema, JSON.parse(r.choices[0].message.content)), `json_schema: ${r.choices[0].message.content}: ${ajv.errorsText()}`);
  });
  await check('qwen3_5: an assistant call (arguments as JSON text) is rendered as parameter blocks, the result as a tool_response', async () => {
    const hist = [...USER, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'book_table', arguments: '{"people": 2, "date": "2026-12-24", "tags": ["quiet"]}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'booked' }];
    const t = await tokenize({ messages: hist, tools: TOOLS3 });
    const text = await detok(t.tokens);
    assert(text.includes('<tool_call>\n<function=book_table>\n<parameter=people>\n2\n</parameter>\n<parameter=date>\n2026-12-24\n' +
      '</parameter>\n<parameter=tags>\n["quiet"]\n</parameter>\n</function>\n</tool_call><|im_end|>') &&
      text.includes('<tool_response>\nbooked\n</tool_response>'), `rendered: ${JSON.stringify(text)}`);
    const r = await client.chat.completions.create({ ...greedy, messages: hist, tools: TOOLS3 });
    eq(r.usage.prompt_tokens, t.count, 'the chat prompt is the one rendered');
  });
  await check('qwen3_5: enable_thinking false closes the think block in the prompt: the output is all content', async () => {
    const r = await client.chat.completions.create({ ...greedy, ignore_eos: false, max_tokens: 40, messages: USER,
      chat_template_kwargs: { enable_thinking: false }, eaas_test_forced_text: 'No thinking here.<|im_end|>' });
    eq(r.choices[0].message.content, 'No thinking here.', 'content');
    assert(!r.choices[0].message.reasoning_content, `no reasoning: ${JSON.stringify(r.choices[0].message.reasoning_content)}`);
  });
  summary();
}

// ---------------------------------------------------------------- n
await check('n=2 with a seed: reproducible, choice j == one request with seed + j, choices differ', async () => {
  const a = await client.completions.create({ ...sampled, prompt: PROMPT, n: 2, seed: 1234 });
  const b = await client.completions.create({ ...sampled, prompt: PROMPT, n: 2, seed: 1234 });
  eq(a.choices.length, 2, 'two choices');
  eq(a.choices.map((c) => c.index).join(), '0,1', 'indexes');
  eq(a.choices[0].text, b.choices[0].text, 'choice 0 repeats');
  eq(a.choices[1].text, b.choices[1].text, 'choice 1 repeats');
  assert(a.choices[0].text !== a.choices[1].text, 'the two choices differ');
  eq(a.choices[0].text, await one(PROMPT, { seed: 1234 }), 'choice 0 == seed 1234 alone');
  eq(a.choices[1].text, await one(PROMPT, { seed: 1235 }), 'choice 1 == seed 1235 alone');
  eq(a.usage.completion_tokens, 24, 'usage counts both choices');
  eq(a.usage.prompt_tokens, (await client.completions.create({ ...sampled, prompt: PROMPT, seed: 1 })).usage.prompt_tokens,
    'the prompt counted once');
});

await check('n=3 without a seed: the choices differ', async () => {
  const a = await client.completions.create({ ...sampled, prompt: PROMPT, n: 3 });
  const t = a.choices.map((c) => c.text);
  assert(t[0] !== t[1] && t[1] !== t[2] && t[0] !== t[2], `choices: ${JSON.stringify(t)}`);
});

await check('n=2 streaming: chunks carry the index, texts == non-streaming (chat)', async () => {
  const body = { ...sampled, messages: USER, n: 2, seed: 77 };
  const r = await client.chat.completions.create(body);
  const s = await client.chat.completions.create({ ...body, stream: true });
  const text = ['', ''], finish = [null, null], roles = [0, 0];
  for await (const c of s)
    for (const ch of c.choices) {
      if (ch.delta.role) roles[ch.index]++;
      if (ch.delta.content) text[ch.index] += ch.delta.content;
      if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
    }
  eq(roles.join(), '1,1', 'one role chunk per choice');
  eq(text[0], r.choices[0].message.content, 'choice 0');
  eq(text[1], r.choices[1].message.content, 'choice 1');
  eq(finish.join(), 'length,length', 'finish per choice');
  const f = await client.beta.chat.completions.stream({ ...body }).finalChatCompletion();
  eq(f.choices.length, 2, 'the stream helper assembles two choices');
  eq(f.choices[1].message.content, r.choices[1].message.content, 'helper choice 1');
});

// ---------------------------------------------------------------- batched prompts
await check('batched prompts == separate requests (strings and token arrays; prompt-major x n)', async () => {
  const P = ['Once upon a time', 'In a galaxy far away', 'The recipe calls for'];
  const r = await client.completions.create({ ...sampled, prompt: P, seed: 5 });
  eq(r.choices.length, 3, 'one choice per prompt');
  for (let i = 0; i < 3; i++) eq(r.choices[i].text, await one(P[i], { seed: 5 }), `prompt ${i}`);
  const r2 = await client.completions.create({ ...sampled, prompt: P.slice(0, 2), seed: 5, n: 2 });
  eq(r2.choices.map((c) => c.index).join(), '0,1,2,3', 'indexes');
  eq(r2.choices[1].text, await one(P[0], { seed: 6 }), 'prompt 0, choice 1');
  eq(r2.choices[2].text, r.choices[1].text, 'prompt 1, choice 0');
  const ids = await Promise.all(P.map(async (p) => (await tokenize({ prompt: p })).tokens));
  const r3 = await client.completions.create({ ...sampled, prompt: ids, seed: 5 });
  for (let i = 0; i < 3; i++) eq(r3.choices[i].text, await one(ids[i], { seed: 5 }), `ids ${i}`);
  const sum = (await Promise.all(P.map((p) => client.completions.create({ ...sampled, prompt: p, seed: 5 }))))
    .reduce((a, x) => a + x.usage.prompt_tokens, 0);
  eq(r.usage.prompt_tokens, sum, 'usage: every prompt counted');
});

// ---------------------------------------------------------------- echo
await check('echo: the prompt before the text (streaming too)', async () => {
  const plain = await client.completions.create({ ...greedy, prompt: PROMPT });
  const e = await client.completions.create({ ...greedy, prompt: PROMPT, echo: true });
  eq(e.choices[0].text, PROMPT + plain.choices[0].text, 'echoed text');
  eq(e.usage.completion_tokens, plain.usage.completion_tokens, 'usage unchanged');
  const s = await client.completions.create({ ...greedy, prompt: PROMPT, echo: true, stream: true });
  let t = '';
  for await (const c of s) for (const ch of c.choices) t += ch.text;
  eq(t, e.choices[0].text, 'streamed echo');
});

// ---------------------------------------------------------------- logit_bias
await check('logit_bias: +100 forces a token, -100 bans the greedy one; out of range refused', async () => {
  const id = (await tokenize({ prompt: ' hello' })).tokens[0];
  const r = await client.completions.create({ ...greedy, prompt: PROMPT, max_tokens: 5, logit_bias: { [id]: 100 }, logprobs: 0 });
  eq(r.choices[0].text, ' hello'.repeat(5), 'every token is the biased one');
  const plain = await client.completions.create({ ...greedy, prompt: PROMPT, max_tokens: 1, logprobs: 0 });
  const top = (await tokenize({ prompt: plain.choices[0].text })).tokens[0];
  const banned = await client.completions.create({ ...greedy, prompt: PROMPT, max_tokens: 1, logit_bias: { [top]: -100 } });
  assert(banned.choices[0].text !== plain.choices[0].text, 'the greedy token is banned');
  await refused(client.completions.create({ ...greedy, prompt: PROMPT, logit_bias: { [id]: 150 } }), 'bias 150');
  await refused(client.completions.create({ ...greedy, prompt: PROMPT, logit_bias: { 999999999: 1 } }), 'id outside the vocabulary');
});

// ---------------------------------------------------------------- ignore_eos
await check('ignore_eos: EOS (made likely with logit_bias) ends the text unless ignored', async () => {
  const gen = JSON.parse(fs.readFileSync(process.env.MODEL_DIR + '/generation_config.json'));
  const eos = [].concat(gen.eos_token_id)[0];
  const bias = { [eos]: 100 };
  const stop = await client.completions.create({ ...greedy, prompt: PROMPT, ignore_eos: false, max_tokens: 8, logit_bias: bias });
  eq(stop.choices[0].finish_reason, 'stop', 'EOS stops');
  eq(stop.usage.completion_tokens, 1, 'after one token');
  const go = await client.completions.create({ ...greedy, prompt: PROMPT, ignore_eos: true, max_tokens: 8, logit_bias: bias });
  eq(go.choices[0].finish_reason, 'length', 'ignored EOS runs to max_tokens');
  eq(go.usage.completion_tokens, 8, 'eight tokens');
});

// ---------------------------------------------------------------- repetition_penalty
await check('repetition_penalty: changes the output, deterministic alone and in a batch', async () => {
  // greedy: a token made the favourite by logit_bias repeats; a penalty on seen tokens stops that
  const id = (await tokenize({ prompt: ' hello' })).tokens[0];
  const body = { ...greedy, prompt: 'Say hello', max_tokens: 6, logit_bias: { [id]: 8 } };
  const off = (await client.completions.create(body)).choices[0].text;
  eq(off, ' hello'.repeat(6), 'without a penalty the biased token repeats');
  const on = (await client.completions.create({ ...body, repetition_penalty: 50 })).choices[0].text;
  assert(!on.startsWith(' hello hello'), `penalty 50 stops the repetition: ${JSON.stringify(on)}`);
  // the same text each time, alone or beside other requests; sampled with a seed too
  const again = await Promise.all([0, 1, 2, 3].map((i) => client.completions.create(
    i % 2 ? { ...body, repetition_penalty: 50 } : { ...sampled, prompt: PROMPT + i, max_tokens: 24 })));
  eq(again[1].choices[0].text, on, 'same text beside other requests (1)');
  eq(again[3].choices[0].text, on, 'same text beside other requests (3)');
  const sb = { ...sampled, prompt: PROMPT + PROMPT, max_tokens: 24, seed: 9, repetition_penalty: 1.8 };
  const s1 = (await client.completions.create(sb)).choices[0].text;
  eq((await client.completions.create(sb)).choices[0].text, s1, 'sampled with a seed repeats');
  eq((await client.completions.create({ ...body, repetition_penalty: 50 })).choices[0].text, on, 'greedy repeats');
});

// ---------------------------------------------------------------- chat template options
await check('chat_template_kwargs enable_thinking=false changes the prompt (Qwen3 closes the think block)', async () => {
  const on = await client.chat.completions.create({ ...greedy, max_tokens: 1, messages: USER });
  const off = await client.chat.completions.create({ ...greedy, max_tokens: 1, messages: USER, chat_template_kwargs: { enable_thinking: false } });
  eq(off.usage.prompt_tokens, on.usage.prompt_tokens + 4, 'four more prompt tokens: <think>, \\n\\n, </think>, \\n\\n');
  const t = await tokenize({ messages: USER, chat_template_kwargs: { enable_thinking: false } });
  eq(t.count, off.usage.prompt_tokens, '/tokenize renders the same prompt');
  const text = await detok(t.tokens);
  assert(text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), `rendered: ${JSON.stringify(text)}`);
});

await check('continue_final_message: the last assistant message is left open; add_generation_prompt false', async () => {
  const msgs = [{ role: 'user', content: 'Tell me a story.' }, { role: 'assistant', content: 'Once upon a' }];
  const t = await tokenize({ messages: msgs, continue_final_message: true, add_generation_prompt: false });
  const text = await detok(t.tokens);
  assert(text.endsWith('Once upon a'), `continued prompt ends with the message: ${JSON.stringify(text)}`);
  const closed = await tokenize({ messages: msgs, add_generation_prompt: false });
  assert((await detok(closed.tokens)).endsWith('Once upon a<|im_end|>\n'), 'closed without the option');
  eq(t.count, closed.count - 2, 'two tokens fewer (<|im_end|>, \\n)');
  const r = await client.chat.completions.create({ ...greedy, messages: msgs, continue_final_message: true, add_generation_prompt: false });
  eq(r.usage.prompt_tokens, t.count, 'the chat request uses the continued prompt');
  const withGen = await client.chat.completions.create({ ...greedy, messages: msgs });
  assert(withGen.usage.prompt_tokens > r.usage.prompt_tokens, 'a generation prompt otherwise');
  await refused(client.chat.completions.create({ ...greedy, messages: msgs, continue_final_message: true, add_generation_prompt: true }),
    'both true');
});

// ---------------------------------------------------------------- tools
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const CALL2 = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>';
const forced = (text) => ({ ...greedy, ignore_eos: false, max_tokens: 80, messages: USER, tools: TOOLS, eaas_test_forced_text: text + '<|im_end|>' });

await check('tools are rendered into the prompt (Qwen3 # Tools section)', async () => {
  const a = await client.chat.completions.create({ ...greedy, max_tokens: 1, messages: USER });
  const b = await client.chat.completions.create({ ...greedy, max_tokens: 1, messages: USER, tools: TOOLS });
  assert(b.usage.prompt_tokens > a.usage.prompt_tokens + 50, `tools add prompt tokens: ${a.usage.prompt_tokens} -> ${b.usage.prompt_tokens}`);
  const text = await detok((await tokenize({ messages: USER, tools: TOOLS })).tokens);
  assert(text.includes('<tools>\n{"type": "function", "function": {"name": "get_weather"'), `rendered: ${JSON.stringify(text.slice(0, 300))}`);
});

await check('tool call (auto): parsed into message.tool_calls, finish_reason tool_calls, text before stays content', async () => {
  const r = await client.chat.completions.create(forced("I'll check.\n" + CALL));
  const c = r.choices[0];
  eq(c.finish_reason, 'tool_calls', 'finish_reason');
  eq(c.message.content, "I'll check.\n", 'content');
  eq(c.message.tool_calls.length, 1, 'one call');
  const tc = c.message.tool_calls[0];
  assert(/^call_[0-9a-f]{24}$/.test(tc.id), `id ${tc.id}`);
  eq(tc.type, 'function', 'type');
  eq(tc.function.name, 'get_weather', 'name');
  eq(typeof tc.function.arguments, 'string', 'arguments is a JSON string');
  eq(JSON.parse(tc.function.arguments).city, 'Paris', 'arguments');
});

await check('tool calls streamed as OpenAI deltas; the stream helper assembles them (two calls)', async () => {
  const body = forced(CALL + '\n' + CALL2);
  const raw = await client.chat.completions.create({ ...body, stream: true });
  const deltas = [];
  for await (const c of raw) for (const ch of c.choices) if (ch.delta.tool_calls) deltas.push(...ch.delta.tool_calls);
  eq(deltas.length, 4, 'two deltas per call');
  eq(deltas[0].index, 0, 'first delta index');
  assert(deltas[0].id && deltas[0].type === 'function' && deltas[0].function.name === 'get_weather' &&
    deltas[0].function.arguments === '', `first delta: ${JSON.stringify(deltas[0])}`);
  eq(deltas[3].index, 1, 'second call index');
  const s = client.beta.chat.completions.stream(body);
  const f = await s.finalChatCompletion();
  const m = f.choices[0].message;
  eq(f.choices[0].finish_reason, 'tool_calls', 'streamed finish');
  eq(m.tool_calls.length, 2, 'two calls assembled');
  eq(m.tool_calls[1].function.name, 'get_time', 'second name');
  eq(JSON.parse(m.tool_calls[0].function.arguments).city, 'Paris', 'first arguments');
  eq(JSON.parse(m.tool_calls[1].function.arguments).tz, 'CET', 'second arguments');
  const n = await client.chat.completions.create(body);
  eq(JSON.stringify(n.choices[0].message.tool_calls.map((c) => c.function)), JSON.stringify(m.tool_calls.map((c) => c.function)),
    'streaming == non-streaming');
});

await check('malformed tool call: plain content, finish stop; tool_choice none: not parsed; parallel_tool_calls false: one call', async () => {
  const bad = '<tool_call>\n{"name": get_weather}\n</tool_call>';
  const r = await client.chat.completions.create(forced(bad));
  eq(r.choices[0].finish_reason, 'stop', 'finish');
  eq(r.choices[0].message.content, bad, 'content');
  assert(!r.choices[0].message.tool_calls || r.choices[0].message.tool_calls.length === 0, 'no calls');
  const none = await client.chat.completions.create({ ...forced(CALL), tool_choice: 'none' });
  eq(none.choices[0].message.content, CALL, 'tool_choice none: the text as it is');
  const one = await client.chat.completions.create({ ...forced(CALL + '\n' + CALL2), parallel_tool_calls: false });
  eq(one.choices[0].message.tool_calls.length, 1, 'parallel_tool_calls false');
});

// tool_choice "required" / named: the grammar engine forces a call in the family's
// format; a random-weight model that never writes one on its own must still give
// well-formed calls whose arguments validate against the function's schema (ajv).

await check('tool_choice required, three tools: well-formed calls whose arguments validate; the stream helper assembles the same', async () => {
  const names = new Set();
  for (let seed = 1; seed <= 8; seed++) {
    const r = await client.chat.completions.create(req3({ seed }));
    const c = r.choices[0];
    callsFinish(r, `seed ${seed}`);
    const got = validCalls(c.message.tool_calls, TOOLS3, `seed ${seed}`);
    got.forEach(([n]) => names.add(n));
    if (seed <= 3) {
      const f = await client.beta.chat.completions.stream(req3({ seed })).finalChatCompletion();
      eq(f.choices[0].finish_reason, c.finish_reason, `seed ${seed}: streamed finish`);
      eq(JSON.stringify(validCalls(f.choices[0].message.tool_calls, TOOLS3, `seed ${seed} streamed`)), JSON.stringify(got),
        `seed ${seed}: assembled calls == non-streaming`);
    }
  }
  assert(names.size >= 2, `the grammar leaves the choice of function to the model: only ${[...names]} in 8 seeds`);
  const one = await client.chat.completions.create(req3({ seed: 5, parallel_tool_calls: false }));
  eq(one.choices[0].message.tool_calls.length, 1, 'parallel_tool_calls false: exactly one call');
});

await check('tool_choice naming a function: always that function, arguments valid; refusals name the field', async () => {
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.chat.completions.create(req3({ seed, tool_choice: { type: 'function', function: { name: 'book_table' } } }));
    const calls = r.choices[0].message.tool_calls;
    eq(calls.length, 1, `seed ${seed}: one call`);
    eq(calls[0].function.name, 'book_table', `seed ${seed}: the named function`);
    validCalls(calls, TOOLS3, `seed ${seed}`);
  }
  const e = await refused(client.chat.completions.create(req3({ response_format: { type: 'json_object' } })), 'with response_format');
  eq(e.param, 'tool_choice', 'param');
  const bad = [...TOOLS3, { type: 'function', function: { name: 'h', parameters: { type: 'object', properties: { x: { type: 'tuple' } } } } }];
  const e2 = await refused(client.chat.completions.create(req3({ tools: bad })), 'bad parameters schema');
  eq(e2.param, 'tools[3].function.parameters.properties.x.type', 'the JSON path');
});

await check('a tool-call history (assistant content null, tool result) renders and serves', async () => {
  const hist = [...USER, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
    function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] }, { role: 'tool', tool_call_id: 'call_1', content: 'rain' }];
  const r = await client.chat.completions.create({ ...greedy, messages: hist, tools: TOOLS });
  const t = await tokenize({ messages: hist, tools: TOOLS });
  eq(r.usage.prompt_tokens, t.count, 'prompt');
  const text = await detok(t.tokens);
  assert(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>') &&
    text.includes('<tool_response>\nrain\n</tool_response>'), `rendered: ${JSON.stringify(text)}`);
});

// ---------------------------------------------------------------- reasoning
await check('reasoning (--reasoning-parser qwen3): reasoning_content apart from content, streamed as deltas', async () => {
  const body = { ...greedy, ignore_eos: false, max_tokens: 40, messages: USER, eaas_test_forced_text: '<think>\nI should greet.\n</think>\n\nHello!<|im_end|>' };
  const r = await client.chat.completions.create(body);
  eq(r.choices[0].message.reasoning_content, '\nI should greet.\n', 'reasoning_content');
  eq(r.choices[0].message.content, '\n\nHello!', 'content');
  const s = await client.chat.completions.create({ ...body, stream: true });
  let rc = '', ct = '';
  for await (const c of s) for (const ch of c.choices) {
    if (ch.delta.reasoning_content) rc += ch.delta.reasoning_content;
    if (ch.delta.content) ct += ch.delta.content;
  }
  eq(rc, '\nI should greet.\n', 'streamed reasoning');
  eq(ct, '\n\nHello!', 'streamed content');
  const t = await client.chat.completions.create({ ...body, tools: TOOLS, eaas_test_forced_text: '<think>\nweather\n</think>\n\n' + CALL + '<|im_end|>' });
  eq(t.choices[0].message.reasoning_content, '\nweather\n', 'reasoning before a call');
  eq(t.choices[0].message.tool_calls[0].function.name, 'get_weather', 'then the call');
});

summary();
