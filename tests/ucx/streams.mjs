// streams.mjs — N concurrent streaming completions through the official
// `openai` npm client, as an application would run them. Usage:
//   node streams.mjs BASE_URL N MAX_TOKENS OUT.json [FIRST_SEED]
// Request i: prompt "Story number i:", seed FIRST_SEED + i, temperature 0.8
// (odd i) or greedy (even i), ignore_eos. Writes {"texts":[...],"errors":[...],
// "finish":[...]} to OUT.json; a stream that errors or is cut records the
// error and its text so far. Prints "started" once every stream has its first
// chunk (so a caller can inject a fault mid-stream).
import { createRequire } from 'module';
import { writeFileSync } from 'fs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');

const [baseURL, nS, maxS, out, seedS] = process.argv.slice(2);
const n = +nS, maxTokens = +maxS, seed0 = seedS ? +seedS : 100;
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 300000 });
const texts = new Array(n).fill(''), errors = new Array(n).fill(null), finish = new Array(n).fill(null);
let firsts = 0;
const model = (await client.models.list()).data[0].id;

async function one(i) {
  try {
    const stream = await client.completions.create({
      model, prompt: `Story number ${i}:`, max_tokens: maxTokens, stream: true, seed: seed0 + i,
      temperature: i % 2 ? 0.8 : 0, ignore_eos: true,
    });
    let first = true;
    for await (const chunk of stream) {
      if (first && ++firsts === n) console.log('started');
      first = false;
      const c = chunk.choices && chunk.choices[0];
      if (c && c.text) texts[i] += c.text;
      if (c && c.finish_reason) finish[i] = c.finish_reason;
    }
    if (finish[i] !== 'length') errors[i] = `stream ended without finish_reason length (${finish[i]})`;
  } catch (e) {
    errors[i] = String(e && e.message ? e.message : e);
  }
}

await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
writeFileSync(out, JSON.stringify({ texts, errors, finish }));
console.log(`done ${errors.filter((e) => e).length} errors`);
