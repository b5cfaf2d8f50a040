#!/usr/bin/env python3
"""gen_sglang_logger_fixtures.py - request logs written by SGLang's own request logger, for the
differential test of logdiff's verdicts (tests/cli/sglang_logger.sh).

The lines are formatted by SGLang's code, not by ours: `sglang/srt/utils/request_logger.py` and
`sglang/srt/utils/log_utils.py` of the sglang wheel (version SGLANG below, fetched with
`pip download --no-deps` into ~/.cache/logdiff/, see gen_rerender_fixtures.py) are loaded as they
are, with what they import from the rest of the server stubbed in sys.modules:
  * sglang.srt.runtime_context: the server's published config, watermarking off (a server without
    --enable-watermark: no field is redacted);
  * sglang.srt.sampling.watermarking.core: its two field-name sets and an identity redactor
    (never called with watermarking off);
  * torch.distributed (log_utils asks for the rank only for file targets).
sglang/srt/environ.py is loaded as it is (standard library only).  The objects logged are
SGLang's own: the pydantic ChatCompletionRequest of protocol.py, and GenerateReqInput compiled
from its class definition in io_struct.py (the module itself imports the whole runtime).
The clock is pinned (a logging filter sets each record's time; log_json's datetime is replaced
by one that returns the same clock) so that the fixtures are reproducible.

What the server does around the logger is mirrored from the same wheel:
  * serving_base.handle_request logs `Receive OpenAI` (log_openai_received_request) only at
    --log-requests-level >= 2, before the request is converted;
  * serving_chat passes a text-only chat request to the tokenizer manager as input_ids; the
    tokenizer manager logs `Receive` (log_received_request, which at level >= 2 then sets
    obj.text to the decoded ids: our tokenizer's decode gives back the rendered prompt) and
    `Finish` (log_finished_request) when the request is done;
  * a client that disconnects ends the request without `Finish` (tokenizer_manager raises
    "Request is disconnected from the client side"); a request rejected after conversion (an
    input longer than the context) has `Receive OpenAI` only; an aborted request (/abort_request)
    finishes with FINISH_ABORT.
Prompts are the real Qwen2.5 template's through Python jinja2 with SGLang's message processing
(gen_demo_logs.qwen_prompt); token ids are GPT-2's by HF tokenizers (the vocabulary at hand in
../shared; the logger decodes them with it at level >= 2, as the server does).

Writes testdata/sglang-logger/level{1,2,3}-{text,json}.log and expect.json: for each log, each
request's rid with the verdict and error finding kinds it was built for, and under "tokenizer"
what `diff --tokenizer ggml-vocab-gpt-2.gguf` must give where that differs.
Usage: python3 tools/gen_sglang_logger_fixtures.py [--shared ../shared]
"""
import __future__
import argparse
import ast
import dataclasses
import datetime
import io
import json
import logging
import os
import random
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "testdata", "sglang-logger")
CLOCK = [datetime.datetime(2026, 12, 1, 9, 30, 0)]


def stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


def load_logger(rr):
    """SGLang's request_logger module, loaded with its server imports stubbed."""
    for name in ("sglang", "sglang.srt", "sglang.srt.utils", "sglang.srt.sampling",
                 "sglang.srt.sampling.watermarking"):
        if name not in sys.modules or not hasattr(sys.modules[name], "__path__"):
            stub(name).__path__ = []
    features = types.SimpleNamespace(enable_watermark=False)
    ctx = types.SimpleNamespace(is_config_namespace_published=lambda name: True)
    stub("sglang.srt.runtime_context", get_context=lambda: ctx,
         get_exec=lambda: types.SimpleNamespace(features=features))
    stub("sglang.srt.sampling.watermarking.core",
         WATERMARK_CONTAINER_FIELD_NAMES=frozenset({"watermark", "sampling_params",
                                                    "preferred_sampling_params"}),
         WATERMARK_SECRET_FIELD_NAMES=frozenset({"watermark_key", "watermark_key_b",
                                                 "watermark_config"}),
         redact_watermark_secrets=lambda data, **kw: data)
    stub("torch")
    stub("torch.distributed", is_initialized=lambda: False, get_rank=lambda: 0)
    sys.modules["torch"].distributed = sys.modules["torch.distributed"]
    rr.load_module("sglang.srt.environ", rr.sglang_file("environ.py", "sglang/srt/environ.py"))
    lu = rr.load_module("sglang.srt.utils.log_utils",
                        rr.sglang_file("log_utils.py", "sglang/srt/utils/log_utils.py"))

    class PinnedDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return CLOCK[0]
    lu.datetime = PinnedDatetime
    return rr.load_module("sglang.srt.utils.request_logger", rr.sglang_file(
        "request_logger.py", "sglang/srt/utils/request_logger.py"))


