#!/usr/bin/env python3
# gen_template_request.py - writes the request of bench/template.sh: an OpenAI
# chat-completions body with a system prompt, 99 more messages (user turns,
# assistant turns with reasoning_content and tool_calls, tool results, final
# answers) and 4 tools.  Standard library only; same seed, same bytes.
#
#   python3 bench/gen_template_request.py [--messages 100] [--seed 1] [--max-calls 2] OUT.json
#
# --max-calls 1 gives every assistant turn that calls tools a single call:
# Llama 3.1's template raises "This model only supports single tool-calls at
# once!" on more (the default, 2, keeps the bytes of seed 1 as they were).
#
# The texts mix English prose, code (quotes, backslashes, tabs, newlines), CJK
# and emoji, so both renderers go through escaping and UTF-8 paths.  Assistant
# messages that call tools have content "" (not null: Qwen3's template tests
# `'</think>' in message.content`); arguments are JSON strings, as the OpenAI
# API sends them.
import argparse
import json
import random

WORDS = ("the server logs every request with its prompt and sampling parameters so that a "
         "replay can rebuild the exact token sequence and compare it with what the model saw "
         "when the output went wrong cache prefix batch scheduler decode prefill token budget "
         "template renderer tokenizer mismatch whitespace newline").split()
CODE = [
    'def f(x):\n\treturn "a\\\\b" + x  # quote \' and "\n',
    'for (int i = 0; i < n; i++) { s[i] = \'\\n\'; }\n',
    '{"key": [1, 2.5, null, true], "path": "C:\\\\tmp\\\\x"}\n',
    'SELECT * FROM logs WHERE rid = \'abc\' AND t > 10;\n',
]
INTL = ["\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u4e2d\u6587\u5185\u5bb9",
        "\u00e9t\u00e9 \u00fcber na\u00efve", "\U0001F680\U0001F525 ok", "\u0436\u0443\u0440\u043d\u0430\u043b"]

TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file from the workspace and return its text.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root"},
            "max_bytes": {"type": "integer", "description": "Stop after this many bytes", "default": 65536}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "run_shell", "description": "Run a shell command and return stdout, stderr and the exit code.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string"}, "timeout_s": {"type": "number", "minimum": 0.1},
            "env": {"type": "object", "additionalProperties": {"type": "string"}}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "search_logs", "description": "Search the serving logs for requests matching a query.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "since": {"type": "string", "format": "date-time"},
            "fields": {"type": "array", "items": {"type": "string", "enum": ["rid", "prompt", "output", "meta"]}},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000}},
            "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city (\u00b0C), with a forecast.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "units": {"type": "string", "enum": ["metric", "imperial"]}},
            "required": ["city"]}}},
]


def text(rng, lo, hi):
    parts = []
    n = rng.randint(lo, hi)
    while sum(len(p) for p in parts) < n:
        r = rng.random()
        if r < 0.12:
            parts.append("\n```\n" + rng.choice(CODE) + "```\n")
        elif r < 0.2:
            parts.append(" " + rng.choice(INTL) + " ")
        else:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))) + ". ")
    return "".join(parts).strip()


def tool_args(rng, name):
    if name == "read_file":
        a = {"path": "src/%s.c" % rng.choice(WORDS), "max_bytes": rng.randint(1, 9) * 4096}
    elif name == "run_shell":
        a = {"command": "grep -n '%s' logs/*.log | head -%d" % (rng.choice(WORDS), rng.randint(5, 50)),
             "timeout_s": 30.0}
    elif name == "search_logs":
        a = {"query": " ".join(rng.choice(WORDS) for _ in range(3)), "fields": ["rid", "prompt"],
             "limit": rng.randint(1, 100)}
    else:
        a = {"city": rng.choice(["Paris", "\u6771\u4eac", "S\u00e3o Paulo", "Z\u00fcrich"]), "days": 3}
    return json.dumps(a, ensure_ascii=False)


def build(n_messages, seed, max_calls=2):
    rng = random.Random(seed)
    msgs = [{"role": "system", "content": "You are a careful assistant for LLM serving forensics.\n"
                                          + text(rng, 300, 600)}]
    call = 0
    while len(msgs) < n_messages:
        msgs.append({"role": "user", "content": text(rng, 100, 900)})
        # one or two rounds of tool calls, then an answer
        for _ in range(rng.randint(0, 2)):
            if len(msgs) >= n_messages - 2:
                break
            calls = []
            for _ in range(rng.randint(1, 2) if max_calls >= 2 else 1):
                name = rng.choice(TOOLS)["function"]["name"]
                calls.append({"id": "call_%04d" % call, "type": "function",
                              "function": {"name": name, "arguments": tool_args(rng, name)}})
                call += 1
            msgs.append({"role": "assistant", "content": "", "reasoning_content": text(rng, 80, 400),
                         "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": text(rng, 100, 1500)})
        if len(msgs) >= n_messages:
            break
        msgs.append({"role": "assistant", "content": text(rng, 200, 1200),
                     "reasoning_content": text(rng, 50, 300)})
    msgs = msgs[:n_messages]
    if msgs[-1]["role"] != "user":  # end on a user turn, as a live request does
        msgs[-1] = {"role": "user", "content": text(rng, 100, 400)}
    return {"model": "bench", "messages": msgs, "tools": TOOLS, "temperature": 0.6,
            "max_tokens": 2048, "stream": False}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-calls", type=int, default=2, choices=(1, 2),
                    help="tool calls per assistant turn at most (1 for Llama 3.1)")
    args = ap.parse_args()
    req = build(args.messages, args.seed, args.max_calls)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(req, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
