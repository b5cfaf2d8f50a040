#!/usr/bin/env python3
# gen_demo_logs.py - writes the bundled demo logs (testdata/demo/) with SGLang's own
# rendering rules (../shared/tools/sglang_render.py): an agent harness whose long answer
# was interrupted (finish reason abort) and whose next request carries an empty assistant turn,
# and a second server whose preprocessing lost a tool result.  The prompts are what SGLang
# builds: its request model and preprocessing (tools/gen_rerender_fixtures.py) and the real
# Qwen2.5 chat template (../shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja) through Python
# jinja2 set up as transformers sets it up.
"""Usage: python3 tools/gen_demo_logs.py [--shared ../shared] [--out testdata/demo]

The story, in server time order (file server-0.log, a current-generation SGLang at
--log-requests-level 3 with the default timestamp prefix; server-1.log.gz a rotated file of
a second server):
  demo-healthy-1         a normal two-turn chat, finished with 'stop'
  demo-interrupted-1     the agent asks for a long refactoring plan; the client disconnects
                         mid-answer, so the server logs finish_reason abort with a partial answer
  demo-empty-assistant-2 the harness's next request carries that answer as an EMPTY
                         assistant turn: the model answers as if it had never seen it
  demo-healthy-2         another healthy request on the second server
  demo-tool-result-lost  on the second server, an agent turn with a tool call and its result:
                         the server's preprocessing (a patched build) lost the tool result, so
                         the model answers that it has no weather data
plus a health check, scheduler lines and access lines, as real logs have them.
"""
import argparse
import gzip
import json
import os
import sys

QWEN_BOS = ""


QWEN = None  # (template, SGLang modules), loaded by main()


def qwen_prompt(messages, tools=None):
    """The prompt SGLang builds for Qwen2.5 from this request."""
    import gen_rerender_fixtures as rr
    tpl, proto, jtu = QWEN
    body = {"model": "qwen2.5-coder-32b", "messages": messages}
    if tools:
        body["tools"] = tools
    req = proto.ChatCompletionRequest(**body)
    msgs, tool_dumps, kwargs = rr.mirror_serving_chat(req, jtu)
    return tpl.render(messages=rr.transformers_normalize(msgs), tools=tool_dumps, documents=None, add_generation_prompt=True,
                      bos_token=None, eos_token="<|im_end|>", **kwargs)


