// chat_ref.mjs — reference renderer for chat templates (@huggingface/jinja),
// and the comparison driver of tests/golden/test_chat_template_js.sh.
//
// The context is built exactly as `eaas chat-template` builds it:
//   messages file = array of messages, or an object {messages, other vars...};
//   add_generation_prompt from the flag; bos_token/eos_token from
//   tokenizer_config.json (string, or object with "content"; absent/null: unset);
//   chat_template a string, or a list of {name, template} ("default", or
//   "tool_use" when tools are given and the list has it).
//
//   node chat_ref.mjs render MODEL_DIR CONV.json [--no-generation-prompt]
//   node chat_ref.mjs compare EAAS_BIN MIN_OK NAME=MODEL_DIR ... -- CONV.json ...
//
// compare renders every conversation with every template, with and without
// the generation prompt, in JS and with eaas, and requires identical bytes
// (or an error in both). It exits 1 on any mismatch or when a template has
// fewer than MIN_OK conversations that render without error.
import { readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join, basename, dirname } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

// ES modules ignore NODE_PATH: resolve from tools/node/node_modules explicitly.
const here = dirname(fileURLToPath(import.meta.url));
const modules = process.env.NODE_PATH || join(here, "../../tools/node/node_modules");
const { Template } = createRequire(join(modules, "noop.js"))("@huggingface/jinja");

function loadConfig(dir, wantTools) {
  const cfg = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
  let tmpl = cfg.chat_template;
  if (Array.isArray(tmpl)) {
    const byName = Object.fromEntries(tmpl.map((e) => [e.name, e.template]));
    tmpl = wantTools && byName.tool_use ? byName.tool_use : byName.default;
  }
  const tok = (v) => (v == null ? undefined : typeof v === "string" ? v : v.content);
  return { tmpl, bos: tok(cfg.bos_token), eos: tok(cfg.eos_token) };
}

function buildContext(convPath, agp, cfg) {
  const doc = JSON.parse(readFileSync(convPath, "utf8"));
  const ctx = Array.isArray(doc) ? { messages: doc } : { ...doc };
  ctx.add_generation_prompt = agp;
  if (cfg.bos !== undefined) ctx.bos_token = cfg.bos;
  if (cfg.eos !== undefined) ctx.eos_token = cfg.eos;
  return ctx;
}

function wantsTools(convPath) {
  const doc = JSON.parse(readFileSync(convPath, "utf8"));
  return !Array.isArray(doc) && doc.tools !== undefined;
}

function renderJS(dir, convPath, agp) {
  const cfg = loadConfig(dir, wantsTools(convPath));
  try {
    const out = new Template(cfg.tmpl).render(buildContext(convPath, agp, cfg));
    return { ok: true, out };
  } catch (e) {
    return { ok: false, err: String(e && e.message ? e.message : e) };
  }
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "render") {
  const [dir, conv, flag] = rest;
  const r = renderJS(dir, conv, flag !== "--no-generation-prompt");
  if (r.ok) process.stdout.write(r.out);
  else {
    process.stderr.write(`error: ${r.err}\n`);
    process.exit(1);
  }
} else if (mode === "compare") {
  const [bin, minOkStr, ...more] = rest;
  const sep = more.indexOf("--");
  const models = more.slice(0, sep).map((s) => s.split("="));
  const convs = more.slice(sep + 1);
  const minOk = Number(minOkStr);
  let mismatches = 0;
  let failedTemplates = 0;
  for (const [name, dir] of models) {
    let same = 0, bothErr = 0, okConvs = 0;
    for (const conv of convs) {
      let convOk = false;
      for (const agp of [true, false]) {
        const js = renderJS(dir, conv, agp);
        const args = ["chat-template", "--model", dir, "--messages", conv];
        if (!agp) args.push("--no-generation-prompt");
        const c = spawnSync(bin, args, { maxBuffer: 1 << 26 });
        const where = `${name} ${basename(conv)} add_generation_prompt=${agp}`;
        if (js.ok) {
          const want = Buffer.from(js.out, "utf8");
          if (c.status === 0 && Buffer.compare(c.stdout, want) === 0) {
            same++;
            convOk = true;
          } else {
            mismatches++;
            console.log(`MISMATCH ${where}: eaas exit ${c.status}`);
            console.log(`  js:   ${JSON.stringify(js.out).slice(0, 400)}`);
            console.log(`  eaas: ${JSON.stringify(c.stdout.toString("utf8")).slice(0, 400)}`);
            if (c.status !== 0) console.log(`  eaas stderr: ${c.stderr.toString().trim()}`);
          }
        } else {
          const cerr = c.stderr.toString();
          // both must fail; when the template raised, the message must agree
          const raisedOk = !cerr.includes("raised an exception") || cerr.includes(js.err);
          if (c.status === 1 && raisedOk) bothErr++;
          else {
            mismatches++;
            console.log(`MISMATCH ${where}: js threw "${js.err}" but eaas exit ${c.status}: ${cerr.trim()}`);
          }
        }
      }
      if (convOk) okConvs++;
    }
    const good = okConvs >= minOk;
    if (!good) failedTemplates++;
    console.log(`${name}: ${same} renders identical, ${bothErr} errors in both, ${okConvs} conversations rendered ok (need ${minOk})${good ? "" : " TOO FEW"}`);
  }
  console.log(`${mismatches} mismatches`);
  process.exit(mismatches || failedTemplates ? 1 : 0);
} else {
  console.error("usage: chat_ref.mjs render MODEL_DIR CONV.json [--no-generation-prompt] | compare EAAS_BIN MIN_OK NAME=DIR... -- CONV...");
  process.exit(2);
}
