#!/usr/bin/env python3
# gen_bench_log.py - writes a synthetic, seeded SGLang request log (level 3, untruncated) for the
# `logdiff scan` benchmark (bench/scan.sh).  Standard library only.
#
#   python3 tools/gen_bench_log.py --size-mb 100 --seed 1 OUT.log            # text mode
#   python3 tools/gen_bench_log.py --size-mb 100 --seed 1 --format json OUT.log
#
# What it imitates (docs/log-formats.md sections 2-5, rendering by ../shared/tools/sglang_render.py):
#   * a modern (2026, "generation D") server at --log-requests-level 3, text or JSON format;
#   * per request, in this order but interleaved with other in-flight requests and with scheduler /
#     uvicorn noise lines:
#       [ts] Receive OpenAI: obj={'model': ..., 'messages': [...], 'tools': [...], ...}
#       [ts] Receive: obj=GenerateReqInput(rid='...', http_worker_ipc=None, text=None, input_ids=[...], ...)
#       [ts] Finish: obj=GenerateReqInput(rid='...', http_worker_ipc=None, text='<|im_start|>...', input_ids=[...], ...), out={...}
#     JSON mode writes events request.received.openai / request.received / request.finished instead.
#   * agentic chat sessions: each request re-sends the whole conversation so far (system prompt, user
#     turns, assistant turns with reasoning_content and tool_calls, tool results) plus one new message;
#     prompts are English prose, code (quotes, backslashes, newlines), CJK and emoji;
#   * every request line is 20-200 KB; a session restarts once its lines would pass 200 KB.
# Size is in MB = 10^6 bytes; no request starts once the lines owed by those in flight would reach
# it, and every request started is finished, so the file ends close to the size (within a few
# hundred KB) with complete requests only.  Same seed, size and format => byte-identical file.

import argparse
import datetime
import json
import os
import random
import re
import sys
import zlib

# sglang_render.py lives in the shared reference tree: $LOGDIFF_SHARED_DIR/tools (as the CMake cache
# variable), else ../shared/tools next to the repository, else shared/tools inside it.
_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDS = [os.path.join(d, "tools") for d in (os.environ.get("LOGDIFF_SHARED_DIR"),) if d] + [
    os.path.join(_HERE, "..", "..", "shared", "tools"), os.path.join(_HERE, "..", "shared", "tools")]
for _cand in _CANDS:
    if os.path.exists(os.path.join(_cand, "sglang_render.py")):
        sys.path.insert(0, _cand)
        break
else:
    sys.exit("gen_bench_log: cannot find sglang_render.py in %s; set LOGDIFF_SHARED_DIR to the shared/ "
             "directory" % " or ".join(os.path.normpath(c) for c in _CANDS))
from sglang_render import BIG, Record, json_line, json_transform, text_render  # noqa: E402

LINE_MIN = 20_000
LINE_MAX = 200_000
IM_START, IM_END, ENDOFTEXT = 151644, 151645, 151643
VOCAB = 151643

