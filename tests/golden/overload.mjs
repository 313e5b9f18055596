// overload.mjs — overload cases of tests/golden/test_serve_badreq.sh, with
// Node's own http client (one connection per request, no retries).
//
//   node overload.mjs PORT API_KEY N_IDLE N_STREAMS IDLE_TIMEOUT_S
//
// 1. N_IDLE idle TCP connections are opened and held; /health and /metrics must
//    still answer 200 on new connections; then the server must close the idle
//    ones within IDLE_TIMEOUT_S + 3 s.
// 2. N_STREAMS streaming completions at once: each must end as a whole stream
//    (status 200, `data: [DONE]`, the chunked message complete) or as a 503
//    with Retry-After and an OpenAI error body — never a reset or a cut.
// Prints one JSON line of counts; exits 1 if a rule was broken. Every wait is
// bounded.
import http from 'node:http';
import net from 'node:net';

const [port, key, nIdle, nStreams, idleS] = process.argv.slice(2).map((v, i) => (i === 1 ? v : Number(v)));
const host = '127.0.0.1';
let bad = 0;
const fail = (msg) => { bad++; console.error('FAIL ' + msg); };

function get(path) {
  return new Promise((resolve) => {
    const req = http.request({ host, port, path, agent: false, timeout: 10000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', (e) => resolve('error ' + e.code));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve('error ' + (e.code || e.message)));
    req.end();
  });
}

function openIdle(n) {
  return Promise.all(Array.from({ length: n }, () => new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.closedByServer = false;
    s.on('connect', () => resolve(s));
    s.on('end', () => { s.closedByServer = true; });
    s.on('close', () => { s.closedByServer = true; });
    s.on('error', () => { s.closedByServer = true; resolve(s); });
  })));
}

function stream() {
  const body = JSON.stringify({ prompt: 'x', max_tokens: 4, ignore_eos: true, stream: true });
  return new Promise((resolve) => {
    let done = false;
    const end = (kind, why) => { if (!done) { done = true; resolve({ kind, why }); } };
    const req = http.request({
      host, port, path: '/v1/completions', method: 'POST', agent: false, timeout: 60000,
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + key, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('aborted', () => end('reset', 'aborted mid-response'));
      res.on('error', (e) => end('reset', e.code || e.message));
      res.on('end', () => {
        if (res.statusCode === 200 && text.includes('data: [DONE]')) return end('completed');
        if (res.statusCode === 503) {
          try {
            const e = JSON.parse(text).error;
            if (res.headers['retry-after'] && typeof e.message === 'string' && e.message && typeof e.type === 'string')
              return end('503');
          } catch (x) { /* below */ }
        }
        end('other', `status ${res.statusCode}: ${text.slice(0, 200)}`);
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => end('reset', e.code || e.message));
    req.end(body);
  });
}

// 1. idle connections
const idle = await openIdle(nIdle);
const health = await get('/health');
const metrics = await get('/metrics');
if (health !== 200) fail(`/health with ${nIdle} idle connections open: ${health}`);
if (metrics !== 200) fail(`/metrics with ${nIdle} idle connections open: ${metrics}`);
const t0 = Date.now();
while (idle.some((s) => !s.closedByServer) && Date.now() - t0 < (idleS + 3) * 1000) await new Promise((r) => setTimeout(r, 100));
const idleClosed = idle.filter((s) => s.closedByServer).length;
const idleCloseS = (Date.now() - t0) / 1000;
if (idleClosed !== nIdle) fail(`${nIdle - idleClosed} of ${nIdle} idle connections still open after ${idleCloseS} s`);
idle.forEach((s) => s.destroy());

// 2. concurrent streams
const results = await Promise.all(Array.from({ length: nStreams }, stream));
const count = (k) => results.filter((r) => r.kind === k).length;
const counts = { completed: count('completed'), status503: count('503'), reset: count('reset'), other: count('other') };
if (counts.reset) fail(`${counts.reset} of ${nStreams} streams reset or cut: ${results.find((r) => r.kind === 'reset').why}`);
if (counts.other) fail(`${counts.other} of ${nStreams} streams ended otherwise: ${results.find((r) => r.kind === 'other').why}`);
if (counts.completed < 1) fail('no stream completed');
const after = await get('/health');
if (after !== 200) fail(`/health after the streams: ${after}`);
console.log(JSON.stringify({ idle: nIdle, health, metrics, idle_closed: idleClosed, idle_close_s: idleCloseS, streams: nStreams, ...counts }));
process.exit(bad ? 1 : 0);
