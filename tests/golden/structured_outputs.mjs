// structured_outputs.mjs — structured outputs through the official `openai`
// npm client against a running `eaas serve` on a random-weight tiny model
// (which on its own never writes JSON). Usage: node structured_outputs.mjs BASE_URL MODEL
//
// Asserts: every one of the 50 schemas of tests/data/structured_schemas.jsonl
// (depth 1..5: nested objects and arrays, anyOf, enum, const, $defs/$ref with
// recursion, formats, integer ranges, patterns) gives chat output that parses
// and validates with ajv (+ ajv-formats), finish_reason "stop"; streaming gives
// the same text; /v1/completions with guided_json likewise; json_object output
// that ends parses as an object; guided_choice returns one of the choices and
// guided_regex a full match; GBNF grammars; logprobs of the constrained distribution; invalid schemas are a 400 naming the JSON path;
// 32 concurrent seeded constrained requests each equal the same request alone.
import { createRequire } from 'module';
import fs from 'fs';
import { check, assert, eq, summary } from './check_lib.mjs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 300000 });
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

const schemas = fs.readFileSync(process.env.EA_SRC + '/tests/data/structured_schemas.jsonl', 'utf8')
  .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const messages = [{ role: 'user', content: 'Fill in the record.' }];
const MAXT = 600;

function validate(schema, text, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { throw new Error(`${what}: does not parse: ${JSON.stringify(text)}`); }
  const ok = ajv.validate(schema, v);
  if (!ok) throw new Error(`${what}: ${ajv.errorsText()} in ${text}`);
  return v;
}

function rf(s) { return { type: 'json_schema', json_schema: { name: s.name, schema: s.schema, strict: true } }; }

const chatText = {};
await check(`${schemas.length} schemas, chat: outputs parse and validate (ajv), finish stop`, async () => {
  const bad = [];
  await Promise.all(schemas.map(async (s, i) => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: MAXT, seed: 100 + i, response_format: rf(s) });
    const c = r.choices[0];
    try {
      if (c.finish_reason !== 'stop') throw new Error(`${s.name}: finish_reason ${c.finish_reason}`);
      validate(s.schema, c.message.content, s.name);
      chatText[s.name] = c.message.content;
    } catch (e) { bad.push(e.message); }
  }));
  assert(bad.length === 0, `${bad.length} failed:\n  ${bad.join('\n  ')}`);
  const sizes = Object.values(chatText).map((t) => t.length);
  console.log(`schemas: ${sizes.length} valid, output length ${Math.min(...sizes)}..${Math.max(...sizes)} bytes`);
});

await check('streaming gives the same text as non-streaming (every 5th schema)', async () => {
  for (let i = 0; i < schemas.length; i += 5) {
    const s = schemas[i];
    const st = await client.chat.completions.create({ model, messages, max_tokens: MAXT, seed: 100 + i, response_format: rf(s), stream: true });
    let text = '', fin = null;
    for await (const ch of st) {
      if (ch.choices[0]?.delta?.content) text += ch.choices[0].delta.content;
      if (ch.choices[0]?.finish_reason) fin = ch.choices[0].finish_reason;
    }
    eq(fin, 'stop', `${s.name} finish`);
    eq(text, chatText[s.name], `${s.name} streamed text`);
    validate(s.schema, text, s.name);
  }
});

await check('/v1/completions with guided_json: parse and validate (10 schemas)', async () => {
  for (let i = 0; i < 50; i += 5) {
    const s = schemas[i];
    const r = await client.completions.create({ model, prompt: 'Record:', max_tokens: MAXT, seed: 7 + i, guided_json: s.schema });
    eq(r.choices[0].finish_reason, 'stop', `${s.name} finish`);
    validate(s.schema, r.choices[0].text, s.name);
  }
});

await check('json_object: an output that ends is a JSON object; a cut one is reported as length', async () => {
  let ended = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 300, seed, response_format: { type: 'json_object' } });
    const c = r.choices[0];
    assert(c.message.content.startsWith('{'), `seed ${seed}: starts with ${c.message.content.slice(0, 10)}`);
    if (c.finish_reason === 'stop') {
      const v = JSON.parse(c.message.content);
      assert(v && typeof v === 'object' && !Array.isArray(v), `seed ${seed}: not an object`);
      ended++;
    } else {
      eq(c.finish_reason, 'length', `seed ${seed} finish`);
    }
  }
  assert(ended > 0, 'no json_object output ended within 300 tokens');
  console.log(`json_object: ${ended} of 6 ended within 300 tokens`);
});

await check('guided_choice: one of the choices, finish stop', async () => {
  const choices = ['positive', 'negative', 'neutral', 'mixed feelings'];
  const seen = new Set();
  for (let seed = 1; seed <= 12; seed++) {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 20, seed, guided_choice: choices });
    const t = r.choices[0].message.content;
    assert(choices.includes(t), `seed ${seed}: ${JSON.stringify(t)}`);
    eq(r.choices[0].finish_reason, 'stop', 'finish');
    seen.add(t);
  }
  assert(seen.size >= 2, `only ${[...seen]} chosen over 12 seeds`);
});

