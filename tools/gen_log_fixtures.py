#!/usr/bin/env python3
"""gen_log_fixtures.py - builds request-log fixtures for the pairer tests.

Request objects are built here in Python, rendered into log lines with the
functions of ../shared/tools/sglang_render.py (SGLang, every era / level /
mode of ../shared/docs/log-formats.md) or with the vLLM format strings quoted
in section 7 of that document, and written to testdata/logs/<name>.log.
testdata/logs/<name>.expect.json holds the facts a parser must find, computed
here from the Python objects (never from logdiff's output):

  {"file": ..., "lines": N, "request_lines": N, "skipped": N, "errors": N,
   "health_checks": N, "error_lines": [1-based line numbers], "cut_lines": [...],
   "requests": [{"rid", "sub_index", "engine", "n_messages", "prompt_chars",
                 "output_chars", "finish", "temperature", "max_tokens",
                 "n_input_ids", "n_output_ids", "prompt_tokens",
                 "completion_tokens", "truncated", "missing", "openai",
                 "unconfirmed", "ambiguous", "timestamp"}]}

prompt_chars / output_chars: Python len() of what the log shows (head + tail
when the logger cut the middle, the original length when abbreviated), null
when the log does not show the text.  Stdlib only; seeded, so the output is
reproducible.  Usage: tools/gen_log_fixtures.py [--shared DIR] [--out DIR]
"""

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BIG = 1 << 30

# ------------------------------------------------------------------ content

