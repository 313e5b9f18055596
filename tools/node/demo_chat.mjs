// demo_chat.mjs — streams one chat completion from an OpenAI-compatible server
// with the official `openai` client and prints the answer as it arrives.
// usage: node tools/node/demo_chat.mjs BASE_URL MODEL "question" [MAX_TOKENS] [MARK_FILE]
// MARK_FILE, if given, is created when the first chunk arrives (the demo kills
// an expert server then, while the answer streams).
import OpenAI from "openai";
import { writeFileSync } from "fs";

const [base, model, question, maxTokens, mark] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: "unused" });
const stream = await client.chat.completions.create({
  model,
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: question },
  ],
  max_tokens: maxTokens ? +maxTokens : 48,
  temperature: 0.7,
  seed: 42,
  stream: true,
  stream_options: { include_usage: true },
});
let usage = null, first = true;
for await (const chunk of stream) {
  if (first && mark) writeFileSync(mark, "streaming\n");
  first = false;
  const delta = chunk.choices[0]?.delta?.content;
  if (delta) process.stdout.write(delta);
  if (chunk.usage) usage = chunk.usage;
}
process.stdout.write("\n");
if (usage) console.log(`[usage: ${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens]`);