# ------------------------------------------------------------------ text material
ENGLISH = [
    "The service started returning 502 errors shortly after the deploy at 14:05 UTC.",
    "I've checked the load balancer logs and they show the upstream closing the connection early.",
    "Could you explain why the \"retry\" policy didn't kick in here?",
    "We're seeing p99 latency climb from 180 ms to 2.4 s whenever the batch size exceeds 64.",
    "Please summarise the following incident report in three bullet points, and don't omit the root cause.",
    "It's not clear whether the cache was warm; the dashboard says 'hit ratio: 0.93' but that's averaged.",
    "Refactor the function so that it streams the file instead of reading it all into memory.",
    "Note: paths on the Windows runner look like C:\\Users\\build\\work\\src\\main.c and must be escaped.",
    "The regex r'\\d{4}-\\d{2}-\\d{2}' matches the date, but \\s+ eats the trailing tab.",
    "Make sure the answer is valid JSON, e.g. {\"status\": \"ok\", \"items\": [1, 2, 3]}.",
    "Thanks! That fixed it. Now, one more thing:",
    "According to the spec, a value of -1 means \"no limit\", which is what we want in production.",
    "Let me think about this step by step before answering.",
    "First, the tokenizer splits the prompt; second, the scheduler batches it; third, the model decodes.",
    "I'll write a test that reproduces the failure with a 3-line input file.",
    "The CSV has 14,203 rows; columns are id, name, created_at, amount (USD) and notes.",
    "Here is the stack trace from the worker (truncated by the terminal, sorry).",
    "Can you double-check the unit conversion? 1 GiB = 1073741824 bytes, not 10^9.",
    "The customer wrote: \u201cthe export button does nothing on Safari 17\u201d \u2014 I could reproduce it.",
    "Results: accuracy 0.912, F1 0.887, latency 41 ms \u00b1 3 ms (n = 500).",
]
CODE = [
    "def parse(line: str) -> dict:\n    key, _, value = line.partition('=')\n    return {key.strip(): value.strip()}\n",
    "for (size_t i = 0; i < n; i++) {\n\tif (buf[i] == '\\\\') { i++; continue; }\n\tif (buf[i] == '\\'') quote ^= 1;\n}\n",
    "print(f\"{name!r}: {value:>10.3f}\\n\")\n",
    "SELECT id, COUNT(*) AS n FROM events WHERE kind = 'click' AND ts > '2026-01-01' GROUP BY id;\n",
    "$ grep -E 'Finish: obj=' server.log | wc -l\n48213\n",
    "const re = /\"([^\"\\\\]|\\\\.)*\"/g;  // JSON string literal\n",
    "Traceback (most recent call last):\n  File \"/app/main.py\", line 42, in <module>\n    main()\nKeyError: 'user_id'\n",
    "{\n  \"name\": \"logdiff\",\n  \"version\": \"0.1.0\",\n  \"path\": \"C:\\\\tmp\\\\out.txt\"\n}\n",
    "fn main() {\n    let s = \"tab\\there\";\n    println!(\"{}\", s);\n}\n",
    "if [[ \"$x\" == *'\"'* ]]; then echo 'has a double quote'; fi\n",
    "    return ''.join(ch for ch in s if ch.isprintable())\n",
    "diff --git a/src/io.c b/src/io.c\n@@ -10,7 +10,7 @@\n-    n = read(fd, buf, 4096);\n+    n = read(fd, buf, sizeof buf);\n",
]
CJK = [
    "\u8bf7\u5e2e\u6211\u628a\u8fd9\u6bb5\u4ee3\u7801\u6539\u6210\u5f02\u6b65\u7248\u672c\uff0c\u5e76\u4fdd\u7559\u539f\u6709\u7684\u9519\u8bef\u5904\u7406\u3002",
    "\u8fd9\u4e2a\u95ee\u9898\u5728\u751f\u4ea7\u73af\u5883\u4e2d\u51fa\u73b0\u4e86\u4e09\u6b21\uff0c\u6bcf\u6b21\u90fd\u662f\u5728\u51cc\u6668\u4e24\u70b9\u5de6\u53f3\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3082\u6df7\u3056\u3063\u3066\u3044\u307e\u3059\uff1a\u300c\u8a2d\u5b9a\u30d5\u30a1\u30a4\u30eb\u304c\u898b\u3064\u304b\u308a\u307e\u305b\u3093\u300d\u3002",
    "\ud55c\uad6d\uc5b4 \uc0ac\uc6a9\uc790\ub3c4 \uc788\uc2b5\ub2c8\ub2e4. \ub85c\uadf8\ub97c \ud655\uc778\ud574 \uc8fc\uc138\uc694.",
    "\u6a21\u578b\u8f93\u51fa\u7684\u7ed3\u679c\u548c\u9884\u671f\u4e0d\u4e00\u81f4\uff0c\u5c24\u5176\u662f\u201c\u5f15\u53f7\u201d\u548c\u53cd\u659c\u6760\\\u7684\u5904\u7406\u3002",
]
EMOJI = ["\U0001F600", "\U0001F680", "\u2705", "\u26a0\ufe0f", "\U0001F525", "\U0001F44D", "\U0001F914", "\U0001F4C8"]

TOOL_NAMES = ["search_docs", "run_shell", "read_file", "write_file", "query_metrics", "http_get",
              "list_directory", "python_exec"]