WORDS = ["alpha", "beta", "gamma", "delta", "it's", 'say "hi"', "back\\slash", "tab\there",
         "new\nline", "\u4f60\u597d", "caf\u00e9", "\U0001F600", "esc\x1b[0m", "nb\u00a0sp",
         "zw\u200bsp", "\u2028ls", "quote'and\"both"]


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def chatml(messages):
    out = []
    for m in messages:
        out.append("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m.get("content") or ""))
    return "".join(out) + "<|im_start|>assistant\n"


class Req:
    """One request and everything the logger will print about it."""

    def __init__(self, rng, rid, chat=True, long_prompt=False, long_output=False, n_msgs=None,
                 finish="stop"):
        self.rid = rid
        self.chat = chat
        n_msgs = n_msgs or rng.randint(1, 4)
        msgs = [{"role": "system", "content": "You are helpful. " + sentence(rng, 3)}]
        for i in range(n_msgs - 1):
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": sentence(rng, 6)})
        if msgs[-1]["role"] != "user":
            msgs.append({"role": "user", "content": sentence(rng, 5)})
        if long_prompt:
            msgs[-1]["content"] = "L" * 1500 + "\n" + sentence(rng, 4) + "M" * 1500
        self.messages = msgs
        self.prompt = chatml(msgs) if chat else sentence(rng, 12)
        self.input_ids = [rng.randint(0, 151000) for _ in range(rng.randint(5, 60))]
        self.temperature = rng.choice([0.0, 0.1, 0.7, 1.0, 1e-05])
        self.max_tokens = rng.choice([16, 64, 700, 4096])
        self.sp = {"temperature": self.temperature, "max_new_tokens": self.max_tokens,
                   "min_new_tokens": 0, "stop": None, "top_p": 0.95, "top_k": -1, "n": 1}
        self.output = ("O" * 2500 + sentence(rng, 3)) if long_output else sentence(rng, 7)
        self.output_ids = [rng.randint(0, 151000) for _ in range(rng.randint(1, 40))]
        if finish == "stop":
            self.finish = {"type": "stop", "matched": 151645}
        elif finish == "length":
            self.finish = {"type": "length", "length": len(self.output_ids)}
        else:
            self.finish = {"type": "abort", "message": "client disconnected"}
        self.stream = rng.choice([True, False])

    def openai(self):
        return {"model": "default", "messages": self.messages, "max_tokens": self.max_tokens,
                "n": 1, "stream": self.stream, "temperature": self.temperature}

    def out(self, rid=None):
        return {"text": self.output, "output_ids": self.output_ids, "meta_info": {
            "id": rid or self.rid, "finish_reason": self.finish, "prompt_tokens": len(self.input_ids),
            "weight_version": "default", "completion_tokens": len(self.output_ids),
            "cached_tokens": 0, "e2e_latency": 0.25}}


def gen_obj(req, era, finish, rid=None, text=None, ids=None, sp=None):
    """GenerateReqInput fields in the field order of the era (log-formats.md 4.1)."""
    if text is None:
        # chat requests: Receive has text=None; Finish of the newest builds has the decoded prompt
        text = req.prompt if (not req.chat or (finish and era == "current")) else None
    ids = req.input_ids if ids is None else ids
    sp = req.sp if sp is None else sp
    rid = req.rid if rid is None else rid
    if era == "current":
        return [("rid", rid), ("http_worker_ipc", None), ("text", text), ("input_ids", ids),
                ("input_embeds", None), ("image_data", None), ("video_data", None),
                ("audio_data", None), ("sampling_params", sp), ("return_logprob", False),
                ("stream", req.stream), ("lora_path", None), ("priority", None)]
    return [("text", text), ("input_ids", ids), ("input_embeds", None), ("image_data", None),
            ("sampling_params", sp), ("rid", rid), ("return_logprob", False),
            ("logprob_start_len", -1), ("stream", req.stream), ("modalities", []),
            ("lora_path", None)]


# ------------------------------------------------------------------ oracle

def level_of(R, era, level):
    if era == "legacy":
        return BIG, set(), set()
    return R.level_settings(era, level)


def shown_chars(value, limit, skipped, abbrev_min=None):
    """(chars the log shows, cut?) of a top-level string field."""
    if skipped or value is None:
        return None, skipped
    if abbrev_min is not None and len(value) >= abbrev_min:
        return len(value), True
    if len(value) > limit:
        return 2 * (limit // 2), True
    return len(value), False


class Fixture:
    """Collects lines and expectations for one file."""

    def __init__(self, R, name):
        self.R = R
        self.name = name
        self.lines = []
        self.kinds = []            # "req", "skip", "error", "hc" (a health check's Receive),
                                   # "hcf" (its Finish), "cut" (a request line cut for good:
                                   # read up to its last whole field, not an error)
        self.expect = []

    def add(self, line, kind):
        self.lines.append(line)
        self.kinds.append(kind)

    def noise(self, rng, prefix=""):
        self.add(rng.choice([
            prefix + 'INFO:     127.0.0.1:44442 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            prefix + "Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.00",
            prefix + "Decode batch, #running-req: 3, #token: 512, gen throughput (token/s): 88.1",
            "",
        ]), "skip")

    def render(self, req_obj, out=None, event="receive", era="current", level=2, fmt="text",
               prefix="", headers=None, abbreviate=None, abbreviate_min=0, ts=None):
        ns = argparse.Namespace(event=event, format=fmt, level=level, era=era,
                                skip_video_data=False, prefix=prefix, timestamp=ts,
                                abbreviate=abbreviate, abbreviate_min=abbreviate_min)
        req = {"obj": req_obj, "out": out, "headers": headers or {}}
        if event != "openai":
            req["class"] = "GenerateReqInput"
            req["obj"] = dict(req_obj) if isinstance(req_obj, list) else req_obj
        return self.R.render_lines(self.R.to_records(req), ns)[0]

    def write(self, outdir):
        with open(os.path.join(outdir, self.name + ".log"), "w", encoding="utf-8",
                  newline="\n") as fh:
            for line in self.lines:
                fh.write(line + "\n")
        doc = {
            "file": self.name + ".log",
            "generated_by": "tools/gen_log_fixtures.py",
            "lines": len(self.lines),
            "request_lines": sum(k in ("req", "hc", "hcf", "cut") for k in self.kinds),
            "skipped": self.kinds.count("skip"),
            "errors": self.kinds.count("error"),
            "health_checks": self.kinds.count("hc"),  # requests, not lines
            "error_lines": [i + 1 for i, k in enumerate(self.kinds) if k == "error"],
            "cut_lines": [i + 1 for i, k in enumerate(self.kinds) if k == "cut"],
            "requests": self.expect,
        }
        with open(os.path.join(outdir, self.name + ".expect.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, ensure_ascii=False)
            fh.write("\n")


def expect_sglang(req, era, level, fmt="text", receive=True, finish=True, openai=False,
                  sub=-1, rid=None, abbrev_min=None, ts=None, prompt_text="auto",
                  ambiguous=False):
    limit, obj_skip, out_skip = level_settings_cache(era, level)
    prompt = req.prompt if (not req.chat or (finish and era == "current")) else None
    if prompt_text != "auto":
        prompt = prompt_text
    pchars, pcut = shown_chars(prompt, limit, "text" in obj_skip, abbrev_min)
    ochars, ocut = (None, False)
    if finish:
        ochars, ocut = shown_chars(req.output, limit, "text" in out_skip, abbrev_min)
    missing = [p for p, seen in (("receive", receive), ("finish", finish)) if not seen]
    if era == "legacy":
        missing = []
    temp = None if "sampling_params" in obj_skip else req.temperature
    maxt = None if "sampling_params" in obj_skip else req.max_tokens
    n_msgs = len(req.messages) if openai else -1
    confirmed = None
    if openai:
        last = [m for m in req.messages if m["role"] == "user"][-1]["content"]
        if prompt is None or "text" in obj_skip:
            confirmed = None
        elif len(prompt) > limit:
            h = limit // 2
            confirmed = last in prompt[:h] or last in prompt[-h:] or last[-64:] in prompt[-h:]
        else:
            confirmed = last in prompt
    return {
        "rid": rid or req.rid, "sub_index": sub, "engine": "sglang", "n_messages": n_msgs,
        "prompt_chars": pchars, "output_chars": ochars,
        "finish": req.finish["type"] if finish else None,
        "temperature": temp, "max_tokens": maxt,
        "n_input_ids": None if "input_ids" in obj_skip else len(req.input_ids),
        "n_output_ids": (None if "output_ids" in out_skip else len(req.output_ids)) if finish else None,
        "prompt_tokens": len(req.input_ids) if finish else None,
        "completion_tokens": len(req.output_ids) if finish else None,
        "truncated": bool(pcut or ocut or "text" in obj_skip),
        "missing": missing, "openai": openai,
        "unconfirmed": bool(openai and confirmed is None),
        "ambiguous": bool(ambiguous or (openai and confirmed is False)),
        "timestamp": ts,
    }


_R = None


def level_settings_cache(era, level):
    return level_of(_R, era, level)


# ------------------------------------------------------------------ SGLang fixtures

def sglang_basic(R, rng, name, era, level, fmt="text", prefix="", ts=None, n=4, openai=False,
                 headers=None, long_prompt=True, abbreviate=None):
    fx = Fixture(R, name)
    reqs = [Req(rng, "%s-%02d" % (name[:12], i), chat=(i % 3 != 2), long_prompt=(long_prompt and i == 1),
                long_output=(long_prompt and i == 2)) for i in range(n)]
    jts = "2026-03-15T10:00:00.123456" if fmt == "json" else None
    for q in reqs:
        if openai and q.chat:
            fx.add(fx.render(q.openai(), event="openai", era=era, level=level, fmt=fmt,
                             prefix=prefix, headers=headers, ts=jts), "req")
        fx.noise(rng, prefix)
        if era != "legacy":
            fx.add(fx.render(gen_obj(q, era, False), event="receive", era=era, level=level,
                             fmt=fmt, prefix=prefix, headers=headers, ts=jts,
                             abbreviate=abbreviate, abbreviate_min=100), "req")
        fx.add(fx.render(gen_obj(q, era, True), q.out(), event="finish", era=era, level=level,
                         fmt=fmt, prefix=prefix, headers=headers, ts=jts,
                         abbreviate=abbreviate, abbreviate_min=100), "req")
        amin = 100 if abbreviate and level in (1, 2) else None
        fx.expect.append(expect_sglang(q, era, level, fmt, openai=(openai and q.chat),
                                       abbrev_min=amin, ts=ts if ts else jts))
    return fx


def sglang_interleaved(R, rng):
    """Concurrent requests, health checks, unpaired parts, ms prefixes."""
    fx = Fixture(R, "sglang-interleaved")
    pre = "[2026-01-02 03:04:05.678] "
    reqs = [Req(rng, "req%02d" % i, chat=True) for i in range(6)]
    hc = Req(rng, "HEALTH_CHECK_1772333945.9835517", chat=False)
    order = [("r", 0), ("r", 1), ("r", 2), ("f", 1), ("hr", 0), ("r", 3), ("f", 0), ("hf", 0),
             ("f", 3), ("f", 5), ("r", 4)]
    for kind, i in order:
        fx.noise(rng, "[2026-01-02 03:04:05 TP0] ")
        if kind in ("hr", "hf"):
            fin = kind == "hf"
            fx.add(fx.render(gen_obj(hc, "current", fin), hc.out() if fin else None,
                             event="finish" if fin else "receive", prefix=pre), "hcf" if fin else "hc")
            continue
        q = reqs[i]
        fin = kind == "f"
        fx.add(fx.render(gen_obj(q, "current", fin), q.out() if fin else None,
                         event="finish" if fin else "receive", prefix=pre), "req")
    for i, q in enumerate(reqs):
        rec = i in (0, 1, 2, 3, 4)
        fin = i in (0, 1, 3, 5)
        fx.expect.append(expect_sglang(q, "current", 2, receive=rec, finish=fin,
                                       ts="2026-01-02 03:04:05.678"))
    return fx


def sglang_openai_mismatch(R, rng):
    """A Receive OpenAI line followed by the Receive of a different request: the content check
    (a's last user message is not in b's payload) refuses the join, so a has no message array and
    is flagged ambiguous, and both OpenAI lines come out as OpenAI-only records."""
    fx = Fixture(R, "sglang-openai-mismatch")
    a, b = Req(rng, "oa-a", chat=True), Req(rng, "oa-b", chat=True)
    b.messages[-1]["content"] = "a message that only b has"
    b.prompt = chatml(b.messages)
    fx.add(fx.render(b.openai(), event="openai"), "req")
    fx.add(fx.render(gen_obj(a, "current", False)), "req")
    fx.add(fx.render(gen_obj(a, "current", True), a.out(), event="finish"), "req")
    fx.add(fx.render(a.openai(), event="openai", level=3), "req")   # never followed by a Receive
    e = expect_sglang(a, "current", 2, openai=False)
    e["ambiguous"] = True
    e["unconfirmed"] = False
    fx.expect.append(e)
    for other in (b, a):
        fx.expect.append({"rid": None, "sub_index": -1, "engine": "sglang",
                          "n_messages": len(other.messages), "missing": ["receive", "finish"],
                          "openai": True})
    return fx


def sglang_batch(R, rng):
    """A batch Receive (list rid) and an n>1 Receive (string rid expanded {rid}_{i})."""
    fx = Fixture(R, "sglang-batch")
    pre = "[2025-11-03 18:48:33] "
    subs = [Req(rng, "b%d" % i, chat=False) for i in range(3)]
    obj = gen_obj(subs[0], "current", False, rid=[s.rid for s in subs],
                  text=[s.prompt for s in subs], ids=[s.input_ids for s in subs],
                  sp=[s.sp for s in subs])
    fx.add(fx.render(obj, prefix=pre), "req")
    for i in (2, 0):
        s = subs[i]
        fx.add(fx.render(gen_obj(s, "current", True), s.out(), event="finish", prefix=pre), "req")
    for i, s in enumerate(subs):
        e = expect_sglang(s, "current", 2, finish=i != 1, sub=i, ts="2025-11-03 18:48:33")
        fx.expect.append(e)
    par = Req(rng, "par", chat=False)
    par.sp = dict(par.sp, n=2)
    fx.add(fx.render(gen_obj(par, "current", False), prefix=pre), "req")
    for i in range(2):
        fx.add(fx.render(gen_obj(par, "current", True, rid="par_%d" % i), par.out("par_%d" % i),
                         event="finish", prefix=pre), "req")
        fx.expect.append(expect_sglang(par, "current", 2, sub=i, rid="par_%d" % i,
                                       ts="2025-11-03 18:48:33"))
    return fx


def sglang_errors(R, rng):
    """Request lines cut in the middle between good lines: one cut for good after its
    first fields (read up to them), one that starts inside a record and a JSON one
    cut at its end (errors)."""
    fx = Fixture(R, "sglang-errors")
    pre = "[2025-08-04 11:51:41] "
    a, b, c = (Req(rng, x, chat=True) for x in ("ea", "eb", "ec"))
    fx.add(fx.render(gen_obj(a, "current", False), prefix=pre), "req")
    line = fx.render(gen_obj(b, "current", False), prefix=pre)
    fx.add(line[:len(line) // 2], "cut")                      # cut inside the object
    fx.noise(rng, pre)
    fx.add(fx.render(gen_obj(a, "current", True), a.out(), event="finish", prefix=pre), "req")
    fx.add(fx.render(gen_obj(b, "current", True), b.out(), event="finish", prefix=pre), "req")
    line = fx.render(gen_obj(c, "current", True), c.out(), event="finish", prefix=pre)
    fx.add(line[line.index("input_ids="):], "error")          # starts inside a record
    json_line = fx.render(gen_obj(c, "current", False), fmt="json", ts="2026-01-01T00:00:00")
    fx.add(json_line[:len(json_line) - 7], "error")           # JSON cut at the end
    fx.expect.append(expect_sglang(a, "current", 2, ts="2025-08-04 11:51:41"))
    e = expect_sglang(b, "current", 2, ts="2025-08-04 11:51:41")
    e["cut"] = True
    fx.expect.append(e)
    return fx


def shipper_prefixes(R, rng):
    fx = Fixture(R, "sglang-shipper-prefixes")
    pres = ["2025-05-14T17:45:10.901234567Z stdout F [2025-05-14 17:45:10] ",
            "2025-05-14 17:45:10.901 1647689 kserve.trace ",
            " ",
            "pod/sglang-0 [2025-05-14 17:45:11 DP0 TP3 EP3] "]
    tss = ["2025-05-14 17:45:10", "2025-05-14 17:45:10.901", None, "2025-05-14 17:45:11"]
    for i, (pre, ts) in enumerate(zip(pres, tss)):
        q = Req(rng, "ship%d" % i, chat=False)
        fx.add(fx.render(gen_obj(q, "current", False), prefix=pre), "req")
        fx.add(fx.render(gen_obj(q, "current", True), q.out(), event="finish", prefix=pre), "req")
        fx.expect.append(expect_sglang(q, "current", 2, ts=ts))
    return fx


# ------------------------------------------------------------------ vLLM fixtures

def sampling_params_repr(q, era):
    if era == "v0.3":
        return ("SamplingParams(n=1, best_of=1, presence_penalty=0.0, frequency_penalty=0.0, "
                "repetition_penalty=1.0, temperature=%r, top_p=1.0, top_k=-1, min_p=0.0, "
                "use_beam_search=False, length_penalty=1.0, early_stopping=False, stop=[], "
                "stop_token_ids=[], include_stop_str_in_output=False, ignore_eos=False, "
                "max_tokens=%d, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
                "spaces_between_special_tokens=True)" % (q.temperature, q.max_tokens))
    return ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
            "repetition_penalty=1.05, temperature=%r, top_p=0.8, top_k=20, min_p=0.0, seed=None, "
            "stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, "
            "ignore_eos=False, max_tokens=%d, min_tokens=0, logprobs=None, prompt_logprobs=None, "
            "skip_special_tokens=True, spaces_between_special_tokens=True, "
            "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)"
            % (q.temperature, q.max_tokens))


def vllm_fixture(R, rng, era):
    fx = Fixture(R, "vllm-" + era)
    pre = {"v0.3": "INFO 02-02 09:05:41 async_llm_engine.py:431] ",
           "v0.8": "INFO 04-10 03:35:45 [logger.py:39] ",
           "v0.9": "INFO 06-01 12:00:00 [logger.py:43] ",
           "v0.15": "(APIServer pid=90458) INFO 02-13 11:33:33 [logger.py:49] "}[era]
    ts = {"v0.3": "02-02 09:05:41", "v0.8": "04-10 03:35:45", "v0.9": "06-01 12:00:00",
          "v0.15": "02-13 11:33:33"}[era]
    outputs = era == "v0.15"
    for i in range(3):
        q = Req(rng, "chatcmpl-%s%d" % (era.replace(".", ""), i), chat=True)
        sp = sampling_params_repr(q, era)
        if era == "v0.3":
            line = "Received request %s: prompt: %r, prefix_pos: None,sampling params: %s, prompt token ids: %s, lora_request: None." % (q.rid, q.prompt, sp, q.input_ids)
        elif era == "v0.8":
            line = "Received request %s: prompt: %r, params: %s, prompt_token_ids: %s, lora_request: None, prompt_adapter_request: None." % (q.rid, q.prompt, sp, q.input_ids)
        elif era == "v0.9":
            line = "Received request %s: prompt: %r, params: %s, prompt_token_ids: %s, prompt_embeds shape: None, lora_request: None, prompt_adapter_request: None." % (q.rid, q.prompt, sp, q.input_ids)
        else:
            line = "Received request %s: params: %s, lora_request: None." % (q.rid, sp)
        fx.add(pre + line, "req")
        fx.add(pre.replace("logger.py", "async_llm.py") + "Added request %s." % q.rid, "skip")
        if outputs:
            fx.add(pre.replace("INFO", "DEBUG") + "Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: None." % (q.rid, q.prompt, q.input_ids), "req")
        done = outputs and i != 1
        if done:
            fx.add(pre + "Generated response %s (streaming delta): output: %r, output_token_ids: %s, finish_reason: None" % (q.rid, q.output[:3], q.output_ids[:1]), "req")
            fx.add(pre + "Generated response %s (streaming complete): output: %r, output_token_ids: %s, finish_reason: stop" % (q.rid, q.output, q.output_ids), "req")
        fx.expect.append({
            "rid": q.rid, "sub_index": -1, "engine": "vllm", "n_messages": -1,
            "prompt_chars": len(q.prompt) if (era != "v0.15" or outputs) else None,
            "output_chars": len(q.output) if done else None,
            "finish": "stop" if done else None, "temperature": q.temperature,
            "max_tokens": q.max_tokens, "n_input_ids": len(q.input_ids),
            "n_output_ids": len(q.output_ids) if done else None,
            "truncated": False, "missing": ["vllm_generated"] if outputs and not done else [],
            "openai": False, "unconfirmed": False, "ambiguous": False, "timestamp": ts})
    return fx


# ------------------------------------------------------------------ main

def main():
    global _R
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"),
                    help="the shared/ directory holding tools/sglang_render.py")
    ap.add_argument("--out", default=os.path.join(ROOT, "testdata", "logs"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as R
    _R = R
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(20260315)
    fixtures = [
        sglang_basic(R, rng, "sglang-legacy-inout", "legacy", 0, prefix=" ", long_prompt=False),
        sglang_basic(R, rng, "sglang-default2048", "default2048", 0,
                     prefix="[2025-01-10 10:00:00] ", ts="2025-01-10 10:00:00"),
        sglang_basic(R, rng, "sglang-two-level-0", "two-level", 0,
                     prefix="[2025-02-03 17:53:04 TP0] ", ts="2025-02-03 17:53:04"),
        sglang_basic(R, rng, "sglang-two-level-1", "two-level", 1, prefix="[17:53:04 TP0] ",
                     ts="17:53:04"),
        sglang_basic(R, rng, "sglang-three-level-0", "three-level", 0,
                     prefix="[2025-04-01 08:00:00] ", ts="2025-04-01 08:00:00"),
        sglang_basic(R, rng, "sglang-three-level-1", "three-level", 1,
                     prefix="[2025-04-01 08:00:00] ", ts="2025-04-01 08:00:00"),
        sglang_basic(R, rng, "sglang-three-level-2", "three-level", 2,
                     prefix="[2025-04-01 08:00:00] ", ts="2025-04-01 08:00:00"),
        sglang_basic(R, rng, "sglang-current-0", "current", 0),
        sglang_basic(R, rng, "sglang-current-1", "current", 1,
                     prefix="[2026-02-01 00:00:01.250] ", ts="2026-02-01 00:00:01.250"),
        sglang_basic(R, rng, "sglang-current-2-openai", "current", 2, openai=True,
                     headers={"x-smg-routing-key": "abc"}),
        sglang_basic(R, rng, "sglang-current-3-openai", "current", 3, openai=True,
                     prefix="[2026-03-20 12:00:00 DP1 TP2] ", ts="2026-03-20 12:00:00"),
        sglang_basic(R, rng, "sglang-json-2", "current", 2, fmt="json", openai=True),
        sglang_basic(R, rng, "sglang-json-0", "current", 0, fmt="json"),
        sglang_basic(R, rng, "sglang-abbrev-2", "current", 2, abbreviate="text"),
        sglang_interleaved(R, rng),
        sglang_openai_mismatch(R, rng),
        sglang_batch(R, rng),
        sglang_errors(R, rng),
        shipper_prefixes(R, rng),
    ] + [vllm_fixture(R, rng, era) for era in ("v0.3", "v0.8", "v0.9", "v0.15")]
    for fx in fixtures:
        fx.write(args.out)
    print("wrote %d fixtures to %s" % (len(fixtures), args.out))


if __name__ == "__main__":
    main()
