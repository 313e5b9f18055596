// check_lib.mjs — what the serve_*.mjs client scripts share: named checks that
// print "ok"/"FAIL" lines on stderr, assertions, and the "N passed, N failed"
// summary with the exit status.
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
