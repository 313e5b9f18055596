// bench_eaas_failover.mjs — output tokens/s over time across the death of an
// expert server. Keeps N streams busy (each starts a new request when its last
// ends) for DURATION seconds against an attention client, SIGKILLs the process
// KILL_PID at DURATION/2, and writes:
//   OUT.jsonl  one line per 0.5 s bin {"bench":"eaas_failover","t":..,"tok_s":..} and a summary line
//              {"bench":"eaas_failover_summary","kill_t":..,"before_tok_s":..,"after_tok_s":..,
//               "window_s":10,"loss_pct":..,"failed_requests":..}
//   OUT.svg    the curve, with the kill marked
// loss_pct: tokens in the 10 s around the kill against the rate of the 10 s before it.
// usage: node bench_eaas_failover.mjs BASE_URL N DURATION_S KILL_PID OUT
import { createRequire } from 'module';
import { writeFileSync } from 'fs';

const require = createRequire(process.env.EA_SRC + '/tools/node/package.json');
const OpenAI = require('openai');
const [baseURL, nS, durS, killS, out] = process.argv.slice(2);
const N = +nS, dur = +durS * 1000, killPid = +killS;
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 600000 });
const model = (await client.models.list()).data[0].id;
const t0 = Date.now(), stamps = [];
let failed = 0, killT = null, reqs = 0;

setTimeout(() => { killT = (Date.now() - t0) / 1000; try { process.kill(killPid, 'SIGKILL'); } catch (e) { console.error(e); } }, dur / 2);

async function worker(w) {
  while (Date.now() - t0 < dur) {
    try {
      const s = await client.completions.create({ model, prompt: `Request ${w}-${reqs++}:`, max_tokens: 64,
        stream: true, temperature: 0.8, seed: reqs, ignore_eos: true });
      for await (const c of s) if (c.choices?.[0]?.text !== undefined) stamps.push((Date.now() - t0) / 1000);
    } catch (e) { failed++; console.error(String(e)); }
  }
}
await Promise.all(Array.from({ length: N }, (_, w) => worker(w)));

const bin = 0.5, nb = Math.ceil(dur / 1000 / bin), bins = new Array(nb).fill(0);
for (const s of stamps) if (s < nb * bin) bins[Math.floor(s / bin)]++;
const rate = (a, b) => stamps.filter((s) => s >= a && s < b).length / (b - a);
const before = rate(killT - 10, killT), after = rate(killT + 5, Math.min(dur / 1000, killT + 15));
const around = stamps.filter((s) => s >= killT - 5 && s < killT + 5).length;
const loss = 100 * (1 - around / (before * 10));
const lines = bins.map((c, i) => JSON.stringify({ bench: 'eaas_failover', t: +(i * bin).toFixed(1), tok_s: c / bin }));
lines.push(JSON.stringify({ bench: 'eaas_failover_summary', streams: N, kill_t: +killT.toFixed(2),
  before_tok_s: +before.toFixed(1), after_tok_s: +after.toFixed(1), window_s: 10, loss_pct: +loss.toFixed(2),
  failed_requests: failed }));
writeFileSync(out + '.jsonl', lines.join('\n') + '\n');

const W = 720, H = 300, pad = 40, ymax = Math.max(...bins.map((c) => c / bin)) * 1.1 || 1;
const x = (t) => pad + (t / (nb * bin)) * (W - 2 * pad), y = (v) => H - pad - (v / ymax) * (H - 2 * pad);
const pts = bins.map((c, i) => `${x(i * bin + bin / 2).toFixed(1)},${y(c / bin).toFixed(1)}`).join(' ');
writeFileSync(out + '.svg', `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">
<rect width="${W}" height="${H}" fill="white"/>
<line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="black"/><line x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}" stroke="black"/>
<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="${pts}"/>
<line x1="${x(killT)}" y1="${pad}" x2="${x(killT)}" y2="${H - pad}" stroke="#d62728" stroke-dasharray="4 3"/>
<text x="${x(killT) + 4}" y="${pad + 12}" fill="#d62728">expert server SIGKILL (t=${killT.toFixed(1)} s)</text>
<text x="${W / 2}" y="${H - 8}" text-anchor="middle">time (s)</text>
<text x="12" y="${H / 2}" transform="rotate(-90 12 ${H / 2})" text-anchor="middle">output tokens/s (0.5 s bins)</text>
<text x="${pad}" y="${pad - 10}">${N} streams; before ${before.toFixed(0)} tok/s, after ${after.toFixed(0)} tok/s; loss over the 10 s around the kill ${loss.toFixed(1)}%; ${failed} failed requests</text>
<text x="${pad - 4}" y="${y(ymax / 1.1) + 4}" text-anchor="end">${(ymax / 1.1).toFixed(0)}</text><text x="${pad - 4}" y="${H - pad + 4}" text-anchor="end">0</text>
</svg>\n`);
console.log(lines[lines.length - 1]);
