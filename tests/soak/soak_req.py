#!/usr/bin/env python3
# soak_req.py PORT N SEED seq|conc — the soak's requests (tests/soak/soak.sh):
# N seeded requests from SEED (completions of 1-350 words with a shared
# prefix, greedy or seeded at 0.9, some streamed, some with n=2 and logprobs,
# some with stop strings; chat with tools, tool_choice required or auto, and
# top_logprobs), one after another (seq) or all at once (conc). Prints one
# JSON line per request in request order, without ids and times, so two runs
# compare with cmp; a failed request prints its error.
import json, random, sys, threading, urllib.request

port, n, seed, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rnd = random.Random(seed)
W = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
base = [rnd.choice(W) for _ in range(150)]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}}}}]
bodies = []
for i in range(n):
    p = " ".join(base[:rnd.choice([0, 40, 100, 150])] + [rnd.choice(W) for _ in range(rnd.randint(1, 200))])
    b = {"prompt": p, "max_tokens": rnd.randint(1, 120), "ignore_eos": True}
    b.update(temperature=0.9, seed=i) if i % 3 else b.update(temperature=0)
    if i % 4 == 1: b["stream"] = True
    if i % 5 == 2: b.update(n=2, logprobs=2)
    if i % 5 == 3: b.update(stop=["a", "e"], ignore_eos=False)
    if i % 5 == 4:
        b = {"messages": [{"role": "user", "content": p[:200]}], "max_tokens": 40, "seed": i, "temperature": 0.8,
             "tools": TOOLS, "tool_choice": "required" if i % 2 else "auto", "logprobs": True, "top_logprobs": 2}
    bodies.append(b)


def strip(o):  # what differs between runs of the same request
    if isinstance(o, dict): return {k: strip(v) for k, v in o.items() if k not in ("id", "created", "system_fingerprint")}
    if isinstance(o, list): return [strip(v) for v in o]
    return o


out = [None] * n


def go(i):
    b = bodies[i]
    path = "chat/completions" if "messages" in b else "completions"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/{path}", data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            raw = r.read().decode()
    except Exception as e:
        out[i] = {"i": i, "error": str(e)[:200]}
        return
    if b.get("stream"):  # the text of each choice, whatever the order of their chunks
        text, done = {}, False
        for line in raw.splitlines():
            if line == "data: [DONE]": done = True
            elif line.startswith("data: "):
                for c in json.loads(line[6:]).get("choices", []):
                    text[c["index"]] = text.get(c["index"], "") + c.get("text", "")
        out[i] = {"i": i, "text": [text[k] for k in sorted(text)], "done": done}
    else:
        out[i] = {"i": i, "choices": strip(json.loads(raw)["choices"])}


if mode == "seq":
    for i in range(n): go(i)
else:
    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    [t.start() for t in ts]
    [t.join() for t in ts]
for o in out: print(json.dumps(o))
