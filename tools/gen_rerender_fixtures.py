#!/usr/bin/env python3
"""gen_rerender_fixtures.py - a log for the re-render tests of `logdiff diff --template`.

The server side is reproduced with the oracles, not with logdiff:
  * SGLang's own request model (sglang==0.5.23, protocol.py, loaded alone from the wheel that
    `pip download --no-deps` fetches into ~/.cache/logdiff/) gives the logged object
    (model_dump(exclude_none=True), what `Receive OpenAI` prints) and the dumps the chat endpoint
    renders from (message.model_dump(), tool.model_dump());
  * the few steps of serving_chat.py's _apply_jinja_template between the dump and the template are
    mirrored below (mirror_serving_chat, commented line by line);
  * the prompt is rendered by Python jinja2 set up as transformers sets it up, through
    testdata/replay/rerender/chat.jinja (our own template);
  * the lines are written with ../shared/tools/sglang_render.py (SGLang's logger rendering).
Some requests are then logged with a prompt the server "got wrong" (a dropped turn, a mangled
turn), cut by the logger, prefixed with a BOS text, or without their message array; the expected
findings per rid go to testdata/replay/rerender/expect.json.  vectors.json holds unit vectors:
SGLang's preprocessing of logged bodies, difflib's unified diffs, SGLang's content-format guess.

Usage: python3 tools/gen_rerender_fixtures.py [--shared ../shared]   (needs pydantic, openai,
msgspec and jinja2 from PyPI; writes testdata/replay/rerender/{server.log,expect.json,vectors.json})
"""
import argparse
import copy
import datetime
import glob
import importlib.util
import json
import os
import subprocess
import sys
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "testdata", "replay", "rerender")
SGLANG = "0.5.23"
BOS = "<s>"
JTU = None  # SGLang's jinja_template_utils module, loaded by main()


def sglang_file(name, path_in_wheel):
    """One file of the SGLang wheel, extracted into the cache."""
    cache = os.path.expanduser("~/.cache/logdiff/sglang-" + SGLANG)
    wheels = glob.glob(os.path.join(cache, "sglang-*.whl"))
    if not wheels:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                               "sglang==" + SGLANG, "-d", cache])
        wheels = glob.glob(os.path.join(cache, "sglang-*.whl"))
    path = os.path.join(cache, name)
    if not os.path.exists(path):
        with zipfile.ZipFile(wheels[0]) as z, open(path, "wb") as fh:
            fh.write(z.read(path_in_wheel))
    return path


def load_module(modname, path):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def stub(modname, **attrs):
    mod = types.ModuleType(modname)
    mod.__dict__.update(attrs)
    sys.modules[modname] = mod


def sglang_modules():
    """SGLang's request model (protocol.py) and its template content handling
    (parser/jinja_template_utils.py), loaded alone: the few names they take from the rest of
    SGLang and from transformers are stubbed (none of them is used on the paths run here, except
    _compile_jinja_template, given the transformers environment)."""
    stub("sglang")
    stub("sglang.utils", convert_json_schema_to_str=lambda schema: json.dumps(schema))
    stub("sglang.srt")
    stub("sglang.srt.utils", GLM_MEDIA_CONFIG_KEYS=(), ImageData=dict, VideoData=dict)
    stub("transformers")
    stub("transformers.utils")
    stub("transformers.utils.chat_template_utils",
         _compile_jinja_template=lambda src: jinja_env().from_string(src))
    proto = load_module("sglang_protocol", sglang_file(
        "protocol.py", "sglang/srt/entrypoints/openai/protocol.py"))
    jtu = load_module("sglang_jinja_template_utils", sglang_file(
        "jinja_template_utils.py", "sglang/srt/parser/jinja_template_utils.py"))
    return proto, jtu


def jinja_env():
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.date(2024, 7, 26).strftime(fmt)
    return env