def generate_req_input_class(rr):
    """GenerateReqInput as io_struct.py defines it: its class statement compiled alone (with
    `from __future__ import annotations`, as the module has it, so no annotation is evaluated)."""
    path = rr.sglang_file("io_struct.py", "sglang/srt/managers/io_struct.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GenerateReqInput")
    code = compile(ast.Module(body=[cls], type_ignores=[]), path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    mod = stub("sglang.srt.managers.io_struct", dataclass=dataclasses.dataclass,
               field=dataclasses.field)
    exec(code, mod.__dict__)
    return mod.GenerateReqInput


class Gpt2:
    """The tokenizer the server and the logger use: GPT-2's, by HF tokenizers (as
    gen_tokcheck_fixtures.py loads it).  Its byte-level decode gives a prompt back whole."""
    def __init__(self, shared):
        import gen_tokcheck_fixtures as tc
        self.tok = tc.load_gpt2(shared)

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids, skip_special_tokens=False):
        return self.tok.decode(ids, skip_special_tokens=skip_special_tokens)


class Server:
    """One SGLang server's request logging at one level and format."""
    def __init__(self, w, level, fmt):
        self.w, self.level, self.fmt = w, level, fmt
        self.buf = io.StringIO()
        self.log = w.rl.RequestLogger(log_requests=True, log_requests_level=level,
                                      log_requests_format=fmt, log_requests_target=None)
        for target in self.log.targets:
            for h in target.handlers:
                h.setStream(self.buf)
                h.filters[:] = [self.pin]
        self.expect = {}

    @staticmethod
    def pin(record):
        record.created = CLOCK[0].replace(tzinfo=datetime.timezone.utc).timestamp()
        record.msecs = 0
        return True

    def openai(self, body):
        """serving_base.handle_request: the OpenAI body, before conversion (level >= 2)."""
        req = self.w.proto.ChatCompletionRequest(**body)
        if self.log.log_requests and self.log.log_requests_level >= 2:
            self.log.log_openai_received_request(req)
        return req

    def receive(self, req, rid, prompt):
        ids = self.w.tok.encode(prompt)
        sp = {"temperature": req.temperature, "max_new_tokens": req.max_tokens,
              "skip_special_tokens": True}
        obj = self.w.GRI(input_ids=ids, sampling_params=sp, return_logprob=False,
                         logprob_start_len=-1, top_logprobs_num=0, stream=req.stream,
                         return_text_in_logprobs=True, rid=rid)
        self.log.log_received_request(obj, self.w.tok)
        assert self.level < 2 or obj.text == prompt
        return obj

    def finish(self, obj, output, finish_reason):
        out_ids = self.w.tok.encode(output)
        out = {"text": output, "output_ids": out_ids, "meta_info": {
            "id": obj.rid, "finish_reason": finish_reason, "prompt_tokens": len(obj.input_ids),
            "weight_version": "default", "completion_tokens": len(out_ids), "cached_tokens": 0,
            "e2e_latency": 1.25}}
        self.log.log_finished_request(obj, out)

    def lines(self):
        return self.buf.getvalue()


class World:
    def __init__(self, shared):
        sys.path.insert(0, os.path.join(shared, "tools"))
        sys.path.insert(0, HERE)
        import gen_demo_logs as demo
        import gen_rerender_fixtures as rr
        demo.load_qwen(shared)
        self.demo, self.rr = demo, rr
        self.proto = demo.QWEN[1]
        self.rl = load_logger(rr)
        self.GRI = generate_req_input_class(rr)
        self.tok = Gpt2(shared)
        self.rng = random.Random(20261202)

    def rid(self):
        return "%032x" % self.rng.getrandbits(128)


def tick(seconds=1):
    CLOCK[0] += datetime.timedelta(seconds=seconds)


STOP = {"type": "stop", "matched": 151645}


