#!/usr/bin/env python3
"""hybrid_req.py — the client of test_serve_hybrid.sh (real HTTP, one
connection per request, stdlib only).

  hybrid_req.py spec KIND OUT            write the requests of KIND as JSON
  hybrid_req.py run PORT seq|par SPEC OUT  send them one after another or all
                                         at once; write [{text, cached, err}]
  hybrid_req.py same A B [FIRST]         exit 0 when the texts of A and B (the
                                         first FIRST of them) are equal, else
                                         name the first that differs

KIND: many (64 seeded requests, prompts of 20..220 token ids), prefix (a
150-token prompt; the same again; one sharing 100 tokens; one sharing 129; one
extending the first with 40 more tokens, as a chat's next turn does), fresh
(another 150-token prompt twice), p100 and p150 (prefix's first prompt cut to
100 tokens, and whole).
"""
import json
import sys
import threading
import urllib.request


def ids(seed, n):
    s, out = seed * 7919 + 1000, []
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((s >> 33) % 3000 + 10)
    return out


def spec(kind):
    if kind == "many":
        return [{"prompt": ids(i, 20 + (i * 37) % 200), "max_tokens": 24, "seed": 100 + i} for i in range(64)]
    if kind == "fresh":
        q = ids(600, 150)
        return [{"prompt": q, "max_tokens": 12, "seed": 3}, {"prompt": q, "max_tokens": 12, "seed": 3}]
    p = ids(500, 150)
    if kind in ("p100", "p150"):  # the first prompt of "prefix", cut to 100 tokens or whole
        return [{"prompt": p[:int(kind[1:])], "max_tokens": 12, "seed": 7}]
    return [{"prompt": q, "max_tokens": 12, "seed": 7 + i} for i, q in enumerate(
        [p, p, p[:100] + ids(501, 70), p[:129] + ids(502, 1), p + ids(503, 40)])]


def one(port, r, out, i):
    body = dict(r, temperature=0.9, ignore_eos=True)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as f:
            d = json.load(f)
        det = d["usage"].get("prompt_tokens_details") or {}
        out[i] = {"text": d["choices"][0]["text"], "cached": det.get("cached_tokens", 0), "err": None}
    except Exception as e:  # noqa: BLE001 - reported, compared as a failure
        out[i] = {"text": None, "cached": 0, "err": str(e)}


def run(port, mode, reqs):
    out = [None] * len(reqs)
    if mode == "seq":
        for i, r in enumerate(reqs):
            one(port, r, out, i)
    else:
        ts = [threading.Thread(target=one, args=(port, r, out, i)) for i, r in enumerate(reqs)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    return out


def main(a):
    if a[0] == "spec":
        json.dump(spec(a[1]), open(a[2], "w"))
    elif a[0] == "run":
        json.dump(run(a[1], a[2], json.load(open(a[3]))), open(a[4], "w"))
    elif a[0] == "same":
        x, y = json.load(open(a[1])), json.load(open(a[2]))
        n = int(a[3]) if len(a) > 3 else len(x)
        for i in range(n):
            if x[i]["err"] or y[i]["err"] or x[i]["text"] != y[i]["text"]:
                print(f"request {i} differs: {x[i]} vs {y[i]}")
                return 1
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