def mirror_serving_chat(req, jtu, content_format="string"):
    """serving_chat.py (_apply_jinja_template) between the request model and the template; the
    steps marked SGLang call SGLang's own functions, the others mirror one line each."""
    messages = [m.model_dump() for m in req.messages]           # messages = [msg.model_dump() ...]
    for m in messages:                                          # normalize_assistant_tool_call_arguments
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.loads(fn["arguments"])
    out = []
    for m in copy.deepcopy(messages):
        if m.get("content") is None:                            # content None -> ""
            m["content"] = ""
        m = jtu.process_content_for_template_format(m, content_format, [], [], [], [])  # SGLang
        if m["role"] == "tool" and isinstance(m.get("content"), list):  # normalize_tool_content
            parts = m["content"]
            if all((isinstance(p, dict) and p.get("type") == "text") or isinstance(p, str)
                   for p in parts):
                m["content"] = " ".join(p.get("text", "") if isinstance(p, dict) else p
                                        for p in parts)
        out.append(m)
    tools = None
    if req.tools and req.tool_choice != "none":
        if not isinstance(req.tool_choice, str):
            tools = [t.model_dump() for t in req.tools
                     if t.function.name == req.tool_choice.function.name] or None
        else:
            tools = [t.model_dump() for t in req.tools]
    kwargs = {}
    if req.reasoning_effort is not None:
        kwargs["reasoning_effort"] = req.reasoning_effort
    kwargs.update(req.chat_template_kwargs or {})
    return out, tools, kwargs


def render_hf(tpl, body):
    """apply_chat_template on the logged body as it is (`--server hf`)."""
    ctx = dict(messages=transformers_normalize(body["messages"]), tools=body.get("tools"), documents=None,
               add_generation_prompt=True, bos_token=BOS, eos_token="</s>",
               **body.get("chat_template_kwargs", {}))
    return tpl.render(**ctx)