def expect(srv, rid, verdict, errors=(), at=None, tok_at=None):
    """What this request was built to get, at each level: `at` maps a level to (verdict, errors)
    where the level changes what the log can show; `tok_at` the same for `diff --tokenizer`
    (GPT-2's), where the input ids give back a prompt the logger cut."""
    v, e = (at or {}).get(srv.level, (verdict, list(errors)))
    srv.expect[rid] = {"verdict": v, "errors": sorted(e)}
    if tok_at and srv.level in tok_at:
        tv, te = tok_at[srv.level]
        srv.expect[rid]["tokenizer"] = {"verdict": tv, "errors": sorted(te)}


# Levels 0 and 1 log neither the prompt nor the output nor (no Receive OpenAI) the messages.
BLIND = (("log", ["log.truncated"]))


def served(srv, body, output, verdict="ok", errors=(), at=None, prompt_msgs=None,
           finish=STOP, tok_at=None):
    """One request served whole: Receive OpenAI, Receive, Finish.  prompt_msgs: the messages
    the server's preprocessing actually templated (a planted fault), default all."""
    rid = srv.w.rid()
    req = srv.openai(body)
    prompt = srv.w.demo.qwen_prompt(prompt_msgs if prompt_msgs is not None else body["messages"],
                                    body.get("tools"))
    tick()
    obj = srv.receive(req, rid, prompt)
    tick(2)
    srv.finish(obj, output, finish)
    tick()
    at = dict(at or {})
    at.setdefault(1, BLIND)
    expect(srv, rid, verdict, errors, at, tok_at)
    return obj


BASE = {"model": "qwen2.5-coder-32b", "max_tokens": 1024, "temperature": 0.3}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city, today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def paragraph(topic, n):
    """n characters of prose about `topic`, distinct per topic (no chance matches)."""
    words = []
    r = random.Random(topic)
    vocab = ["the", "log", "prompt", "server", "kernel", "token", "batch", "cache", "layer",
             "request", "turn", "agent", "tool", "result", "answer", "template", "message"]
    while len(" ".join(words)) < n:
        words.append(r.choice(vocab) + str(r.randrange(1000)))
    return (topic + ": " + " ".join(words))[:n]


def healthy(srv):
    served(srv, dict(BASE, messages=[
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Which finish reason marks a request cut by max_tokens?"}]),
        "`length`: the request reached max_tokens.")


def tool_calls_unicode(srv):
    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(
                {"city": "Tromsø — 北京 😀"}, ensure_ascii=False)}}
    msgs = [{"role": "user", "content": "Weather in Tromsø and 北京? Answer «briefly» 😀"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0",
             "content": json.dumps({"sky": "snø ❄", "temp_c": -3}, ensure_ascii=False)}]
    served(srv, dict(BASE, messages=msgs, tools=TOOLS), "Snø ❄ in Tromsø, −3 °C.")


def concurrent(srv):
    """Two requests in flight at once: A's and B's lines interleave, B finishes first."""
    bodies = [dict(BASE, messages=[{"role": "user", "content": "First of two: name a prime."}]),
              dict(BASE, messages=[{"role": "user", "content": "Second of two: name a colour."}])]
    rids = [srv.w.rid(), srv.w.rid()]
    objs = []
    for body, rid in zip(bodies, rids):
        req = srv.openai(body)
        tick()
        objs.append(srv.receive(req, rid, srv.w.demo.qwen_prompt(body["messages"])))
        tick()
    srv.finish(objs[1], "Teal.", STOP)
    tick()
    srv.finish(objs[0], "Seven.", STOP)
    tick()
    for rid in rids:
        expect(srv, rid, "ok", at={1: BLIND})


def disconnect_then_empty_turn(srv):
    """A client disconnect: Receive OpenAI and Receive, then no Finish; the harness then sends
    the lost answer back as an empty assistant turn (seen only when the answer was logged:
    here it never was, so the empty turn is all there is)."""
    ask = [{"role": "user", "content": "Write the migration plan for the log store."}]
    rid = srv.w.rid()
    req = srv.openai(dict(BASE, messages=ask, stream=True))
    tick()
    srv.receive(req, rid, srv.w.demo.qwen_prompt(ask))
    tick(5)
    expect(srv, rid, "log", ["log.unpaired"], at={1: ("log", ["log.truncated", "log.unpaired"])})
    again = ask + [{"role": "assistant", "content": ""},
                   {"role": "user", "content": "Go on with the plan."}]
    served(srv, dict(BASE, messages=again), "Which plan? This is the first message I see.",
           "harness", ["harness.empty_assistant"])


