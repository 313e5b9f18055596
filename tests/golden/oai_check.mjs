// oai_check.mjs — the check harness the openai-client golden scripts share:
// check(name, fn) runs one async check and prints "ok"/"FAIL" on stderr;
// assert and eq throw; summary() prints "N passed, N failed" and exits.
let passed = 0, failed = 0;
export async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.error(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.error(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
export function assert(cond, msg) { if (!cond) throw new Error(msg); }
export function eq(a, b, msg) { if (a !== b) throw new Error(`${msg}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`); }
export function summary() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
