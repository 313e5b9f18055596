// bench_structured.mjs — decode throughput with and without a nested JSON
// Schema constraint, same server, same run, alternating. Called by
// bench_structured.sh; prints JSON lines:
//   {"bench":"structured","mode":"none"|"schema","batch":B,"round":r,"output_tok_s":..,"tokens":..}
// usage: node bench_structured.mjs BASE_URL ROUNDS "BATCHES" OUTPUT_LEN
import { createRequire } from 'module';
const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');
const [baseURL, rounds, batches, olen] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 3600000 });
// nested: objects, an array, enum, integers, then a long string, so every request
// decodes OUTPUT_LEN tokens (cut by length) like the unconstrained ones
const schema = {
  type: 'object', properties: {
    meta: { type: 'object', properties: {
      id: { type: 'integer', minimum: 0, maximum: 100000 },
      kind: { enum: ['alpha', 'beta', 'gamma'] },
      tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
      owner: { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } }, required: ['name'] } },
      required: ['id', 'kind', 'tags', 'owner'] },
    body: { type: 'string', minLength: 4000, maxLength: 8000 } },
  required: ['meta', 'body'] };
const modeReq = {
  none: { ignore_eos: true },
  schema: { response_format: { type: 'json_schema', json_schema: { name: 'rec', schema, strict: true } } },
};
for (let r = 0; r < +rounds; r++) {
  for (const b of batches.split(' ').map(Number)) {
    for (const mode of (r % 2 ? ['schema', 'none'] : ['none', 'schema'])) {
      const t0 = performance.now();
      const rs = await Promise.all(Array.from({ length: b }, (_, i) => client.chat.completions.create({
        model: 'bench', messages: [{ role: 'user', content: `Write record ${i}.` }], max_tokens: +olen, seed: 1 + i, ...modeReq[mode] })));
      const dt = (performance.now() - t0) / 1000;
      const tokens = rs.reduce((a, x) => a + x.usage.completion_tokens, 0);
      console.log(JSON.stringify({ bench: 'structured', mode, batch: b, round: r, output_tok_s: +(tokens / dt).toFixed(2), tokens }));
    }
  }
}
