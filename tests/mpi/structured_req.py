#!/usr/bin/env python3
# structured_req.py — the constrained requests of test_serve_structured_parallel.sh:
# seeded json_schema (response_format) and guided_regex completions and chat
# requests with tool_choice "required", 4 one after another then 8 at once
# (2 streamed), against PORT; prints one JSON line per request (text or tool
# calls without their random ids, and finish reason), in a fixed order, so two
# runs compare with cmp.
# With --validate FILE: checks every output of FILE that finished ("stop", or
# "tool_calls" for the tool requests) parses and validates (schema, the tool's
# arguments) or matches in full (regex); prints a count line and exits non-zero
# on a failure or when fewer than half finished. With EA_THINK_FIRST set, the chat
# requests first say that text (see THINK below).
import json, re, sys, threading, urllib.request

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "ok": {"type": "boolean"},
    "tag": {"enum": ["red", "green", "blue"]},
    "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 3}},
    "required": ["name", "age", "ok", "tag", "ids"], "additionalProperties": False}
REGEX = r"[a-z]{3,8}-[0-9]{2,4}(\.[a-z]{2})?"
TOOLS = [{"type": "function", "function": {"name": "record", "parameters": SCHEMA}},
         {"type": "function", "function": {"name": "ping"}}]
KINDS = ("schema", "regex", "tool")
# EA_THINK_FIRST: the chat requests first say this text (the test hook; it ends with
# </think>), so a reasoning model's grammar starts after it (reasoning first)
THINK = __import__("os").environ.get("EA_THINK_FIRST")


def kind(i):
    return KINDS[i % 3]


def body(i):
    b = {"max_tokens": 80, "temperature": 0.9, "seed": 100 + i}
    if kind(i) == "tool":
        b.update(messages=[{"role": "user", "content": f"Call a tool, request {i}."}], tools=TOOLS, tool_choice="required")
        if THINK: b.update(eaas_test_forced_text=THINK, max_tokens=120)
    else:
        b["prompt"] = f"Constrained request number {i}:"
    if kind(i) == "schema":
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    if kind(i) == "regex":
        b["guided_regex"] = REGEX
    if i % 5 == 4:
        b["stream"] = True
    return b


def request(port, i):
    b = body(i)
    path = "chat/completions" if kind(i) == "tool" else "completions"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/{path}", data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            raw = r.read().decode()
    except Exception as e:  # an HTTP error: its body, so the diff shows it
        return {"i": i, "error": str(e) + " " + (e.read().decode() if hasattr(e, "read") else "")}
    out = {"i": i, "kind": kind(i)}
    if not b.get("stream"):
        c = json.loads(raw)["choices"][0]
        if kind(i) == "tool":
            m = c["message"]
            out["text"] = m.get("content") or ""
            out["calls"] = [[t["function"]["name"], t["function"]["arguments"]] for t in m.get("tool_calls") or []]
        else:
            out["text"] = c["text"]
        out["finish"] = c["finish_reason"]
        return out
    text, finish, calls = "", None, {}
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for c in json.loads(line[6:]).get("choices", []):
                d = c.get("delta", {})
                text += c.get("text", "") + (d.get("content") or "")
                for t in d.get("tool_calls") or []:
                    f = calls.setdefault(t["index"], ["", ""])
                    f[0] += t.get("function", {}).get("name") or ""
                    f[1] += t.get("function", {}).get("arguments") or ""
                finish = c.get("finish_reason") or finish
    out.update(text=text, finish=finish, stream=True)
    if kind(i) == "tool":
        out["calls"] = [calls[k] for k in sorted(calls)]
    return out


def run(port):
    out = [request(port, i) for i in range(4)]
    rest = [None] * 8
    def one(k):
        rest[k] = request(port, 4 + k)
    ts = [threading.Thread(target=one, args=(k,)) for k in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    for o in out + rest: print(json.dumps(o, sort_keys=True))


def valid(v):
    if not isinstance(v, dict) or set(v) != {"name", "age", "ok", "tag", "ids"}: return False
    return (isinstance(v["name"], str) and len(v["name"]) <= 8 and isinstance(v["age"], int)
            and not isinstance(v["age"], bool) and 0 <= v["age"] <= 120 and isinstance(v["ok"], bool)
            and v["tag"] in ("red", "green", "blue") and isinstance(v["ids"], list) and len(v["ids"]) <= 3
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 99 for x in v["ids"]))


def validate(path):
    n = finished = good = 0
    for line in open(path):
        o = json.loads(line)
        n += 1
        if "error" in o:
            print("error:", o, file=sys.stderr); continue
        if o["finish"] != ("tool_calls" if o["kind"] == "tool" else "stop"): continue
        finished += 1
        try:
            if o["kind"] == "schema":
                ok = valid(json.loads(o["text"]))
            elif o["kind"] == "tool":
                ok = len(o["calls"]) >= 1 and all(
                    valid(json.loads(a)) if name == "record" else (name == "ping" and json.loads(a) == {})
                    for name, a in o["calls"])
            else:
                ok = re.fullmatch(REGEX, o["text"]) is not None
        except ValueError:
            ok = False
        good += ok
        if not ok: print("invalid:", o, file=sys.stderr)
    print(f"{n} outputs, {finished} finished, {good} of them valid")
    sys.exit(0 if n == 12 and good == finished and finished * 2 >= n else 1)


if __name__ == "__main__":
    if sys.argv[1] == "--validate": validate(sys.argv[2])
    else: run(int(sys.argv[1]))