def transformers_normalize(messages):
    """What transformers 5.x's apply_chat_template does to messages before the template
    (chat_template_utils._normalize_chat_messages and _alias_reasoning_fields): None-valued keys
    dropped, a reasoning under any of its names given as `thinking` and `reasoning_content`."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        r = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        out.append({"thinking": r, **m, "reasoning_content": r} if r is not None else m)
    return out


def render(tpl, req):
    messages, tools, kwargs = mirror_serving_chat(req, JTU)
    messages = transformers_normalize(messages)
    ctx = dict(messages=messages, tools=tools, documents=None, add_generation_prompt=True,
               bos_token=BOS, eos_token="</s>", **kwargs)
    return tpl.render(**ctx)


def ids_of(text, base=1000):
    return [base + (ord(c) % 5000) for c in text[:64]]


class Log:
    def __init__(self, sr):
        self.sr, self.lines, self.expect, self.t = sr, [], {}, 0

    def stamp(self):
        self.t += 1
        return "[2026-11-21 10:%02d:%02d] " % (self.t // 60, self.t % 60)

    def add(self, rid, body, prompt, kinds, verdict, hf_kinds=None, log_openai=True,
            finish_max=None):
        sr, big = self.sr, self.sr.BIG
        if log_openai:
            self.lines.append(self.stamp() + "Receive OpenAI: obj=" + sr.text_render(body, big))
        sp = {"temperature": 0.0, "max_new_tokens": 64}
        rec = sr.Record("GenerateReqInput", [("rid", rid), ("text", None),
                                             ("input_ids", ids_of(prompt)), ("sampling_params", sp)])
        self.lines.append(self.stamp() + "Receive: obj=" + sr.text_render(rec, big))
        fin = sr.Record("GenerateReqInput", [("rid", rid), ("text", prompt),
                                             ("input_ids", ids_of(prompt)), ("sampling_params", sp)])
        out = {"text": "Done.", "output_ids": [7, 8], "meta_info": {
            "id": rid, "finish_reason": {"type": "stop", "matched": 2}, "prompt_tokens": 64,
            "completion_tokens": 2}}
        limit = finish_max or big
        self.lines.append(self.stamp() + "Finish: obj=" + sr.text_render(fin, limit) + ", out=" +
                          sr.text_render(out, big))
        self.expect[rid] = {"kinds": kinds, "verdict": verdict,
                            "hf_kinds": hf_kinds if hf_kinds is not None else kinds}


def cases(proto, tpl, log):
    def req(**kw):
        body = dict(model="m", **kw)
        r = proto.ChatCompletionRequest(**body)
        return r, r.model_dump(exclude_none=True)

    faithful, mismatch = "template.faithful", "template.render_mismatch"

    def hf(r, body):
        """what --server hf finds for a request SGLang rendered faithfully"""
        return [faithful] if render_hf(tpl, body) == render(tpl, r) else [mismatch]
    sysmsg = {"role": "system", "content": "You are terse. Quote \"exactly\" and keep \\ paths."}
    r, body = req(messages=[sysmsg, {"role": "user", "content": "Hello, 世界 😀"}])
    log.add("rr-faithful-basic", body, render(tpl, r), [faithful], "ok", hf(r, body))

    weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    convo = [sysmsg, {"role": "user", "content": "Weather in Paris and Oslo?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function",
                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                 {"id": "c2", "type": "function",
                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "{\"temp_c\": 21}"},
             {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "4"},
                                                               {"type": "text", "text": "C"}]},
             {"role": "user", "content": "And tomorrow?"}]
    r, body = req(messages=convo, tools=[weather, lookup])
    log.add("rr-faithful-tools", body, render(tpl, r), [faithful], "ok", hf(r, body))

    r, body = req(messages=[{"role": "user", "content": "Think first."},
                            {"role": "assistant", "content": "42",
                             "reasoning_content": "6 times 7"},
                            {"role": "user", "content": "Why?"}],
                  chat_template_kwargs={"enable_thinking": True})
    log.add("rr-faithful-bos", body, BOS + render(tpl, r), [faithful], "ok", hf(r, body))

    r, body = req(messages=[{"role": "user", "content": "Long one: " + "abc " * 900},
                            {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": "tail question"}])
    log.add("rr-faithful-cut", body, render(tpl, r), [faithful], "ok", hf(r, body),
            finish_max=2048)

    turns = [sysmsg, {"role": "user", "content": "My name is Bob."},
             {"role": "assistant", "content": "Hi Bob."},
             {"role": "user", "content": "What is my name?"}]
    r, body = req(messages=turns)
    r_dropped, _ = req(messages=[turns[0], turns[3]])  # the server lost the middle turns
    log.add("rr-mismatch-dropped", body, render(tpl, r_dropped), [mismatch], "template")

    r, body = req(messages=turns)
    mangled = render(tpl, r).replace("Hi Bob.", "Hi Bob")  # the server trimmed a turn
    log.add("rr-mismatch-mangled", body, mangled, [mismatch], "template")

    r, body = req(messages=[{"role": "user", "content": "Run it."},
                            {"role": "function", "name": "f", "content": "done"}])
    # the server's template took the function turn; chat.jinja refuses it
    log.add("rr-refused", body, "<|user|>Run it.<|end|>\n<|function|>done<|end|>\n<|assistant|>",
            [mismatch], "template")

    r, body = req(messages=[{"role": "user", "content": "no array logged"}])
    # a templated prompt without its array: neither the array nor the render can be checked,
    # and the log cannot decide (verdict log, not ok)
    log.add("rr-no-array", body, render(tpl, r), ["template.not_rendered", "log.no_messages"],
            "log", log_openai=False)


def deepseek_log(proto, sr):
    """A DeepSeek-V3.2 server's log: prompts from SGLang's own encoder (the expected outputs of
    testdata/replay/dsenc/v32.json, written by tools/gen_dsenc_cases.py), one of them with a
    tool call the server lost; for `logdiff diff --template deepseek-v3.2`."""
    with open(os.path.join(ROOT, "testdata", "replay", "dsenc", "v32.json"), encoding="utf-8") as fh:
        cases = {c["name"]: c for c in json.load(fh)}
    log = Log(sr)
    for name in ("multi_turn_thinking", "tools_args_string"):
        c = cases[name]
        body = proto.ChatCompletionRequest(**c["request"]).model_dump(exclude_none=True)
        log.add("ds-" + name, body, c["expect"], ["template.faithful"], "ok")
    c = cases["parallel_calls"]
    body = proto.ChatCompletionRequest(**c["request"]).model_dump(exclude_none=True)
    start = c["expect"].rindex("<\uff5cDSML\uff5cinvoke")  # the last call of the conversation
    end = c["expect"].index("</\uff5cDSML\uff5cinvoke>", start) + len("</\uff5cDSML\uff5cinvoke>\n")
    lost = c["expect"][:start] + c["expect"][end:]  # the server dropped it
    log.add("ds-parallel-call-lost", body, lost, ["template.render_mismatch"], "template")
    return log


def prep_vectors(proto):
    """Logged body -> what the template sees, for tests/replay/analysis/test_rerender.c."""
    weather = {"type": "function", "function": {"parameters": {"type": "object"},
               "name": "get_weather", "strict": True, "x-extra": 1}}
    plain = {"type": "function", "function": {"name": "plain", "description": None}}
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}},
             {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]
    bodies = {
        "basic": dict(messages=[{"role": "system", "content": "S"},
                                {"role": "user", "content": "Q", "name": "bob"}]),
        "tool_calls": dict(messages=[
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"n\": 2.5}"}},
                {"id": "c2", "type": "function",
                 "function": {"name": "plain", "arguments": {"k": [1, None]}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "x"},
                                                               {"type": "text", "text": "y"}]},
            {"role": "tool", "tool_call_id": "c2", "content": "z", "name": "plain"}],
            tools=[weather, plain]),
        "tool_choice_none": dict(messages=[{"role": "user", "content": "hi"}], tools=[plain],
                                 tool_choice="none"),
        "tool_choice_named": dict(messages=[{"role": "user", "content": "hi"}],
                                  tools=[weather, plain],
                                  tool_choice={"type": "function", "function": {"name": "plain"}}),
        "kwargs": dict(messages=[{"role": "user", "content": "hi"}], reasoning_effort="high",
                       chat_template_kwargs={"enable_thinking": False, "reasoning_effort": "low"}),
        "parts": dict(messages=[{"role": "user", "content": parts},
                                {"role": "assistant", "content": [{"type": "text", "text": "c"}]}]),
    }
    out = []
    for fmt in ("string", "openai"):
        for name, kw in bodies.items():
            r = proto.ChatCompletionRequest(model="m", **kw)
            msgs, tools, kwargs = mirror_serving_chat(r, JTU, fmt)
            out.append({"name": name + "/" + fmt, "content_parts": fmt == "openai",
                        "logged": r.model_dump(exclude_none=True),
                        "messages": json.dumps(msgs, ensure_ascii=False),
                        "tools": None if tools is None else json.dumps(tools, ensure_ascii=False),
                        "kwargs": json.dumps(kwargs, ensure_ascii=False)})
    return out


def udiff_vectors():
    """Text pairs with one changed region each, and difflib's unified diff of them."""
    import difflib
    base = ["line %d\n" % i for i in range(1, 13)]
    pairs = {
        "middle_changed": (base, base[:5] + ["LINE 6\n"] + base[6:]),
        "inserted": (base, base[:4] + ["new a\n", "new b\n"] + base[4:]),
        "deleted": (base, base[:3] + base[7:]),
        "first_line": (base, ["changed\n"] + base[1:]),
        "last_line": (base, base[:-1] + ["changed\n"]),
        "one_line_texts": (["a\n"], ["b\n"]),
        "utf8": (["日志 1\n", "😀 2\n", "x\n"], ["日志 1\n", "😃 2\n", "x\n"]),
    }
    out = []
    for name, (a, b) in pairs.items():
        d = "".join(difflib.unified_diff(a, b, "logged", "rendered", n=3, lineterm="\n"))
        out.append({"name": name, "a": "".join(a), "b": "".join(b), "diff": d})
    return out