def make_tools(rng):
    tools = []
    for name in rng.sample(TOOL_NAMES, rng.randint(3, 8)):
        tools.append({"type": "function", "function": {
            "name": name,
            "description": "%s. %s" % (name.replace("_", " ").capitalize(), " ".join(rng.choices(ENGLISH, k=2))),
            "parameters": {"type": "object", "properties": {
                "path": {"type": "string", "description": "Absolute path, e.g. '/srv/app/config.yaml'"},
                "query": {"type": "string", "description": "Free text; quotes (\") are allowed"},
                "limit": {"type": "integer", "default": 20, "minimum": 1},
                "recursive": {"type": "boolean", "default": False}},
                "required": ["path"] if name != "search_docs" else ["query"]},
            "strict": False}})
    return tools


class TextMaker:
    """Produces prose/code/CJK/emoji text of about a requested length, quickly."""

    def __init__(self, rng):
        self.rng = rng
        self.pool = ENGLISH * 6 + CODE * 3 + CJK * 2 + [" ".join(EMOJI[:3]), "\n\n", "\n- ", "\n"]

    def text(self, n_chars):
        rng, out, size = self.rng, [], 0
        while size < n_chars:
            chunk = rng.choices(self.pool, k=16)
            if rng.random() < 0.1:
                chunk.append(rng.choice(EMOJI))
            piece = " ".join(chunk)
            out.append(piece)
            size += len(piece)
        return "".join(out)[:n_chars]


# ------------------------------------------------------------------ conversations
class Session:
    """One agentic conversation; each request re-sends all messages so far plus one new one."""

    def __init__(self, rng, tm, conv_id):
        self.rng, self.tm = rng, tm
        self.model = rng.choice(["Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B", "default"])
        self.tools = make_tools(rng) if rng.random() < 0.7 else []
        self.messages = [{"role": "system", "content": tm.text(rng.randint(5_000, 9_000))}]
        self.temperature = rng.choice([0.0, 0.6, 0.7, 1.0])
        self.max_tokens = rng.choice([2048, 4096, 8192, 16384])
        self.stream = rng.random() < 0.6
        self.conv_id = conv_id
        self.prev_prompt_tokens = 0
        self._add_user()

    def _add_user(self):
        rng = self.rng
        self.messages.append({"role": "user", "content": self.tm.text(rng.randint(15_000, 24_000))})

    def add_turn(self, reply, reasoning, tool_calls):
        """Append the assistant reply of the previous request and a new user or tool message."""
        rng, msg = self.rng, {"role": "assistant", "content": reply}
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        if tool_calls:
            msg["tool_calls"] = tool_calls
        self.messages.append(msg)
        if tool_calls:
            for call in tool_calls:
                self.messages.append({"role": "tool", "content": self.tm.text(rng.randint(1_000, 6_000)),
                                      "tool_call_id": call["id"]})
        else:
            self._add_user()

    def payload(self):
        """The OpenAI request as pydantic model_dump(exclude_none=True) gives it."""
        p = {"model": self.model, "messages": [dict(m) for m in self.messages],
             "frequency_penalty": 0.0, "logprobs": False, "max_tokens": self.max_tokens, "n": 1,
             "presence_penalty": 0.0, "stream": self.stream, "temperature": self.temperature}
        if self.stream:
            p["stream_options"] = {"include_usage": True, "continuous_usage_stats": False}
        if self.tools:
            p["tool_choice"] = "auto"
            p["tools"] = self.tools
        p.update({"top_p": 0.95, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0,
                  "skip_special_tokens": True, "separate_reasoning": True, "stream_reasoning": True,
                  "chat_template_kwargs": {"enable_thinking": True}, "return_hidden_states": False})
        return p