await check('logprobs under a constraint are of the constrained distribution', async () => {
  const choices = ['yes', 'no', 'maybe'];
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 10, seed, guided_choice: choices, logprobs: true, top_logprobs: 5 });
    let text = '';
    for (const t of r.choices[0].logprobs.content) {
      let mass = 0;
      for (const a of t.top_logprobs) {
        if (a.logprob <= -9999) continue; /* -inf: a token the grammar forbids */
        assert(choices.some((c) => c.startsWith(text + a.token)), `seed ${seed}: ${JSON.stringify(text + a.token)} is allowed?`);
        mass += Math.exp(a.logprob);
      }
      assert(mass <= 1.0001, `mass ${mass}`);
      text += t.token;
    }
    assert(choices.includes(text), `seed ${seed}: ${text}`);
  }
});

await check('guided_regex: a full match, chat and completions', async () => {
  const re = '[A-Z][a-z]{2,6} [0-9]{1,3}(\\.[0-9]{2})? (EUR|USD)';
  const js = new RegExp('^(?:' + re + ')$');
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.completions.create({ model, prompt: 'Price:', max_tokens: 40, seed, guided_regex: re });
    assert(js.test(r.choices[0].text), `completions seed ${seed}: ${JSON.stringify(r.choices[0].text)}`);
    const c = await client.chat.completions.create({ model, messages, max_tokens: 40, seed, guided_regex: re });
    assert(js.test(c.choices[0].message.content), `chat seed ${seed}: ${JSON.stringify(c.choices[0].message.content)}`);
  }
});

await check('grammar (GBNF): the output is in the language, chat and completions', async () => {
  const gbnf = 'root ::= greeting " " name "!"\ngreeting ::= "Hello" | "Hi" | "Good " ("morning" | "evening")\nname ::= [A-Z] [a-z]{1,8}\n';
  const js = /^(Hello|Hi|Good (morning|evening)) [A-Z][a-z]{1,8}!$/;
  for (let seed = 1; seed <= 4; seed++) {
    const c = await client.chat.completions.create({ model, messages, max_tokens: 30, seed, grammar: gbnf });
    assert(js.test(c.choices[0].message.content), `chat seed ${seed}: ${JSON.stringify(c.choices[0].message.content)}`);
    eq(c.choices[0].finish_reason, 'stop', 'finish');
    const r = await client.completions.create({ model, prompt: 'Say hi:', max_tokens: 30, seed, guided_grammar: gbnf });
    assert(js.test(r.choices[0].text), `completions seed ${seed}: ${JSON.stringify(r.choices[0].text)}`);
  }
  let err = null;
  try { await client.completions.create({ model, prompt: 'x', max_tokens: 5, grammar: 'root ::= undefined-rule' }); } catch (e) { err = e; }
  assert(err && err.status === 400 && (err.error?.param ?? err.param) === 'grammar', 'bad grammar is a 400 naming grammar');
});

await check('max_tokens cuts a constrained output: finish_reason length', async () => {
  const s = { type: 'object', properties: { a: { type: 'string', minLength: 40, maxLength: 60 } }, required: ['a'] };
  const r = await client.chat.completions.create({ model, messages, max_tokens: 3, seed: 1, response_format: rf({ name: 'x', schema: s }) });
  eq(r.choices[0].finish_reason, 'length', 'finish');
});

const invalid = [
  [{ type: 'object', properties: { a: { $ref: '#/$defs/nowhere' } } }, 'response_format.json_schema.schema.properties.a.$ref'],
  [{ type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }, 'response_format.json_schema.schema.properties.a.uniqueItems'],
  [{ type: 'objekt' }, 'response_format.json_schema.schema.type'],
  [{ $defs: { n: { type: 'object', properties: { c: { $ref: '#/$defs/n' } }, required: ['c'] } }, $ref: '#/$defs/n' }, 'response_format.json_schema.schema.$defs.n'],
  [{ type: 'object', properties: { a: { type: 'string', pattern: '^(a$' } } }, 'response_format.json_schema.schema.properties.a.pattern'],
  [{ type: 'object', properties: { a: {} }, required: ['b'] }, 'response_format.json_schema.schema.required[0]'],
];
await check('invalid schemas: 400 naming the JSON path', async () => {
  for (const [schema, path] of invalid) {
    let err = null;
    try {
      await client.chat.completions.create({ model, messages, max_tokens: 5, response_format: rf({ name: 'x', schema }) });
    } catch (e) { err = e; }
    assert(err && err.status === 400, `${path}: status ${err && err.status}`);
    eq(err.error?.param ?? err.param, path, 'param');
  }
  let err = null;
  try { await client.completions.create({ model, prompt: 'x', max_tokens: 5, guided_regex: '(?=a)b' }); } catch (e) { err = e; }
  assert(err && err.status === 400 && (err.error?.param ?? err.param) === 'guided_regex', 'bad regex');
  err = null;
  try { await client.completions.create({ model, prompt: 'x', max_tokens: 5, guided_regex: 'a', guided_choice: ['a'] }); } catch (e) { err = e; }
  assert(err && err.status === 400, 'two constraints');
});

await check('determinism: 32 concurrent seeded constrained requests each equal the request alone', async () => {
  const reqs = Array.from({ length: 32 }, (_, i) => {
    const s = schemas[(i * 7) % schemas.length];
    return { model, messages: [{ role: 'user', content: `Record number ${i}` }], max_tokens: MAXT, seed: 1000 + i, response_format: rf(s) };
  });
  const alone = [];
  for (const q of reqs) alone.push((await client.chat.completions.create(q)).choices[0].message.content);
  const together = await Promise.all(reqs.map((q) => client.chat.completions.create(q)));
  for (let i = 0; i < reqs.length; i++) eq(together[i].choices[0].message.content, alone[i], `request ${i}`);
});

summary();