def load_qwen(shared):
    import gen_rerender_fixtures as rr
    global QWEN
    proto, jtu = rr.sglang_modules()
    path = os.path.join(shared, "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
    with open(path, encoding="utf-8") as fh:
        QWEN = (rr.jinja_env().from_string(fh.read()), proto, jtu)


def fake_ids(text, base=1000):
    """Token ids are not checked by scan: one id per 4 characters, deterministic."""
    return [base + (ord(c) % 5000) for c in text[::4]]


def fact(rid, messages, prompt, output, finish, temperature, file, line, verdict="ok", kinds=()):
    """What `logdiff scan --json` (and diff) must say about a request, from the Python objects
    and from how the story was built: `verdict` and the error `kinds` are what was planted."""
    return {"rid": rid, "verdict": verdict, "error_kinds": sorted(kinds),
            "messages": len(messages), "prompt_chars": len(prompt),
            "output_chars": len(output), "finish_reason": finish, "temperature": temperature,
            "file": file, "line": line, "input_ids": len(fake_ids(prompt)),
            "output_ids": len(fake_ids(output, 2000))}


def build(shared, lose_tool_result=True):
    """The two servers' log lines and the facts, in story order.  lose_tool_result=False gives
    the same story on a server build that keeps the tool result (tools/gen_regress_fixtures.py:
    the "before" of the regression test)."""
    sys.path.insert(0, os.path.join(shared, "tools"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sglang_render as sr  # noqa: E402
    load_qwen(shared)

    big = sr.BIG
    system = "You are CodePilot, an agent that edits a repository with the tools you are given."
    ask = ("Plan the refactoring of parse/pylit.c into three files, with the reasons, "
           "and list every function that moves.")
    partial = ("Here is the plan.\n\n1. **pylit_str.c** - string literals: `scan_string`, "
               "`decode_escape`, `utf8_put`.\n2. **pylit_num.c** - numbers: `scan_int`, ")
    follow = "Go on with step 2 and show me the new header."

    def openai(rid_unused, msgs, temperature=0.2, max_tokens=2048, tools=None):
        payload = {"model": "qwen2.5-coder-32b", "messages": msgs, "max_tokens": max_tokens,
                   "stream": True, "temperature": temperature}
        if tools:
            payload["tools"] = tools
        return "Receive OpenAI: obj=" + sr.text_render(payload, big)

    def receive(rid, prompt, temperature=0.2, max_tokens=2048):
        obj = sr.Record("GenerateReqInput", [
            ("rid", rid), ("http_worker_ipc", None), ("text", None), ("input_ids", fake_ids(prompt)),
            ("sampling_params", {"temperature": temperature, "max_new_tokens": max_tokens, "top_p": 0.95}),
            ("stream", True)])
        return "Receive: obj=" + sr.text_render(obj, big)

    def finish(rid, prompt, output, reason, temperature=0.2, max_tokens=2048, latency=1.5):
        obj = sr.Record("GenerateReqInput", [
            ("rid", rid), ("http_worker_ipc", None), ("text", prompt), ("input_ids", fake_ids(prompt)),
            ("sampling_params", {"temperature": temperature, "max_new_tokens": max_tokens, "top_p": 0.95}),
            ("stream", True)])
        out = {"text": output, "output_ids": fake_ids(output, 2000), "meta_info": {
            "id": rid, "finish_reason": reason, "prompt_tokens": len(fake_ids(prompt)),
            "weight_version": "default", "num_retractions": 0,
            "completion_tokens": len(fake_ids(output)), "cached_tokens": 0, "e2e_latency": latency}}
        return "Finish: obj=" + sr.text_render(obj, big) + ", out=" + sr.text_render(out, big)

    lines = []
    t = ["[2026-11-20 09:14:%02d] " % s for s in range(60)]
    conv1 = [{"role": "system", "content": system},
             {"role": "user", "content": "What does `ld_pylit_parse` return when the line is cut?"}]
    ans1 = "It returns `LD_ERR_TRUNCATED` with `err->offset` at the byte where the input ended."
    p1 = qwen_prompt(conv1)
    lines += [t[1] + openai(None, conv1), t[1] + receive("demo-healthy-1", p1),
              "[2026-11-20 09:14:01 TP0] Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0",
              t[2] + finish("demo-healthy-1", p1, ans1, {"type": "stop", "matched": 151645}),
              t[2] + 'INFO:     127.0.0.1:50312 - "POST /v1/chat/completions HTTP/1.1" 200 OK']
    conv2 = [{"role": "system", "content": system}, {"role": "user", "content": ask}]
    p2 = qwen_prompt(conv2)
    lines += [t[5] + openai(None, conv2), t[5] + receive("demo-interrupted-1", p2),
              "Receive: obj=GenerateReqInput(rid='HEALTH_CHECK_1763630046.5988789', sampling_params={'max_new_tokens': 1, 'temperature': 0.0}, stream=False)",
              t[9] + finish("demo-interrupted-1", p2, partial,
                            {"type": "abort", "message": "Request is disconnected from the client side (type 1)."},
                            latency=4.2)]
    conv3 = conv2 + [{"role": "assistant", "content": ""}, {"role": "user", "content": follow}]
    p3 = qwen_prompt(conv3)
    ans3 = "This is the very first message I see from you, and the previous response was empty. Which file do you mean?"
    lines += [t[20] + openai(None, conv3), t[20] + receive("demo-empty-assistant-2", p3),
              t[22] + finish("demo-empty-assistant-2", p3, ans3, {"type": "stop", "matched": 151645})]
    expect = [
        fact("demo-healthy-1", conv1, p1, ans1, "stop", 0.2, "server-0.log", 1),
        fact("demo-interrupted-1", conv2, p2, partial, "abort", 0.2, "server-0.log", 6),
        # planted: the aborted answer of demo-interrupted-1 sent back as an empty turn
        fact("demo-empty-assistant-2", conv3, p3, ans3, "stop", 0.2, "server-0.log", 10,
             "harness", ["harness.empty_assistant", "harness.stale_assistant"]),
    ]

    conv4 = [{"role": "user", "content": "Summarise: 日志里的请求 — \"quoted\" and 'single' \\ backslash 😀"}]
    p4 = qwen_prompt(conv4)
    ans4 = "A request in the log, with quotes and a backslash."
    lines2 = [t[30] + openai(None, conv4, temperature=0.7, max_tokens=256),
              t[30] + receive("demo-healthy-2", p4, 0.7, 256),
              t[31] + finish("demo-healthy-2", p4, ans4, {"type": "stop", "matched": 151645}, 0.7, 256, 0.4)]
    expect.append(fact("demo-healthy-2", conv4, p4, ans4, "stop", 0.7, "server-1.log.gz", 1))
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}
    conv5 = [{"role": "system", "content": "You are a travel agent with tools."},
             {"role": "user", "content": "Should I take an umbrella to Bergen today?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_7", "type": "function",
                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Bergen\"}"}}]},
             {"role": "tool", "tool_call_id": "call_7",
              "content": "{\"city\": \"Bergen\", \"rain_mm\": 14, \"sky\": \"overcast\"}"}]
    # planted: the second server's preprocessing dropped the tool result before templating
    p5 = qwen_prompt(conv5[:3] if lose_tool_result else conv5, [weather])
    ans5 = ("I could not get the weather for Bergen: the tool returned nothing. Try again?"
            if lose_tool_result else "Yes: 14 mm of rain and an overcast sky in Bergen today.")
    lines2 += [t[40] + openai(None, conv5, temperature=0.0, max_tokens=512, tools=[weather]),
               t[40] + receive("demo-tool-result-lost", p5, 0.0, 512),
               t[42] + finish("demo-tool-result-lost", p5, ans5, {"type": "stop", "matched": 151645},
                              0.0, 512, 0.9)]
    if lose_tool_result:
        expect.append(fact("demo-tool-result-lost", conv5, p5, ans5, "stop", 0.0, "server-1.log.gz", 4,
                           "template", ["template.dropped_message"]))
    else:
        expect.append(fact("demo-tool-result-lost", conv5, p5, ans5, "stop", 0.0, "server-1.log.gz", 4))
    return lines, lines2, expect


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "testdata", "demo"))
    ap.add_argument("--expect", default=os.path.join(os.path.dirname(__file__), "..", "testdata", "cli", "demo.expect.jsonl"))
    args = ap.parse_args()
    lines, lines2, expect = build(args.shared)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "server-0.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(args.expect, "w", encoding="utf-8") as fh:
        for e in expect:
            fh.write(json.dumps(e, ensure_ascii=False) + "\n")
    data = ("\n".join(lines2) + "\n").encode("utf-8")
    with open(os.path.join(args.out, "server-1.log.gz"), "wb") as fh:
        fh.write(gzip.compress(data, mtime=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
