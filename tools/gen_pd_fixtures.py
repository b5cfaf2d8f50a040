#!/usr/bin/env python3
"""gen_pd_fixtures.py - the logs of a prefill/decode (PD) deployment of SGLang, for the tests of
joining one request's two records (parse/pair/pair_pd.c, tests/cli/pd.sh).

What the servers do is taken from SGLang 0.5.23 (the wheel `pip download --no-deps` fetches into
~/.cache/logdiff/, see gen_rerender_fixtures.py):
  * the router (disaggregation/mini_lb.py, the gateway's PD router) posts one body to both servers,
    adding bootstrap_host, bootstrap_port and one random bootstrap_room, and no rid;
  * each server logs `Receive OpenAI` (ChatCompletionRequest.model_dump(exclude_none=True) of
    SGLang's own request model, so the bootstrap fields print where the model puts them),
    `Receive` and `Finish` (GenerateReqInput with every dataclass field, in the order io_struct.py
    declares them, read from the wheel with ast), each with its own rid (uuid4().hex) unless the
    client sent one;
  * the prefill server's scheduler stops after one token (max_new_tokens = 1 inside the scheduler,
    the logged sampling params keep the client's) and finishes with FINISH_LENGTH(length=0); the
    decode server's Finish holds the answer;
  * warm-up requests use the fake host 2.2.2.2 on both servers: two requests, never one;
  * with DP attention the decode server's requests overlap (routed_dp_rank), and its scheduler's
    lines carry `DPn TPm` in their prefix.
Prompts are the real Qwen2.5 template's through Python jinja2 (gen_demo_logs.qwen_prompt); lines
are written with ../shared/tools/sglang_render.py at --log-requests-level 3.

Planted: the prefill server of one request runs another build whose preprocessing drops the system
message (the template then puts its default one in), so the two servers' prompts and input ids
differ; one request's prefill record is missing (its log rotated away); the conversation of the
bundled demo (an interrupted answer sent back as an empty assistant turn) runs through the pair.

Writes testdata/pd/{prefill.log,decode.log,pods.log,expect.jsonl}; pods.log is both servers'
lines as `kubectl logs --prefix` shows two pods of one deployment, interleaved in time.
Usage: python3 tools/gen_pd_fixtures.py [--shared ../shared]
"""
import argparse
import ast
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "testdata", "pd")
HOST, PORT = "10.0.3.17", 8998
FAKE_HOST = "2.2.2.2"


def gri_fields(rr):
    """GenerateReqInput's fields and defaults, in declaration order (dataclasses.fields order)."""
    src = open(rr.sglang_file("io_struct.py", "sglang/srt/managers/io_struct.py"), encoding="utf-8").read()
    for node in ast.parse(src).body:
        if isinstance(node, ast.ClassDef) and node.name == "GenerateReqInput":
            out = []
            for s in node.body:
                if not isinstance(s, ast.AnnAssign):
                    continue
                v = s.value
                if isinstance(v, ast.Call):  # field(default=..., kw_only=True)
                    v = next(k.value for k in v.keywords if k.arg == "default")
                out.append((s.target.id, ast.literal_eval(v) if v is not None else None))
            return out
    raise SystemExit("GenerateReqInput not found in io_struct.py")