def apply_template(messages, tools):
    """Qwen3-style <|im_start|> markup (history reasoning dropped, as Qwen3's template does)."""
    parts = []
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    if tools:
        parts.append("<|im_start|>system\n" + (system + "\n\n" if system else "") +
                     "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                     "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
        for t in tools:
            parts.append("\n" + json.dumps(t, ensure_ascii=False))
        parts.append("\n</tools>\n\nFor each function call, return a json object with function name and "
                     "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                     "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
    elif system is not None:
        parts.append("<|im_start|>system\n" + system + "<|im_end|>\n")
    prev_role = None
    for m in messages[1 if system is not None else 0:]:
        role = m["role"]
        if role == "tool":
            if prev_role != "tool":
                parts.append("<|im_start|>user")
            parts.append("\n<tool_response>\n" + m["content"] + "\n</tool_response>")
            prev_role = role
            continue
        if prev_role == "tool":
            parts.append("<|im_end|>\n")
        if role == "assistant":
            body = m["content"] or ""
            for call in m.get("tool_calls", ()):
                fn = call["function"]
                body += "\n<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>" % (fn["name"], fn["arguments"])
            parts.append("<|im_start|>assistant\n" + body + "<|im_end|>\n")
        else:
            parts.append("<|im_start|>" + role + "\n" + m["content"] + "<|im_end|>\n")
        prev_role = role
    if prev_role == "tool":
        parts.append("<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


_SPECIAL = re.compile(r"(<\|im_start\|>|<\|im_end\|>)")
_SPECIAL_IDS = {"<|im_start|>": IM_START, "<|im_end|>": IM_END}


class FakeTokenizer:
    """~1 token per 4 characters; the same 4-character chunk always gets the same id (like a real BPE)."""

    def __init__(self):
        self.cache = {}

    def encode(self, text):
        ids, cache = [], self.cache
        for piece in _SPECIAL.split(text):
            if piece in _SPECIAL_IDS:
                ids.append(_SPECIAL_IDS[piece])
                continue
            for i in range(0, len(piece), 4):
                chunk = piece[i:i + 4]
                tid = cache.get(chunk)
                if tid is None:
                    tid = cache[chunk] = zlib.crc32(chunk.encode("utf-8", "surrogatepass")) % VOCAB
                ids.append(tid)
        return ids


# ------------------------------------------------------------------ one request
def sampling_params(s):
    return {"temperature": s.temperature, "max_new_tokens": s.max_tokens, "min_new_tokens": 0,
            "stop": None, "stop_token_ids": None, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
            "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0,
            "regex": None, "ebnf": None, "n": 1, "json_schema": None, "no_stop_trim": False,
            "ignore_eos": False, "skip_special_tokens": True, "spaces_between_special_tokens": True,
            "custom_params": None, "stream_interval": None, "logit_bias": None}


def gen_req_fields(rid, text, input_ids, s):
    """GenerateReqInput fields in the late-2025/2026 order (rid first, then http_worker_ipc)."""
    return [("rid", rid), ("http_worker_ipc", None), ("text", text), ("input_ids", input_ids),
            ("input_embeds", None), ("image_data", None), ("video_data", None), ("audio_data", None),
            ("sampling_params", sampling_params(s)), ("return_logprob", False), ("logprob_start_len", -1),
            ("top_logprobs_num", 0), ("token_ids_logprob", None), ("return_text_in_logprobs", True),
            ("stream", s.stream), ("log_metrics", True), ("return_hidden_states", False),
            ("modalities", []), ("session_params", None), ("lora_path", None), ("lora_id", None),
            ("custom_logit_processor", None), ("bootstrap_host", None), ("bootstrap_port", None),
            ("bootstrap_room", None), ("bootstrap_pair_key", None), ("data_parallel_rank", None),
            ("background", False), ("conversation_id", None), ("priority", None), ("extra_key", None),
            ("no_logs", False), ("custom_labels", None), ("return_bytes", False), ("return_entropy", False)]


class Request:
    """Everything needed to write the three lines of one request."""

    def __init__(self, rng, tm, tok, session, t0):
        s = self.session = session
        self.rng = rng
        self.rid = "%032x" % rng.getrandbits(128)
        self.payload = s.payload()
        self.prompt = apply_template(s.messages, s.tools)
        self.input_ids = tok.encode(self.prompt)
        # the model's answer: reasoning, then either tool calls or a final answer
        self.reasoning = tm.text(rng.randint(300, 3_000)) if rng.random() < 0.7 else None
        self.reply = tm.text(rng.randint(200, 4_000))
        self.tool_calls = []
        if s.tools and rng.random() < 0.5:
            for index in range(rng.randint(1, 2)):
                fn = rng.choice(s.tools)["function"]["name"]
                args = json.dumps({"path": "/srv/app/" + rng.choice(["main.py", "conf/app.yaml", "logs/err.log"]),
                                   "query": rng.choice(ENGLISH)[:60], "limit": rng.randint(1, 50)},
                                  ensure_ascii=False)
                self.tool_calls.append({"id": "call_%024x" % rng.getrandbits(96), "type": "function",
                                        "function": {"name": fn, "arguments": args}, "index": index})
        out_text = ""
        if self.reasoning is not None:
            out_text = "<think>\n" + self.reasoning + "\n</think>\n\n"
        out_text += self.reply
        for call in self.tool_calls:
            out_text += "\n<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>" % (
                call["function"]["name"], call["function"]["arguments"])
        self.out_text = out_text
        self.output_ids = tok.encode(out_text)
        self.reasoning_tokens = len(tok.encode(self.reasoning)) + 2 if self.reasoning is not None else 0
        if rng.random() < 0.06:
            self.finish_reason = {"type": "length", "length": len(self.output_ids)}
        else:
            self.finish_reason = {"type": "stop", "matched": IM_END if rng.random() < 0.95 else ENDOFTEXT}
            self.output_ids.append(self.finish_reason["matched"])
        self.cached = (s.prev_prompt_tokens // 64) * 64 if s.prev_prompt_tokens else 0
        self.t_receive = t0
        self.latency = 0.4 + len(self.output_ids) / rng.uniform(40.0, 120.0)
        self.events = ["openai", "receive", "finish"]
        pb, ob = len(self.prompt.encode("utf-8")) * 1.1, len(out_text.encode("utf-8")) * 1.1
        self.est = {"openai": pb, "receive": 7.9 * len(self.input_ids) + 1_500,
                    "finish": pb + ob + 7.9 * (len(self.input_ids) + len(self.output_ids)) + 2_000}

    def gen_req(self, with_text):
        return Record("GenerateReqInput", gen_req_fields(self.rid, self.prompt if with_text else None,
                                                         self.input_ids, self.session))

    def out(self):
        meta = {"id": self.rid, "finish_reason": self.finish_reason, "prompt_tokens": len(self.input_ids),
                "weight_version": "default", "num_retractions": 0, "reasoning_tokens": self.reasoning_tokens,
                "completion_tokens": len(self.output_ids), "cached_tokens": self.cached,
                "e2e_latency": round(self.latency, 6),
                "response_sent_to_client_ts": round(self.t_receive + self.latency + 0.0004, 6)}
        return {"text": self.out_text, "output_ids": self.output_ids, "meta_info": meta}

    def line(self, event, fmt, now):
        """Render one event line (without the trailing newline)."""
        if fmt == "json":
            ts = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).replace(tzinfo=None).isoformat()
            if event == "openai":
                return json_line("request.received.openai", {"obj": json_transform(self.payload, BIG)}, ts)
            obj = json_transform(self.gen_req(event == "finish"), BIG)
            data = {"rid": self.rid, "obj": obj}
            if event == "finish":
                data["out"] = json_transform(self.out(), BIG)
                return json_line("request.finished", data, ts)
            return json_line("request.received", data, ts)
        prefix = "[%s] " % stamp(now)
        if event == "openai":
            return prefix + "Receive OpenAI: obj=" + text_render(self.payload, BIG)
        if event == "receive":
            return prefix + "Receive: obj=" + text_render(self.gen_req(False), BIG)
        return (prefix + "Finish: obj=" + text_render(self.gen_req(True), BIG) +
                ", out=" + text_render(self.out(), BIG))


def stamp(now):
    return datetime.datetime.fromtimestamp(int(now), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# ------------------------------------------------------------------ noise
def noise_line(rng, now, running):
    ts = stamp(now)
    r = rng.random()
    if r < 0.35:
        return ("[%s TP0] Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: %d, token usage: %.2f, "
                "#running-req: %d, #queue-req: %d, input throughput (token/s): %.2f, cuda graph: False"
                % (ts, rng.randint(200, 16384), rng.choice([0, 0, 4096, 8192]), rng.uniform(0.01, 0.6),
                   running, rng.randint(0, 3), rng.uniform(1000, 40000)))
    if r < 0.75:
        return ("[%s TP0] Decode batch, #running-req: %d, #token: %d, token usage: %.2f, cuda graph: True, "
                "gen throughput (token/s): %.2f, #queue-req: %d"
                % (ts, running, rng.randint(2000, 200000), rng.uniform(0.01, 0.6), rng.uniform(40, 900),
                   rng.randint(0, 3)))
    if r < 0.95:
        return ('[%s] INFO:     10.27.%d.%d:%d - "POST /v1/chat/completions HTTP/1.1" 200 OK'
                % (ts, rng.randint(0, 9), rng.randint(1, 254), rng.randint(30000, 65000)))
    return '[%s] INFO:     127.0.0.1:%d - "GET /health HTTP/1.1" 200 OK' % (ts, rng.randint(30000, 65000))


# ------------------------------------------------------------------ driver
def too_big(req):
    """Rough size check before rendering: the Finish line is prompt + ids + output (+ ~2 KB of fields)."""
    est = (len(req.prompt.encode("utf-8")) * 1.15 + 7.9 * (len(req.input_ids) + len(req.output_ids)) +
           len(req.out_text.encode("utf-8")) * 1.15 + 4_000)
    return est > LINE_MAX * 0.97


def generate(out, size_bytes, seed, fmt, concurrency):
    rng = random.Random(seed)
    tm, tok = TextMaker(rng), FakeTokenizer()
    now = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.timezone.utc).timestamp()
    written, n_req, n_conv, longest = 0, 0, 0, 0
    sessions, inflight = [], []
    sizes = []

    def emit(text):
        nonlocal written
        data = (text + "\n").encode("utf-8", "surrogatepass")
        out.write(data)
        written += len(data)
        return len(data)

    def new_request():
        nonlocal n_req, n_conv
        while True:
            if not sessions or rng.random() < 0.15 or len(sessions) < concurrency:
                n_conv += 1
                sessions.append(Session(rng, tm, n_conv))
            s = rng.choice(sessions)
            req = Request(rng, tm, tok, s, now)
            if too_big(req):                     # conversation grew too long: retire it, start another
                sessions.remove(s)
                continue
            s.prev_prompt_tokens = len(req.input_ids)
            s.add_turn(req.reply, req.reasoning, req.tool_calls)   # next request in this session sees it
            if len(sessions) > concurrency * 2:
                sessions.remove(rng.choice(sessions))
            n_req += 1
            return req

    while written < size_bytes or inflight:
        now += rng.uniform(0.01, 0.6)
        # admit a request only while the lines still owed by those in flight do not reach the target
        pending = sum(req.est[e] for req in inflight for e in req.events)
        if written + pending < size_bytes and (len(inflight) < concurrency and rng.random() < 0.5 or not inflight):
            inflight.append(new_request())
        elif not inflight:
            break
        r = rng.random()
        if r < 0.25:
            emit(noise_line(rng, now, len(inflight)))
            continue
        req = rng.choice(inflight)
        event = req.events.pop(0)
        n = emit(req.line(event, fmt, now)) - 1
        sizes.append(n)
        longest = max(longest, n)
        if not req.events:
            inflight.remove(req)
    return {"bytes": written, "requests": n_req, "conversations": n_conv, "request_lines": len(sizes),
            "min_line": min(sizes) if sizes else 0, "longest_line": longest,
            "mean_line": (sum(sizes) // len(sizes)) if sizes else 0}


def main():
    ap = argparse.ArgumentParser(description="Write a synthetic SGLang level-3 request log for benchmarks.")
    ap.add_argument("out", help="output file ('-' = stdout)")
    ap.add_argument("--size-mb", type=float, default=100, help="target size in MB (10^6 bytes), default 100")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--format", choices=["text", "json"], default="text",
                    help="--log-requests-format of the imitated server (default text)")
    ap.add_argument("--concurrency", type=int, default=6, help="requests in flight at once (default 6)")
    ap.add_argument("--stats", action="store_true", help="print size statistics to stderr as JSON")
    args = ap.parse_args()
    size = int(args.size_mb * 1_000_000)
    if args.out == "-":
        stats = generate(sys.stdout.buffer, size, args.seed, args.format, args.concurrency)
    else:
        with open(args.out, "wb", buffering=1 << 20) as fh:
            stats = generate(fh, size, args.seed, args.format, args.concurrency)
    if stats["request_lines"] and (stats["min_line"] < LINE_MIN or stats["longest_line"] > LINE_MAX):
        print("gen_bench_log: warning: request line sizes %d..%d outside %d..%d"
              % (stats["min_line"], stats["longest_line"], LINE_MIN, LINE_MAX), file=sys.stderr)
    if args.stats:
        print(json.dumps(stats), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
