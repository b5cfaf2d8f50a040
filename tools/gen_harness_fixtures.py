#!/usr/bin/env python3
"""gen_harness_fixtures.py - SGLang request logs for the harness / conversation
checks (replay/analysis/harness.c, replay/analysis/conv.c) and the findings they must give.

Each fixture is one or more testdata/replay/harness/<name>*.log files, rendered
line by line with ../shared/tools/sglang_render.py exactly as SGLang's request
logger writes them (current era; `Receive OpenAI`, `Receive`, `Finish`), and
testdata/replay/harness/<name>.expect.json:

  {"files": ["<name>.log", ...],           # read in this order, as one run
   "generated_by": "tools/gen_harness_fixtures.py",
   "requests": [{"rid", "kinds": [finding kinds, sorted, unique],
                 "conversation": label (requests with the same label share a
                                 conversation id, different labels differ) or null,
                 "related": {kind: rid}}],   # related_rid the finding must name
   "errors": [{"file", "line", "kinds"}]}     # LD_REQ_ERROR records

The kinds are decided here from how each request was built (which message
was emptied, cut, edited; which line was left out; which output loops;
which field the logger level drops), never from logdiff's output.
Stdlib only; deterministic.  Usage: tools/gen_harness_fixtures.py [--shared DIR] [--out DIR]
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PREFIX = "[2026-03-20 12:00:00] "
# How lines are written: text mode with the timestamp prefix by default; main() also writes
# some fixtures again in JSON mode and without a prefix (same requests, same expectations).
VARIANT = {"format": "text", "prefix": PREFIX, "suffix": ""}
SYSTEM = "You are a coding agent. Use the tools to inspect and edit files; answer briefly."
LIMIT2 = 2048

K_EMPTY = "harness.empty_assistant"
K_STALE = "harness.stale_assistant"
K_ORPHAN = "harness.orphan_tool"
K_TRUNC = "log.truncated"
K_UNPAIRED = "log.unpaired"
K_PARSE = "log.parse_error"
K_CUT = "log.capture_cut"
K_REP = "sampling.repetition"
K_DROPPED = "template.dropped_message"


def chatml(messages):
    """ChatML as Qwen2.5's template writes it, tool calls included: each call as
    <tool_call>{"name": ..., "arguments": <tojson of the arguments>}</tool_call> (a string
    argument is JSON-encoded again, as `tojson` does), so every part reaches the prompt."""
    out = []
    for m in messages:
        body = m.get("content") or ""
        for c in m.get("tool_calls") or []:
            fn = c["function"]
            body += '\n<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (
                fn["name"], json.dumps(fn["arguments"], ensure_ascii=False))
        out.append("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], body))
    return "".join(out) + "<|im_start|>assistant\n"


def reasoning_only(msgs):
    """Assistant turns whose only text is reasoning_content, which chatml() (like Qwen's template
    for earlier turns) does not render."""
    return [i for i, m in enumerate(msgs) if m["role"] == "assistant" and blank(m.get("content"))
            and not m.get("tool_calls") and not blank(m.get("reasoning_content"))]


def blank(s):
    return s is None or s.strip(" \t\n\r\v\f") == ""


def empty_assistants(msgs):
    """Python statement of the rule: assistant, not last, blank content, no tool calls."""
    return any(m["role"] == "assistant" and i + 1 < len(msgs) and blank(m.get("content"))
               and not m.get("tool_calls") for i, m in enumerate(msgs))


def orphan_tools(msgs):
    calls, pending, bad = [], [], False
    for m in msgs:
        if m["role"] == "tool":
            ids = [c for c in calls if c == m.get("tool_call_id")]
            if not ids:
                bad = True
            pending = [c for c in pending if c != m.get("tool_call_id")]
            continue
        if m["role"] in ("user", "assistant"):
            bad |= bool(pending)
            pending = []
        for c in m.get("tool_calls") or []:
            calls.append(c["id"])
            pending.append(c["id"])
    if msgs and msgs[-1]["role"] == "tool" and pending:
        bad = True
    return bad


def tool_call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


class Req:
    def __init__(self, rid, messages, output, finish="stop", matched=151645, temperature=0.7,
                 top_p=0.95):
        self.rid, self.messages, self.output = rid, messages, output
        self.temperature, self.top_p = temperature, top_p
        if finish == "stop":
            self.finish = {"type": "stop", "matched": matched}
        elif finish == "length":
            self.finish = {"type": "length", "length": 512}
        else:
            self.finish = {"type": "abort", "message": "The client disconnected."}
        self.kinds, self.related = set(), {}
        self.openai_logged = False
        self.conversation = None
        self.prompt = chatml(messages)
        self.ids = [(7 * i + len(rid)) % 151000 for i in range(12 + len(messages))]

    def obj(self, with_text, level):
        sp = {"temperature": self.temperature, "max_new_tokens": 512, "top_p": self.top_p,
              "top_k": -1, "n": 1}
        return [("rid", self.rid), ("http_worker_ipc", None),
                ("text", self.prompt if with_text else None), ("input_ids", self.ids),
                ("input_embeds", None), ("image_data", None), ("video_data", None),
                ("audio_data", None), ("sampling_params", sp), ("return_logprob", False),
                ("stream", True), ("lora_path", None), ("priority", None)]

    def out(self):
        return {"text": self.output, "output_ids": list(range(3, 3 + len(self.output) // 4 + 1)),
                "meta_info": {"id": self.rid, "finish_reason": self.finish,
                              "prompt_tokens": len(self.ids), "weight_version": "default",
                              "completion_tokens": len(self.output) // 4 + 1,
                              "cached_tokens": 0, "e2e_latency": 1.5}}

    def openai(self):
        return {"model": "default", "messages": self.messages, "max_tokens": 512,
                "stream": True, "temperature": self.temperature, "top_p": self.top_p}


class Fixture:
    def __init__(self, R, name, level=3):
        name += VARIANT["suffix"]
        self.R, self.name, self.level = R, name, level
        self.format, self.prefix = VARIANT["format"], VARIANT["prefix"]
        self.files = [[name + ".log", []]]
        self.reqs, self.errors = [], []

    def new_file(self, suffix):
        self.files.append([self.name + suffix + ".log", []])

    def add(self, line, kind="req"):
        self.files[-1][1].append(line)
        if kind != "req":
            self.errors.append({"file": self.files[-1][0], "line": len(self.files[-1][1]),
                                "kinds": [kind]})

    def render(self, obj, out=None, event="receive"):
        ns = argparse.Namespace(event=event, format=self.format, level=self.level, era="current",
                                skip_video_data=False, prefix=self.prefix,
                                timestamp="2026-03-20T12:00:00.000001",
                                abbreviate=None, abbreviate_min=0)
        req = {"obj": obj, "out": out, "headers": {}}
        if event != "openai":
            req["class"] = "GenerateReqInput"
            req["obj"] = dict(obj)
        return self.R.render_lines(self.R.to_records(req), ns)[0]

    def receive(self, q, openai=True):
        """Receive OpenAI (level >= 2) right before Receive: the pairer joins them."""
        if openai and self.level >= 2:
            self.add(self.render(q.openai(), event="openai"))
            q.openai_logged = True
        self.add(self.render(q.obj(False, self.level)))
        self.track(q)

    def finish(self, q):
        self.add(self.render(q.obj(True, self.level), q.out(), event="finish"))
        q.finished = True

    def both(self, q, openai=True):
        self.receive(q, openai)
        self.finish(q)

    def track(self, q):
        if q not in self.reqs:
            q.finished = False
            self.reqs.append(q)

    def expected(self, q):
        kinds = set(q.kinds)
        if self.level < 2:
            kinds.add(K_TRUNC)            # no templated prompt, no output text
        elif self.level == 2 and (len(q.prompt) > LIMIT2 or len(q.output) > LIMIT2):
            kinds.add(K_TRUNC)            # head + tail only
        if not q.finished:
            kinds.add(K_UNPAIRED)
        if self.level >= 2:
            if empty_assistants(q.messages):
                kinds.add(K_EMPTY)
            if orphan_tools(q.messages):
                kinds.add(K_ORPHAN)
            if reasoning_only(q.messages):
                kinds.add(K_DROPPED)      # chatml() drops reasoning: the model saw an empty turn
        conv = q.conversation
        if conv is None and q.openai_logged:
            conv = q.rid                  # a conversation of its own
        calls = []
        for m in q.messages if self.level >= 2 else []:
            for c in m.get("tool_calls") or []:
                a = c["function"]["arguments"]
                obj = not isinstance(a, str)
                calls.append([c["id"], c["function"]["name"],
                              json.dumps(a, ensure_ascii=False) if obj else a, obj])
        return {"rid": q.rid, "kinds": sorted(kinds), "conversation": conv,
                "related": q.related, "tool_calls": calls}

    def write(self, outdir):
        for fname, lines in self.files:
            with open(os.path.join(outdir, fname), "w", encoding="utf-8", newline="\n") as fh:
                for line in lines:
                    fh.write(line + "\n")
        doc = {"files": [f for f, _ in self.files], "generated_by": "tools/gen_harness_fixtures.py",
               "requests": [self.expected(q) for q in self.reqs], "errors": self.errors}
        with open(os.path.join(outdir, self.name + ".expect.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, ensure_ascii=False)
            fh.write("\n")


def sys_user(text):
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def stale(q, producer):
    q.kinds.add(K_STALE)
    q.related[K_STALE] = producer.rid


# ------------------------------------------------------------------ fixtures

def classic_interrupt(R):
    """The user interrupts a streaming answer; the harness keeps an empty turn."""
    fx = Fixture(R, "classic-interrupt")
    m1 = sys_user("The build fails in io.c, can you fix it?")
    a1 = Req("ci-1", m1, "Let me look at the failing test first. I will open tests/test_io.c and",
             finish="abort")
    m2 = m1 + [{"role": "assistant", "content": ""}, {"role": "user", "content": "continue"}]
    a2 = Req("ci-2", m2, "Opening tests/test_io.c now.")
    stale(a2, a1)                         # the partial answer was replaced by ""
    a2.related[K_EMPTY] = a1.rid
    # aborted before any token: the empty turn is faithful, only empty_assistant
    n1 = sys_user("Summarise the change log.")
    b1 = Req("ci-b1", n1, "", finish="abort")
    b2 = Req("ci-b2", n1 + [{"role": "assistant", "content": "  \n"},
                            {"role": "user", "content": "go on"}], "The change log lists three fixes.")
    b2.related[K_EMPTY] = b1.rid
    for q, c in ((a1, "a"), (a2, "a"), (b1, "b"), (b2, "b")):
        q.conversation = c
        fx.both(q)
    return fx


def healthy(R):
    """Multi-turn agent conversation with every benign difference."""
    fx = Fixture(R, "healthy")
    m = sys_user("Which files define the parser?")
    q1 = Req("h-1", m, "<think>The user wants the parser files. I should list the directory."
             "</think>\n\nI will list the parse/ directory.\n\n<tool_call>\n{\"name\": \"list_dir\", "
             "\"arguments\": {\"path\": \"parse\"}}\n</tool_call>")
    m = m + [{"role": "assistant", "content": "I will list the parse/ directory.",
              "reasoning_content": "The user wants the parser files. I should list the directory.",
              "tool_calls": [tool_call("call_1", "list_dir", "{\"path\": \"parse\"}")]},
             {"role": "tool", "tool_call_id": "call_1", "content": "pylit.c\npair.c\nlogline.c"}]
    q2 = Req("h-2", m, "The parser is in parse/pylit.c (literals) and parse/pair.c (pairing).\n")
    m = m + [{"role": "assistant", "content": "The parser is in parse/pylit.c (literals) and "
              "parse/pair.c (pairing)."}, {"role": "user", "content": "And the log lines?"}]
    q3 = Req("h-3", m, "</think>\nLog lines are recognised in parse/logline.c.")
    m = m + [{"role": "assistant", "content": "<think></think>Log lines are recognised in "
              "parse/logline.c."}, {"role": "user", "content": "Run the tests."}]
    q4 = Req("h-4", m, "I'll run ctest.\nObservation:", matched="Observation:")
    m = m + [{"role": "assistant", "content": "I'll run ctest."},
             {"role": "user", "content": "Observation: 12 passed. Anything else?"}]
    q5 = Req("h-5", m, "<think>All green.</think>No, everything passes.")
    m = m + [{"role": "assistant", "content": "<think>All green.</think>No, everything passes."},
             {"role": "user", "content": "Thanks."}]
    q6 = Req("h-6", m, "You're welcome.")
    for q in (q1, q2, q3, q4, q5, q6):
        q.conversation = "h"
        fx.both(q)
    return fx


def altered(R):
    """Cut short, edited, reasoning moved, answer moved into reasoning_content."""
    fx = Fixture(R, "altered")
    cases = [
        ("cut", "The fix is to check the return value of fread before using the buffer, "
         "and to free it on the error path.", None, lambda o: o[:40]),
        ("edit", "Use a 64-bit counter for the offset; 32 bits overflow at 4 GiB.", None,
         lambda o: o.replace("64-bit", "32-bit")),
        ("moved", "<think>The offset overflows at 4 GiB.</think>Use a 64-bit offset.", None,
         lambda o: "The offset overflows at 4 GiB.\n\nUse a 64-bit offset."),
        ("intorc", "<think>Check the caller.</think>The caller passes a NULL buffer.",
         "reasoning", None),
    ]
    for name, out, how, edit in cases:
        m = sys_user("Why does %s crash?" % name)
        p = Req("alt-%s-1" % name, m, out)
        if how == "reasoning":     # answer put into reasoning_content, content emptied
            msg = {"role": "assistant", "content": "",
                   "reasoning_content": "The caller passes a NULL buffer."}
        else:
            msg = {"role": "assistant", "content": edit(out)}
        q = Req("alt-%s-2" % name, m + [msg, {"role": "user", "content": "ok, do it"}], "Done.")
        stale(q, p)
        if how == "reasoning":
            q.related[K_EMPTY] = p.rid
        p.conversation = q.conversation = name
        fx.both(p)
        fx.both(q)
    return fx


def tools(R):
    """Tool calls: never answered, unknown id, parallel calls answered (one with
    dict arguments), a result without any earlier call."""
    fx = Fixture(R, "tools")
    def base(rid):
        return sys_user("Read a.c and b.c. (%s)" % rid)

    two = [tool_call("call_a", "read_file", "{\"path\": \"a.c\"}"),
           {"id": "call_b", "type": "function",
            "function": {"name": "read_file", "arguments": {
                "path": "b.c", "lines": [1, 2.5, -0.0], "big": 1e16, "small": 1e-05,
                "opts": {"q": "say \"hi\"\n\tthen\x01", "u": "caf\u00e9 \u4f60\u597d",
                         "n": None, "t": True, "f": False, "k": 12345678901234567890}}}}]
    cases = {
        "t-unanswered": base("t-unanswered") + [{"role": "assistant", "content": "", "tool_calls": two[:1]},
                                {"role": "user", "content": "why did you stop?"}],
        "t-unknown-id": base("t-unknown-id") + [{"role": "assistant", "content": "", "tool_calls": two[:1]},
                                {"role": "tool", "tool_call_id": "call_zz", "content": "int a;"}],
        "t-parallel": base("t-parallel") + [{"role": "assistant", "content": "Reading both.", "tool_calls": two},
                              {"role": "tool", "tool_call_id": "call_b", "content": "int b;"},
                              {"role": "tool", "tool_call_id": "call_a", "content": "int a;"}],
        "t-half": base("t-half") + [{"role": "assistant", "content": "", "tool_calls": two},
                          {"role": "tool", "tool_call_id": "call_b", "content": "int b;"}],
        "t-no-call": base("t-no-call") + [{"role": "tool", "tool_call_id": "call_a", "content": "int a;"}],
        "t-chain": base("t-chain") + [{"role": "assistant", "content": "", "tool_calls": two[:1]},
                           {"role": "tool", "tool_call_id": "call_a", "content": "int a;"},
                           {"role": "assistant", "content": "",
                            "tool_calls": [tool_call("call_c", "read_file", "{\"path\": \"b.c\"}")]},
                           {"role": "tool", "tool_call_id": "call_c", "content": "int b;"}],
    }
    for i, (rid, msgs) in enumerate(cases.items()):
        q = Req(rid, msgs, "Both files declare one int.")
        q.conversation = "t%d" % i
        fx.both(q)
    return fx


def level1(R):
    fx = Fixture(R, "level1", level=1)
    for i in range(2):
        q = Req("l1-%d" % i, sys_user("question %d" % i), "answer %d" % i)
        fx.both(q)
    return fx


def logger_cut(R):
    """Level 2: a long output is cut (head + tail); later turns compared on what is shown."""
    fx = Fixture(R, "logger-cut", level=2)
    body = "".join("Line %d of the report: the value of register r%d is 0x%04x.\n" % (i, i % 16, i * 37)
                   for i in range(60))
    m = sys_user("Print the register report.")
    p = Req("cut-1", m, body)
    ok = Req("cut-2", m + [{"role": "assistant", "content": body},
                           {"role": "user", "content": "thanks"}], "You're welcome.")
    short = Req("cut-3", m + [{"role": "assistant", "content": body[:1500]},
                              {"role": "user", "content": "thanks!"}], "Sure.")
    stale(short, p)
    for q in (p, ok, short):
        q.conversation = "cut"
        fx.both(q)
    return fx


def unpaired(R):
    fx = Fixture(R, "unpaired")
    a = Req("up-1", sys_user("Receive only"), "never logged")
    fx.receive(a)                        # client went away: no Finish
    b = Req("up-2", sys_user("Finish only"), "finished")
    fx.track(b)
    b.finished = True
    b.kinds.add(K_UNPAIRED)              # Finish without Receive
    fx.add(fx.render(b.obj(True, 3), b.out(), event="finish"))
    c = Req("up-3", sys_user("complete"), "fine")
    fx.both(c)
    return fx


def parse_errors(R):
    """A request line cut for good in the middle is read up to its last whole
    field (log.capture_cut: its rid survives; its Finish never came); one cut
    inside its rid cannot be told apart: a parse error."""
    fx = Fixture(R, "parse-errors")
    a = Req("pe-1", sys_user("first"), "one")
    fx.both(a)
    b = Req("pe-2", sys_user("second"), "two")
    line = fx.render(b.obj(False, 3))
    fx.add(line[:len(line) // 2])                   # the line was cut in the middle
    b.kinds.add(K_CUT)
    fx.track(b)
    d = Req("pe-4", sys_user("fourth"), "four")
    line = fx.render(d.obj(False, 3))
    fx.add(line[:line.index("rid=") + 6], K_PARSE)  # cut inside the rid
    c = Req("pe-3", sys_user("third"), "three")
    fx.both(c)
    return fx


README = ("logdiff reads SGLang and vLLM request logs and tells, for every request, whether the "
          "harness, the chat template, the kernels or the sampler is to blame.\n\n## Install\n\n"
          "Run `cmake -S . -B build` and then `cmake --build build`. The tests run with ctest.\n\n"
          "## Usage\n\n`logdiff scan logs/` counts the requests; `logdiff show RID` prints one.\n")
C_CODE = ("static int parse(const char *s, size_t n)\n{\n    for (size_t i = 0; i < n; i++) {\n"
          "        if (s[i] == '{') {\n            depth++;\n        } else if (s[i] == '}') {\n"
          "            if (--depth < 0) {\n                return -1;\n            }\n        }\n"
          "    }\n    return depth == 0 ? 0 : -1;\n}\n")
TABLE = "| name | size | kind |\n|------|------|------|\n" + "".join(
    "| file%d.c | %d | source |\n" % (i, 100 + 17 * i) for i in range(12))
JSON_ARR = "[" + ", ".join('{"id": %d, "name": "item%d", "enabled": true, "tags": []}' % (i, i)
                           for i in range(20)) + "]"


def repetition(R):
    fx = Fixture(R, "repetition")
    loops = {
        "rep-sentence": "I will now check the file. " * 50,
        "rep-paragraph": "Sure. " + ("The function returns early when the buffer is empty, so the "
                                    "caller never sees the error code.\n\n") * 5,
        "rep-token": "The answer is " + "the " * 60,
    }
    normal = {"ok-readme": README, "ok-code": C_CODE, "ok-table": TABLE, "ok-json": JSON_ARR}
    for rid, out in list(loops.items()) + list(normal.items()):
        q = Req(rid, sys_user("task %s" % rid), out, finish="length" if rid in loops else "stop",
                temperature=1.2 if rid in loops else 0.7)
        if rid in loops:
            q.kinds.add(K_REP)
        q.conversation = rid
        fx.both(q)
    return fx


def interleaved(R):
    """Two agent conversations whose lines interleave; B's second turn is edited."""
    fx = Fixture(R, "interleaved")
    ma, mb = sys_user("Fix the lexer."), sys_user("Write the docs.")
    a1 = Req("ia-1", ma, "The lexer misses escaped quotes.")
    b1 = Req("ib-1", mb, "I will write docs/usage.md.")
    ma2 = ma + [{"role": "assistant", "content": a1.output}, {"role": "user", "content": "fix it"}]
    mb2 = mb + [{"role": "assistant", "content": "I will write docs/index.md."},
                {"role": "user", "content": "go"}]
    a2, b2 = Req("ia-2", ma2, "Fixed in lexer.c."), Req("ib-2", mb2, "Written.")
    stale(b2, b1)
    ma3 = ma2 + [{"role": "assistant", "content": a2.output}, {"role": "user", "content": "test"}]
    a3 = Req("ia-3", ma3, "All lexer tests pass.")
    for q in (a1, a2, a3):
        q.conversation = "A"
    for q in (b1, b2):
        q.conversation = "B"
    fx.receive(a1), fx.receive(b1), fx.finish(b1), fx.finish(a1)
    fx.receive(a2), fx.receive(b2), fx.finish(a2)
    fx.receive(a3), fx.finish(b2), fx.finish(a3)
    return fx