def rejected(srv):
    """Rejected after conversion (input longer than the context): Receive OpenAI only."""
    body = dict(BASE, messages=[{"role": "user", "content": paragraph("too long", 600)}])
    srv.openai(body)
    tick()
    if srv.level >= 2:
        srv.expect["openai@%d" % len(srv.expect)] = {"verdict": "log", "errors": ["log.unpaired"],
                                                     "openai_only": True}


def aborted_then_resent(srv):
    """/abort_request: Finish with FINISH_ABORT and the partial answer; the harness sends the
    partial answer back as it was, which is right."""
    ask = [{"role": "user", "content": "List the three parts of a request record."}]
    partial = "1. Receive OpenAI, with the message array; 2. Receive"
    served(srv, dict(BASE, messages=ask), partial,
           finish={"type": "abort", "message": "Abort before prefill"})
    again = ask + [{"role": "assistant", "content": partial},
                   {"role": "user", "content": "And the third?"}]
    served(srv, dict(BASE, messages=again), "3. Finish, with the templated prompt and output.")


def long_conversation(srv, drop_hidden, size, ids_whole):
    """A long system prompt, a short exchange, a long last question.  At level 2 the logger keeps
    1024 characters from each end of the prompt: the system prompt runs into the cut, the last
    question runs out of it, and the short exchange lies wholly inside it, so the log cannot say
    whether the template kept it.  drop_hidden: the server's preprocessing really drops it.
    ids_whole: the prompt is short enough in tokens (at most 2048) for level 2 to keep its input
    ids whole, so that `diff --tokenizer` decodes the whole prompt and decides."""
    system = paragraph("system rules", size)
    mid_q = "Short question in the middle: which port does the router use?"
    mid_a = "The router listens on 8998."
    last = paragraph("last question", size)
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": mid_q},
            {"role": "assistant", "content": mid_a}, {"role": "user", "content": last}]
    prompt_msgs = [msgs[0], msgs[3]] if drop_hidden else None
    hidden = ["log.message_hidden"] * 2  # the user's question and the answer
    decided = ("template", ["template.dropped_message"] * 2) if drop_hidden else ("ok", [])
    at = {2: ("log", hidden), 3: decided}
    tok_at = {2: decided if ids_whole else ("log", hidden), 3: decided}
    obj = served(srv, dict(BASE, messages=msgs), "Noted.", "ok", at=at, prompt_msgs=prompt_msgs,
                 tok_at=tok_at)
    assert (len(obj.input_ids) <= 2048) == ids_whole, len(obj.input_ids)


def long_visible_ends(srv):
    """Two long messages only: the cut lies inside them, every message is seen in part, and
    nothing is hidden: ok at every level that logs the prompt."""
    msgs = [{"role": "system", "content": paragraph("operator notes", 2600)},
            {"role": "user", "content": paragraph("the user's report", 2600)}]
    served(srv, dict(BASE, messages=msgs), "Thanks, read.")


SCENARIOS = [healthy, tool_calls_unicode, concurrent, disconnect_then_empty_turn, rejected,
             aborted_then_resent,
             lambda s: long_conversation(s, False, 5000, False),
             lambda s: long_conversation(s, True, 5000, False),
             lambda s: long_conversation(s, False, 1500, True),
             lambda s: long_conversation(s, True, 1500, True), long_visible_ends]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    w = World(args.shared)
    os.makedirs(OUT, exist_ok=True)
    want = {"sglang": w.rr.SGLANG}
    for level in (1, 2, 3):
        for fmt in ("text", "json"):
            CLOCK[0] = datetime.datetime(2026, 12, 1, 9, 30, 0)
            w.rng = random.Random("%d-%s" % (level, fmt))
            srv = Server(w, level, fmt)
            for scenario in SCENARIOS:
                scenario(srv)
            name = "level%d-%s.log" % (level, fmt)
            with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="\n") as fh:
                fh.write(srv.lines())
            want[name] = srv.expect
    with open(os.path.join(OUT, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump(want, fh, ensure_ascii=False, indent=1, sort_keys=True)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