def content_format_vectors():
    """Template sources and SGLang's detect_jinja_template_content_format of them."""
    srcs = {
        "plain": "{% for message in messages %}{{ message.content }}{% endfor %}",
        "loop_parts": "{% for message in messages %}{% for c in message['content'] %}"
                      "{{ c.text }}{% endfor %}{% endfor %}",
        "loop_parts_attr": "{% for m in messages %}{% for c in m.content %}{{ c }}{% endfor %}"
                           "{% endfor %}",
        "loop_filtered": "{% for msg in messages %}{% for c in msg.content | list %}{{ c }}"
                         "{% endfor %}{% endfor %}",
        "media_word": "{# supports image input #}{{ messages[0].content }}",
        "other_var": "{% for x in messages %}{% for c in x.content %}{{ c }}{% endfor %}"
                     "{% endfor %}",
        "content_string_test": "{% for message in messages %}{% if message.content is string %}"
                               "{{ message.content }}{% endif %}{% endfor %}",
    }
    return [{"name": n, "template": t, "openai": JTU.detect_jinja_template_content_format(t) == "openai"}
            for n, t in srcs.items()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as sr  # noqa: E402

    global JTU
    proto, JTU = sglang_modules()
    with open(os.path.join(OUT, "chat.jinja"), encoding="utf-8") as fh:
        tpl = jinja_env().from_string(fh.read())
    log = Log(sr)
    cases(proto, tpl, log)
    with open(os.path.join(OUT, "server.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(log.lines) + "\n")
    ds = deepseek_log(proto, sr)
    with open(os.path.join(OUT, "server-dsv32.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(ds.lines) + "\n")
    with open(os.path.join(OUT, "expect-dsv32.json"), "w", encoding="utf-8") as fh:
        json.dump({"sglang": SGLANG, "requests": ds.expect}, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    with open(os.path.join(OUT, "vectors.json"), "w", encoding="utf-8") as fh:
        json.dump({"sglang": SGLANG, "prep": prep_vectors(proto), "udiff": udiff_vectors(),
                   "content_format": content_format_vectors()}, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    with open(os.path.join(OUT, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump({"sglang": SGLANG, "bos_token": BOS, "requests": log.expect}, fh, indent=1,
                  ensure_ascii=False)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