def two_files(R):
    """One conversation over a rotated log: the producer is in the first file."""
    fx = Fixture(R, "two-files")
    m = sys_user("Rename the option.")
    c1 = Req("tf-1", m, "I will rename --level to --log-level in cmd/options.c.")
    m2 = m + [{"role": "assistant", "content": c1.output}, {"role": "user", "content": "do it"}]
    c2 = Req("tf-2", m2, "Renamed in cmd/options.c and the docs.")
    m3 = m2 + [{"role": "assistant", "content": "Renamed in cmd/options.c."},
               {"role": "user", "content": "tests?"}]
    c3 = Req("tf-3", m3, "They pass.")
    stale(c3, c2)
    for q in (c1, c2, c3):
        q.conversation = "tf"
    fx.both(c1)
    fx.receive(c2)
    fx.new_file("-2")
    fx.finish(c2)
    fx.both(c3)
    return fx


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "testdata", "replay", "harness"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as R
    os.makedirs(args.out, exist_ok=True)
    fixtures = [classic_interrupt(R), healthy(R), altered(R), tools(R), level1(R),
                logger_cut(R), unpaired(R), parse_errors(R), repetition(R), interleaved(R),
                two_files(R)]
    for fmt, prefix, suffix in (("json", "", "-json"), ("text", "", "-noprefix")):
        VARIANT.update({"format": fmt, "prefix": prefix, "suffix": suffix})
        fixtures += [classic_interrupt(R), healthy(R), tools(R), logger_cut(R), interleaved(R)]
    for fx in fixtures:
        fx.write(args.out)
    print("wrote %d fixtures to %s" % (len(fixtures), args.out))


if __name__ == "__main__":
    main()