class World:
    def __init__(self, shared):
        sys.path.insert(0, os.path.join(shared, "tools"))
        sys.path.insert(0, HERE)
        import gen_demo_logs as demo
        import gen_rerender_fixtures as rr
        import sglang_render as sr
        demo.load_qwen(shared)
        self.demo, self.rr, self.sr = demo, rr, sr
        self.proto = demo.QWEN[1]
        self.fields = gri_fields(rr)
        self.rng = random.Random(20261202)
        self.lines = {"prefill": [], "decode": []}  # (seconds, text) per server

    def rid(self):
        return "%032x" % self.rng.getrandbits(128)

    def room(self):
        return self.rng.getrandbits(63)

    def openai_line(self, body):
        dump = self.proto.ChatCompletionRequest(**body).model_dump(exclude_none=True)
        return "Receive OpenAI: obj=" + self.sr.text_render(dump, self.sr.BIG)

    def gri(self, values):
        known = dict(self.fields)
        for k in values:
            assert k in known, k
        return self.sr.Record("GenerateReqInput", [(k, values.get(k, d)) for k, d in self.fields])

    def log(self, server, t, text):
        self.lines[server].append((t, "[2026-12-01 10:%02d:%02d] %s" % (t // 60, t % 60, text)))


def serve(w, server, t, body, prompt, output, finish, rid, dp_rank=None, t_end=None):
    """One server's three lines for one request; returns the facts of its record."""
    ids = w.demo.fake_ids(prompt)
    sp = {"temperature": body.get("temperature", 1.0), "max_new_tokens": body.get("max_tokens"),
          "top_p": 0.95}
    common = {"rid": rid, "input_ids": ids, "sampling_params": sp, "stream": body.get("stream", False),
              "return_text_in_logprobs": True, "logprob_start_len": -1, "top_logprobs_num": 0,
              "bootstrap_host": body.get("bootstrap_host"), "bootstrap_port": body.get("bootstrap_port"),
              "bootstrap_room": body.get("bootstrap_room"), "routed_dp_rank": dp_rank}
    if "messages" in body:
        w.log(server, t, w.openai_line(body))
    w.log(server, t, "Receive: obj=" + w.sr.text_render(w.gri(common), w.sr.BIG))
    out_ids = w.demo.fake_ids(output, 2000)
    out = {"text": output, "output_ids": out_ids, "meta_info": {
        "id": rid, "finish_reason": finish, "prompt_tokens": len(ids), "weight_version": "default",
        "num_retractions": 0, "completion_tokens": len(out_ids), "cached_tokens": 0,
        "e2e_latency": 0.8}}
    fin = dict(common, text=prompt)
    w.log(server, t_end if t_end is not None else t + 1,
          "Finish: obj=" + w.sr.text_render(w.gri(fin), w.sr.BIG) + ", out=" + w.sr.text_render(out, w.sr.BIG))
    return {"rid": rid, "output_chars": len(output), "finish": finish["type"]}


def routed(w, body):
    b = dict(body, bootstrap_host=HOST, bootstrap_port=PORT, bootstrap_room=w.room())
    return b


def pd_request(w, t, body, answer, finish=None, prefill_prompt=None, client_rid=None,
               with_prefill=True, dp_rank=None, t_end=None):
    """The router's request through both servers.  prefill_prompt: what a different prefill
    build made of the same body.  Returns the expected facts of the joined record."""
    body = routed(w, body)
    if client_rid:
        body["rid"] = client_rid
    prompt = w.demo.qwen_prompt(body["messages"], body.get("tools"))
    p_rid = client_rid or w.rid()
    d_rid = client_rid or w.rid()
    if with_prefill:
        pp = prefill_prompt if prefill_prompt is not None else prompt
        serve(w, "prefill", t, body, pp, answer[:3], {"type": "length", "length": 0}, p_rid)
    fact = serve(w, "decode", t, body, prompt, answer, finish or {"type": "stop", "matched": 151645},
                 d_rid, dp_rank, t_end)
    fact.update({"messages": len(body["messages"]), "peer": p_rid if with_prefill else None,
                 "joined_by": ("rid" if client_rid else "room") if with_prefill else None,
                 "differs": ["input_ids", "prompt"] if prefill_prompt is not None else [],
                 "verdict": "ok", "error_kinds": []})
    return fact


def warmup(w, t):
    """SGLang's server warm-up: /generate with the fake host, on each server alone."""
    facts = []
    for server in ("prefill", "decode"):
        body = {"bootstrap_host": FAKE_HOST, "bootstrap_port": None, "bootstrap_room": 0,
                "max_tokens": 8, "temperature": 0}
        rid = w.rid()
        f = serve(w, server, t, body, "The capital city of France is", " Paris.",
                  {"type": "length", "length": 0} if server == "prefill" else {"type": "stop", "matched": 151645},
                  rid)
        f.update({"peer": None, "joined_by": None, "differs": [], "warmup": True})
        facts.append(f)
    return facts


def story(w):
    demo = w.demo
    system = "You are CodePilot, an agent that edits a repository with the tools you are given."
    ask = ("Plan the refactoring of parse/pylit.c into three files, with the reasons, "
           "and list every function that moves.")
    partial = ("Here is the plan.\n\n1. **pylit_str.c** - string literals: `scan_string`, "
               "`decode_escape`, `utf8_put`.\n2. **pylit_num.c** - numbers: `scan_int`, ")
    base = {"model": "qwen2.5-coder-32b", "max_tokens": 2048, "stream": True, "temperature": 0.2}
    facts = warmup(w, 0)

    conv1 = [{"role": "system", "content": system},
             {"role": "user", "content": "What does `ld_pylit_parse` return when the line is cut?"}]
    facts.append(pd_request(w, 10, dict(base, messages=conv1),
                            "It returns `LD_ERR_TRUNCATED` with `err->offset` at the end."))

    conv2 = [{"role": "system", "content": system}, {"role": "user", "content": ask}]
    f = pd_request(w, 20, dict(base, messages=conv2), partial,
                   {"type": "abort", "message": "Request is disconnected from the client side (type 1)."})
    facts.append(f)
    conv3 = conv2 + [{"role": "assistant", "content": ""},
                     {"role": "user", "content": "Go on with step 2 and show me the new header."}]
    f = pd_request(w, 40, dict(base, messages=conv3),
                   "This is the very first message I see from you. Which file do you mean?")
    f.update({"verdict": "harness", "error_kinds": ["harness.empty_assistant", "harness.stale_assistant"]})
    facts.append(f)

    # planted: the prefill server's build drops the system message before templating
    conv4 = [{"role": "system", "content": "Answer in one sentence; cite the file."},
             {"role": "user", "content": "Where is the capture rejoined?"}]
    f = pd_request(w, 60, dict(base, messages=conv4), "In parse/capture/capture_rejoin.c.",
                   prefill_prompt=demo.qwen_prompt(conv4[1:]))
    f.update({"verdict": "template", "error_kinds": ["template.servers_differ"]})
    facts.append(f)

    # the client names the rid: both servers log it
    conv5 = [{"role": "user", "content": "Summarise: 日志里的请求 — \"quoted\" and 'single' \\ backslash 😀"}]
    facts.append(pd_request(w, 80, dict(base, messages=conv5, temperature=0.7, max_tokens=256),
                            "A request in the log, with quotes and a backslash.", client_rid="agent-turn-7"))

    # DP attention on the decode server: two requests overlap, on ranks 0 and 1
    conv6 = [{"role": "user", "content": "List the capture formats logdiff reads."}]
    conv7 = [{"role": "user", "content": "Which journald field marks a split line?"}]
    facts.append(pd_request(w, 100, dict(base, messages=conv6), "Docker, CRI, journald, syslog.",
                            dp_rank=0, t_end=104))
    facts.append(pd_request(w, 101, dict(base, messages=conv7), "_LINE_BREAK=line-max.",
                            dp_rank=1, t_end=102))
    w.lines["decode"].append((101, "[2026-12-01 10:01:41 DP0 TP0] Decode batch, #running-req: 2, #token: 812, token usage: 0.01, cuda graph: True, gen throughput (token/s): 88.31, #queue-req: 0"))
    w.lines["decode"].append((101, "[2026-12-01 10:01:41 DP1 TP4] Prefill batch, #new-seq: 1, #new-token: 1, #cached-token: 0, token usage: 0.01, #running-req: 1, #queue-req: 0"))

    # the prefill server's log of this one was rotated away
    conv8 = [{"role": "user", "content": "Is the prefill log complete?"}]
    f = pd_request(w, 120, dict(base, messages=conv8), "No: it was rotated.", with_prefill=False)
    f["alone"] = True
    facts.append(f)
    return facts


def write(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(l + "\n" for l in lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    w = World(args.shared)
    facts = story(w)
    os.makedirs(OUT, exist_ok=True)
    ordered = {s: [t for _, t in sorted(v, key=lambda x: x[0])] for s, v in w.lines.items()}
    write(os.path.join(OUT, "prefill.log"), ordered["prefill"])
    write(os.path.join(OUT, "decode.log"), ordered["decode"])
    pods = sorted([(t, i, "[pod/sglang-prefill-0/server] " + x) for i, (t, x) in enumerate(sorted(w.lines["prefill"], key=lambda x: x[0]))] +
                  [(t, i, "[pod/sglang-decode-0/server] " + x) for i, (t, x) in enumerate(sorted(w.lines["decode"], key=lambda x: x[0]))],
                  key=lambda x: (x[0], x[2].startswith("[pod/sglang-decode"), x[1]))
    write(os.path.join(OUT, "pods.log"), [x for _, _, x in pods])
    with open(os.path.join(OUT, "expect.jsonl"), "w", encoding="utf-8") as fh:
        for f in facts:
            fh.write(json.dumps(f, ensure_ascii=False, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
