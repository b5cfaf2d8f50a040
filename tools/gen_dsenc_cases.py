#!/usr/bin/env python3
"""gen_dsenc_cases.py - expected prompts for tests/replay/template/deepseek/test_dsenc.c.

DeepSeek-V3.2 and DeepSeek-V4 have no Jinja chat template: SGLang builds
their prompt with Python encoders (encoding_dsv32.py, encoding_dsv4.py).
This script runs the requests below through SGLang's own encoder functions,
preceded by a small shim (sglang_prepare) that mirrors what SGLang's chat
endpoint does to a request before it calls the encoder (protocol.py
validators and model_dump, serving_chat.py _validate_request,
_convert_to_internal_request, _process_messages and the dsv branch of
_apply_jinja_template).  The shim is ours; the encoding is SGLang's.

The sglang wheel is pinned (SGLANG_VERSION) and fetched without its
dependencies into ~/.cache/logdiff/sglang-<version>/ (override with
$LOGDIFF_CACHE); only the two encoder files are loaded from it, with
importlib, because they use the Python standard library only.

Output: testdata/replay/dsenc/v32.json and v4.json, each a list of
{"name", "request", "expect"} or {"name", "request", "error"} ("error" is
"<ExceptionType>: <message>" of the refusal).
Floats in requests must not be integral (the C side reads JSON with cJSON,
which cannot tell 2.0 from 2).

Regenerate:  python3 tools/gen_dsenc_cases.py
             (writes both files; needs pip and, the first time, network)
"""
import copy
import glob
import importlib.util
import json
import os
import subprocess
import sys
import zipfile

SGLANG_VERSION = "0.5.22"
ENC_DIR = "sglang/srt/entrypoints/openai/"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "testdata", "replay", "dsenc")


def load_encoders():
    """Downloads (once) the pinned wheel and imports its two encoders."""
    cache = os.path.join(os.environ.get("LOGDIFF_CACHE", os.path.expanduser("~/.cache/logdiff")),
                         "sglang-" + SGLANG_VERSION)
    os.makedirs(cache, exist_ok=True)
    wheels = glob.glob(os.path.join(cache, "sglang-%s-*.whl" % SGLANG_VERSION))
    if not wheels:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64",
                               "sglang==" + SGLANG_VERSION, "-d", cache])
        wheels = glob.glob(os.path.join(cache, "sglang-%s-*.whl" % SGLANG_VERSION))
    mods = {}
    with zipfile.ZipFile(wheels[0]) as z:
        for name in ("encoding_dsv32", "encoding_dsv4"):
            path = os.path.join(cache, name + ".py")
            with open(path, "wb") as f:
                f.write(z.read(ENC_DIR + name + ".py"))
            spec = importlib.util.spec_from_file_location("logdiff_" + name, path)
            mods[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mods[name])
    return mods["encoding_dsv32"], mods["encoding_dsv4"]


# ---------------------------------------------------------------------------
# The shim: SGLang's request handling up to the encoder call (sglang 0.5.22).
# ---------------------------------------------------------------------------
GENERIC_ROLES = ("system", "assistant", "tool", "function", "developer", "latest_reminder")
EFFORT_TIERS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
TASKS = ("action", "query", "authority", "domain", "title", "read_url")
MEDIA_PARTS = ("image_url", "video_url", "audio_url", "input_audio")


class ProtocolError(ValueError):
    """A request SGLang rejects before encoding (pydantic or _validate_request)."""


def dump_tool(t):
    """protocol.Tool(...).model_dump(): fields in model order, Function drops
    defer_loading when None, Tool.defer_loading propagates into the function."""
    if not isinstance(t, dict) or not isinstance(t.get("function"), dict) \
            or not isinstance(t["function"].get("name"), str):
        raise ProtocolError("tool needs function.name")
    f = t["function"]
    fn = {"description": f.get("description"), "name": f["name"],
          "parameters": f.get("parameters"), "strict": bool(f.get("strict", False))}
    defer = f.get("defer_loading") if f.get("defer_loading") is not None else t.get("defer_loading")
    if defer is not None:
        fn["defer_loading"] = defer
    return {"type": t.get("type", "function"), "function": fn, "defer_loading": t.get("defer_loading")}


def dump_content(content, role):
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ProtocolError("content must be a string or a list of parts")
    parts = []
    for p in content:
        ty = p.get("type") if isinstance(p, dict) else None
        if ty == "text" and isinstance(p.get("text"), str):
            parts.append({"type": "text", "text": p["text"]})
        elif ty in ("thinking", "reasoning") and role == "assistant":
            parts.append({"type": ty, "thinking": p.get("thinking"), "text": p.get("text")})
        elif ty == "tool_reference" and isinstance(p.get("name"), str):
            parts.append({"type": ty, "name": p["name"]})
        elif ty in MEDIA_PARTS:  # _validate_media_content: DeepSeek V3.2/V4 are text-only
            raise ProtocolError("media content is not supported by this model")
        else:
            raise ProtocolError("invalid content part")
    return parts


def dump_message(m):
    """ChatCompletionMessageParam(...).model_dump(): a user message keeps role
    and content only; the generic model lower-cases the role and carries every
    field, None when absent."""
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise ProtocolError("message needs a role")
    if m["role"] == "user":
        if m.get("content") is None:
            raise ProtocolError("user content is required")
        return {"role": "user", "content": dump_content(m["content"], "user")}
    role = m["role"].lower()
    if role not in GENERIC_ROLES:
        raise ProtocolError("invalid role")
    calls = None
    if m.get("tool_calls") is not None:
        calls = []
        for tc in m["tool_calls"]:
            fn = tc.get("function")
            if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), (str, dict, type(None))):
                raise ProtocolError("invalid tool call")
            calls.append({"id": tc.get("id"), "index": tc.get("index"), "type": "function",
                          "function": {"name": fn.get("name"), "arguments": fn.get("arguments")}})
    rc = m.get("reasoning_content")
    if rc is not None and not isinstance(rc, str):
        raise ProtocolError("reasoning_content must be a string")
    tools = [dump_tool(t) for t in m["tools"]] if m.get("tools") is not None else None
    return {"role": role, "content": dump_content(m.get("content"), role), "tool_call_id": m.get("tool_call_id"),
            "name": m.get("name"), "phase": m.get("phase"), "reasoning_content": rc,
            "tool_calls": calls, "tools": tools}


def validate_request(req, msgs, tools):
    """ChatCompletionRequest before-validators that change fields, plus
    serving_chat._validate_request (tool_choice checks)."""
    msg_tools = [t for m in msgs if m["role"] in ("system", "developer") for t in (m.get("tools") or [])]
    if req.get("tool_choice") is None:  # set_tool_choice_default
        req["tool_choice"] = "none" if req.get("tools") is None and not msg_tools else "auto"
    # normalize_reasoning_inputs: `reasoning` and reasoning_effort default the
    # thinking switch in chat_template_kwargs.
    thinking = None
    r = req.get("reasoning")
    if isinstance(r, dict):
        eff = r.get("effort") if r.get("effort") is not None else r.get("reasoning_effort")
        if eff is not None:
            req["reasoning_effort"] = eff
        enabled = r.get("enabled") if r.get("enabled") is not None else r.get("enable", False)
        if isinstance(enabled, str):
            enabled = enabled.strip().lower() in {"1", "true", "yes", "y", "on"}
        if enabled:
            thinking = True
    eff = req.get("reasoning_effort")
    if isinstance(eff, bool):
        raise ProtocolError("reasoning_effort must not be a boolean")
    if eff is not None and eff not in EFFORT_TIERS:
        try:  # pydantic's lax Union[Literal, float] coerces numeric strings
            num = float(eff)
        except (TypeError, ValueError):
            raise ProtocolError("invalid reasoning_effort")
        if not 0 <= num <= 0.99:
            raise ProtocolError("reasoning_effort out of [0, 0.99]")
    if eff is not None:
        thinking = eff != "none"
    if thinking is not None:
        ctk = req.get("chat_template_kwargs")
        ctk = ctk if isinstance(ctk, dict) else {}
        ctk.setdefault("thinking", thinking)
        ctk.setdefault("enable_thinking", thinking)
        req["chat_template_kwargs"] = ctk
    if req.get("task") is not None and req["task"] not in TASKS:
        raise ProtocolError("invalid task")
    tc = req["tool_choice"]
    if not (tc in ("auto", "required", "none") or (isinstance(tc, dict) and isinstance(tc.get("function"), dict))):
        raise ProtocolError("invalid tool_choice")
    if not msgs:
        raise ProtocolError("Messages cannot be empty.")
    effective = (tools or []) + msg_tools
    if tc == "required" and not effective:
        raise ProtocolError("Tools cannot be empty if tool choice is set to required.")
    if isinstance(tc, dict):
        if not any(t["function"]["name"] == tc["function"].get("name") for t in effective):
            raise ProtocolError("Tool not found in tools list.")
    if msg_tools and len({t["function"]["name"] for t in effective}) != len(effective):
        raise ProtocolError("Tool names must be unique across request and message tools.")
    return effective


def normalize_tool_call_arguments(m):
    """serving_chat.normalize_assistant_tool_call_arguments(strict=True)."""
    if m["role"] != "assistant" or not isinstance(m.get("tool_calls"), list):
        return
    for tc in m["tool_calls"]:
        args = tc["function"]["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)  # orjson.loads in SGLang
            except ValueError:
                raise ValueError("Assistant tool call function.arguments must be valid JSON.")
            if not isinstance(args, dict):
                raise ValueError("Assistant tool call function.arguments must be a JSON object.")
            tc["function"]["arguments"] = args


def sglang_prepare(req, spec):
    """Returns (messages, thinking_mode, reasoning_effort, assistant_prefix)."""
    req = copy.deepcopy(req)
    if not isinstance(req.get("messages"), list):
        raise ProtocolError("messages must be a list")
    msgs = [dump_message(m) for m in req["messages"]]
    tools = [dump_tool(t) for t in req["tools"]] if req.get("tools") is not None else None
    effective = validate_request(req, msgs, tools)
    ctk = req.get("chat_template_kwargs") or {}
    if ctk.get("reasoning_effort") is not None:  # _convert_to_internal_request
        req["reasoning_effort"] = ctk.pop("reasoning_effort")
    # _process_messages: which tools reach the template
    sel = None
    if effective and req["tool_choice"] != "none":
        if isinstance(req["tool_choice"], dict):
            sel = [t for t in tools or [] if t["function"]["name"] == req["tool_choice"]["function"].get("name")] or None
        elif tools:
            sel = tools
    # _apply_jinja_template, dsv4/dsv32 branch
    thinking_mode = "thinking" if ctk.get("thinking", False) else "chat"
    for m in msgs:
        normalize_tool_call_arguments(m)
    for i, m in enumerate(msgs):
        if m.get("content") is None:
            m["content"] = ""
        if isinstance(m["content"], list):  # process_content_for_template_format(..., "string")
            texts = [p["text"] for p in m["content"] if p.get("type") in ("text", "input_text")]
            m = {k: v for k, v in m.items() if v is not None}
            m["content"] = " ".join(texts)
            msgs[i] = m
    prefix = None  # _handle_last_assistant_message
    if msgs and msgs[-1]["role"] == "assistant":
        if req.get("continue_final_message"):
            prefix = msgs[-1]["content"]
            msgs = msgs[:-1]
        else:
            msgs[-1] = {"role": "user", "content": msgs[-1]["content"]}
    request_tools = tools if sel else None
    if msgs[0]["role"] != "system":
        msgs.insert(0, {"role": "system", "content": ""})
    if request_tools:
        msgs[0]["tools"] = request_tools
    effort = None
    if spec == "dsv4":
        # "preview" profile (the default when the model is not recognised as
        # an official DeepSeek-V4 release); values it does not accept -> None.
        effort = req.get("reasoning_effort") if req.get("reasoning_effort") in ("high", "max") else None
        if req.get("task") is not None:
            ENC4.attach_task_to_last_user_message(msgs, req["task"])
    return msgs, thinking_mode, effort, prefix


def sglang_prompt(req, spec):
    msgs, mode, effort, prefix = sglang_prepare(req, spec)
    if spec == "dsv4":
        text = ENC4.encode_messages(msgs, thinking_mode=mode, reasoning_effort=effort,
                                    reasoning_effort_profile="preview")
    else:
        text = ENC32.encode_messages(msgs, thinking_mode=mode)
    return text + (prefix or "")  # the prefix is appended as tokens


# ---------------------------------------------------------------------------
# Requests (our own).
# ---------------------------------------------------------------------------
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer", "minimum": 1}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string", "description": "query \u2014 \u00abquoted\u00bb \"x\" \\ {{ y }}"}}}}}


def U(c): return {"role": "user", "content": c}
def S(c): return {"role": "system", "content": c}
def A(c, rc=None, calls=None, **kw):
    m = {"role": "assistant", "content": c}
    if rc is not None: m["reasoning_content"] = rc
    if calls is not None: m["tool_calls"] = calls
    m.update(kw)
    return m
def T(c, cid=None):
    m = {"role": "tool", "content": c}
    if cid is not None: m["tool_call_id"] = cid
    return m
def call(name, args, cid=None):
    c = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid is not None: c["id"] = cid
    return c
def R(msgs, **kw):
    r = {"model": "deepseek", "messages": msgs}
    r.update(kw)
    return r


TH = {"chat_template_kwargs": {"thinking": True}}
WX_CALL = [call("get_weather", '{"city": "Paris"}', "call_1")]
AGENT = [U("Weather in Paris?"), A("Let me check.", "need weather", WX_CALL), T('{"temp_c": 21}', "call_1"),
         A("It is 21C in Paris.", "answer"), U("Thanks")]
PARALLEL = [U("Paris and Tokyo?"),
            A("", "two calls", [call("get_weather", {"city": "Paris"}, "c1"),
                                call("get_weather", {"city": "Tokyo", "days": 2}, "c2")]),
            T("sunny", "c1"), T("rain", "c2"), A("Paris sunny, Tokyo rain.", "done"), U("And Rome?")]
LONG = ("lorem ipsum dolor sit amet " * 400).strip()

COMMON = [
    ("user_only", R([U("Hello")])),
    ("system_user", R([S("You are terse."), U("Hi")])),
    ("multi_turn_chat", R([S("S"), U("Q1"), A("A1"), U("Q2")])),
    ("multi_turn_thinking", R([S("S"), U("Q1"), A("A1", "R1"), U("Q2")], **TH)),
    ("thinking_reasoning_dropped_chat", R([U("Q1"), A("A1", "R1"), U("Q2")])),
    ("enable_thinking_ignored", R([U("Q1"), A("A1", "R1"), U("Q2")], chat_template_kwargs={"enable_thinking": True})),
    ("thinking_false", R([U("Q")], chat_template_kwargs={"thinking": False})),
    ("thinking_truthy_int", R([U("Q")], chat_template_kwargs={"thinking": 1})),
    ("effort_high", R([U("Q1"), A("A1", "R1"), U("Q2")], reasoning_effort="high")),
    ("effort_max", R([S("sys"), U("Q")], reasoning_effort="max")),
    ("effort_max_no_system", R([U("Q")], reasoning_effort="max")),
    ("effort_none", R([U("Q")], reasoning_effort="none")),
    ("effort_low", R([U("Q")], reasoning_effort="low")),
    ("effort_max_thinking_off", R([U("Q")], reasoning_effort="max", chat_template_kwargs={"thinking": False})),
    ("effort_in_kwargs", R([U("Q")], chat_template_kwargs={"thinking": True, "reasoning_effort": "max"})),
    ("effort_float", R([U("Q")], reasoning_effort=0.5)),
    ("reasoning_object", R([U("Q")], reasoning={"enabled": True})),
    ("tools_args_string", R(AGENT, tools=[WEATHER])),
    ("tools_args_string_thinking", R(AGENT, tools=[WEATHER], **TH)),
    ("tools_no_request_tools", R(AGENT)),
    ("tools_no_request_tools_thinking", R(AGENT, **TH)),
    ("tools_args_object", R([U("Go"), A(None, None, [call("search", {"q": "x", "n": 3, "f": 1.5, "ok": True,
                                                                     "none": None, "l": [1, "a"], "o": {"k": "v"}},
                                                            "s1")]),
                             T("found", "s1"), U("ok")], tools=[SEARCH, WEATHER])),
    ("tools_args_invalid_json", R([U("Go"), A("", None, [call("search", "{not json", "s1")]), T("x", "s1"), U("k")],
                                  tools=[SEARCH])),
    ("tools_args_not_object", R([U("Go"), A("", None, [call("search", "[1, 2]", "s1")]), T("x", "s1"), U("k")],
                                tools=[SEARCH])),
    ("tools_args_null", R([U("Go"), A("", None, [call("search", None, "s1")]), T("x", "s1"), U("k")],
                          tools=[SEARCH])),
    ("tools_args_unicode", R([U("Go"), A("", None, [call("search", '{"q": "\u6771\u4eac \U0001F600", "n": [1.25, false]}')]),
                              T("\u7d50\u679c"), U("k")], tools=[SEARCH])),
    ("tool_call_no_name", R([U("Go"), A("", None, [{"type": "function", "function": {"arguments": "{}"}}]),
                             T("r"), U("k")])),
    ("parallel_calls", R(PARALLEL, tools=[WEATHER])),
    ("parallel_calls_thinking", R(PARALLEL, tools=[WEATHER], **TH)),
    ("parallel_calls_thinking_no_tools", R(PARALLEL, **TH)),
    ("tool_results_out_of_order", R([U("both"), A("", None, [call("get_weather", {"city": "A"}, "a"),
                                                            call("get_weather", {"city": "B"}, "b"),
                                                            call("search", {"q": "C"}, "c")]),
                                     T("rc", "c"), T("ra", "a"), T("rb", "b"), U("next")], tools=[WEATHER, SEARCH])),
    ("tool_results_unknown_ids", R([U("both"), A("", None, [call("get_weather", {"city": "A"}, "a"),
                                                           call("get_weather", {"city": "B"}, "b")]),
                                    T("rx", "zz"), T("rb", "b"), U("next")])),
    ("tool_results_then_user", R([U("go"), A("", None, [call("search", {"q": "1"}, "x")]), T("r1", "x"),
                                  U("and also this"), A("fine")])),
    ("agent_loop_ends_in_tool", R([U("go"), A("", "plan", [call("search", {"q": "1"}, "x")]), T("r1", "x")],
                                  tools=[SEARCH], **TH)),
    ("agent_loop_ends_in_tool_no_tools", R([U("go"), A("", "plan", [call("search", {"q": "1"}, "x")]), T("r1", "x")],
                                           **TH)),
    ("last_assistant_becomes_user", R([U("Q"), A("partial", "rc", WX_CALL)])),
    ("last_assistant_thinking", R([U("Q"), A("partial", "rc")], **TH)),
    ("continue_final_message", R([U("Q"), A("The answer is")], continue_final_message=True)),
    ("continue_final_message_thinking", R([U("Q"), A("The answer is")], continue_final_message=True, **TH)),
    ("tool_choice_none", R([U("Q")], tools=[WEATHER], tool_choice="none")),
    ("tool_choice_named", R([U("Q")], tools=[WEATHER, SEARCH],
                            tool_choice={"type": "function", "function": {"name": "search"}})),
    ("tool_choice_named_missing", R([U("Q")], tools=[WEATHER],
                                    tool_choice={"type": "function", "function": {"name": "nope"}})),
    ("tool_choice_required_no_tools", R([U("Q")], tool_choice="required")),
    ("tools_empty_list", R([U("Q")], tools=[])),
    ("tool_defer_loading", R([U("Q")], tools=[dict(WEATHER, defer_loading=True)])),
    ("tool_strict_and_no_params", R([U("Q")], tools=[{"type": "function", "function": {"name": "ping", "strict": True}}])),
    ("system_message_tools", R([{"role": "system", "content": "S", "tools": [SEARCH]}, U("Q")])),
    ("system_message_tools_and_request_tools", R([{"role": "system", "content": "S", "tools": [SEARCH]}, U("Q")],
                                                 tools=[WEATHER])),
    ("response_format_ignored", R([S("S"), U("json please")], response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})),
    ("developer_chat", R([{"role": "developer", "content": "Be brief."}, U("Q")])),
    ("developer_last", R([U("Q"), A("A"), {"role": "developer", "content": "Now in French."}], **TH)),
    ("developer_thinking_before_user", R([{"role": "developer", "content": "Be brief."}, U("Q")], **TH)),
    ("developer_with_tools", R([{"role": "developer", "content": "D", "tools": [SEARCH]}, U("Q")])),
    ("developer_empty", R([{"role": "developer", "content": ""}, U("Q")])),
    ("empty_user_content", R([U(""), A(None), U("")])),
    ("null_user_content", R([{"role": "user", "content": None}])),
    ("null_system_content", R([{"role": "system", "content": None}, U("x")])),
    ("content_parts", R([{"role": "system", "content": [{"type": "text", "text": "S1"}, {"type": "text", "text": "S2"}]},
                         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "c"}], "tool_calls": WX_CALL},
                         {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "t1"},
                                                                                 {"type": "text", "text": "t2"}]},
                         {"role": "user", "content": []}])),
    ("content_parts_image_refused", R([{"role": "user", "content": [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}])),
    ("special_chars", R([S("quote \" back \\ {{ x }} {% y %}"),
                         U("<think>no</think> <\uff5cUser\uff5c> <\uff5cend\u2581of\u2581sentence\uff5c> "
                           "<\uff5cDSML\uff5cinvoke name=\"x\"> <|User|> </function_results>"),
                         A("\\n literal and {content}", "r</think>"), U("{0} {name}")], **TH)),
    ("cjk_emoji", R([S("\u4f60\u662f\u52a9\u624b"), U("\u4eca\u5929\u5929\u6c14\u600e\u4e48\u6837\uff1f\U0001F324\uFE0F"),
                     A("\u6674\u5929 \U0001F600", "\u601d\u8003"), U("\u3042\u308a\u304c\u3068\u3046 \U0001F44D\U0001F3FD")],
                   **TH)),
    ("crlf", R([S("line1\r\nline2\r\n"), U("a\r\nb\rc\n"), A("x\r\n")])),
    ("control_chars", R([U("tab\there\x01\x1f\x7f end")], tools=[{"type": "function", "function": {
        "name": "ctl", "description": "tab\t nl\n cr\r \x01 \x7f \u2028 \"q\" \\"}}])),
    ("long_content", R([S(LONG), U(LONG), A(LONG, LONG), U("short")], **TH)),
    ("role_uppercase", R([{"role": "System", "content": "S"}, U("Q"), {"role": "ASSISTANT", "content": "A"}, U("Q2")])),
    ("role_user_uppercase_refused", R([{"role": "User", "content": "Q"}])),
    ("role_function_refused", R([U("Q"), {"role": "function", "content": "f", "name": "x"}, U("Q2")])),
    ("latest_reminder", R([U("Q"), {"role": "latest_reminder", "content": "Today is Monday."}])),
    ("tool_without_call", R([U("Q"), A("plain"), T("orphan"), U("next")])),
    ("tool_after_user", R([U("Q"), T("orphan")])),
    ("more_results_than_calls", R([U("Q"), A("", None, WX_CALL), T("r1", "call_1"), T("r2"), U("n")])),
    ("thinking_assistant_without_reasoning", R([U("Q"), A("plain"), T("orphan")], **TH)),
    ("consecutive_users", R([U("one"), U("two"), A("ok"), U("three")])),
    ("system_not_first", R([U("Q"), S("late system"), U("Q2")])),
    ("system_only", R([S("just system")])),
    ("empty_messages", R([])),
    ("task_query", R([S("S"), U("classify this")], task="query")),
    ("task_action_thinking", R([U("a"), A("b"), U("do it")], task="action", **TH)),
    ("task_invalid", R([U("a")], task="nope")),
    ("reasoning_content_not_string", R([U("a"), A("b", 5), U("c")])),
    # more request switches
    ("tool_choice_required", R([U("Q")], tools=[WEATHER], tool_choice="required")),
    ("tool_choice_invalid", R([U("Q")], tools=[WEATHER], tool_choice="sometimes")),
    ("thinking_null_with_effort", R([U("Q")], reasoning_effort="high", chat_template_kwargs={"thinking": None})),
    ("reasoning_enabled_string", R([U("Q")], reasoning={"enabled": " Yes "})),
    ("reasoning_effort_in_object", R([U("Q")], reasoning={"effort": "max"})),
    ("effort_numeric_string", R([U("Q")], reasoning_effort="0.25")),
    ("effort_out_of_range", R([U("Q")], reasoning_effort=1.5)),
    ("effort_bool", R([U("Q")], reasoning_effort=True)),
    ("kwargs_not_object", R([U("Q")], chat_template_kwargs="thinking")),
    # tool schemas and calls
    ("tool_extra_fields_dropped", R([U("Q")], tools=[{"type": "function", "x_tool": 1, "function": {
        "parameters": {"type": "object"}, "examples": [1], "name": "f", "description": "d"}}])),
    ("tool_params_null", R([U("Q")], tools=[{"type": "function", "function": {"name": "f", "parameters": None}}])),
    ("tool_invalid_no_name", R([U("Q")], tools=[{"type": "function", "function": {"description": "x"}}])),
    ("tool_names_duplicate_with_message_tools", R([{"role": "system", "content": "S", "tools": [WEATHER]}, U("Q")],
                                                  tools=[WEATHER])),
    ("system_tools_empty_list", R([{"role": "system", "content": "S", "tools": []}, U("Q")])),
    ("args_numbers_and_keys", R([U("go"), A("", None, [call("f", '{"a\\"b": 1, "neg": -0.25, "tiny": 1e-07, '
                                                             '"big": 1e22, "half": 12345678.5, "t": [true, null], '
                                                             '"nested": {"k": ["x", {"y": "z\\u00e9"}]}, "e": {}, "s": ""}',
                                                             "i1")]), T("ok", "i1"), U("n")])),
    ("args_duplicate_keys", R([U("go"), A("", None, [call("f", '{"a": 1, "b": "x", "a": "last"}', "i1")]),
                               T("ok", "i1"), U("n")])),
    ("tool_reference_part", R([{"role": "user", "content": [{"type": "tool_reference", "name": "search"},
                                                             {"type": "text", "text": "use it"}]}])),
    ("args_empty_object", R([U("go"), A("", None, [call("f", "{}", "i1")]), T("ok", "i1"), U("n")])),
    ("args_whitespace_json", R([U("go"), A("", None, [call("f", '  {"a": 1}\n ', "i1")]), T("ok", "i1"), U("n")])),
    ("args_trailing_garbage", R([U("go"), A("", None, [call("f", '{"a": 1} x', "i1")]), T("ok", "i1"), U("n")])),
    ("tool_calls_empty_list", R([U("go"), A("plain", None, []), U("n")])),
    ("tool_results_with_text_between", R([U("go"), A("", None, [call("f", {}, "a"), call("g", {}, "b")]),
                                          T("rb", "b"), U("note"), T("ra", "a"), A("done"), U("n")])),
    ("tool_results_no_ids", R([U("go"), A("", None, [call("f", {}), call("g", {})]), T("r2"), T("r1"), U("n")])),
    ("tool_results_duplicate_ids", R([U("go"), A("", None, [call("f", {}, "d"), call("g", {}, "x"), call("h", {}, "d")]),
                                      T("rx", "x"), T("rd", "d"), U("n")])),
    ("two_tool_rounds", R([U("go"), A("", "r1", [call("f", {}, "a"), call("g", {}, "b")]), T("rb", "b"), T("ra", "a"),
                           A("", "r2", [call("h", {}, "c"), call("f", {}, "a")]), T("ra2", "a"), T("rc", "c"),
                           A("final", "r3"), U("thanks")], tools=[WEATHER], **TH)),
    ("tool_content_null", R([U("go"), A("", None, WX_CALL), {"role": "tool", "tool_call_id": "call_1", "content": None},
                             U("n")])),
    ("tool_name_ignored_fields", R([U("go"), A("", None, WX_CALL, name="bot"),
                                    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "r"},
                                    U("n")])),
    # roles and contents
    ("user_extra_fields_ignored", R([{"role": "user", "content": "Q", "reasoning_content": "hidden",
                                      "tools": [WEATHER], "name": "me"}])),
    ("thinking_part_assistant", R([U("Q"), {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "A"}]}, U("Q2")])),
    ("thinking_part_user_refused", R([{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}])),
    ("input_text_part_refused", R([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}])),
    ("developer_mixed_case", R([{"role": "Developer", "content": "D"}, U("Q")])),
    ("developer_tools_keep_reasoning", R([{"role": "developer", "content": "D", "tools": [SEARCH]}, U("Q1"),
                                          A("A1", "R1"), U("Q2")], **TH)),
    ("developer_task", R([U("a"), {"role": "developer", "content": "classify"}], task="domain")),
    ("task_with_tool_results", R([U("a"), A("", None, [call("f", {}, "t")]), T("r", "t")], task="title", **TH)),
    ("task_merged_away", R([U("a"), U("b")], task="query")),
    ("latest_reminder_mid", R([U("Q"), {"role": "latest_reminder", "content": "R"}, A("A", "rc"), U("Q2")], **TH)),
    ("multiple_systems", R([S("S1"), S("S2"), U("Q")], tools=[WEATHER])),
    ("assistant_only", R([A("hello")])),
    ("assistant_only_continue", R([A("hello")], continue_final_message=True)),
    ("continue_after_tools", R(AGENT[:4], tools=[WEATHER], continue_final_message=True, **TH)),
    ("reasoning_empty_string_last_turn", R([U("Q"), A("", "", WX_CALL), T("r", "call_1")], **TH)),
    ("assistant_null_content_with_calls", R([U("Q"), A(None, "r", WX_CALL), T("r", "call_1"), A(None, "r2"), U("n")],
                                            **TH)),
]


def run(spec, cases):
    out = []
    for name, req in cases:
        entry = {"name": name, "request": req}
        try:
            entry["expect"] = sglang_prompt(req, spec)
        except Exception as e:  # the refusal, as SGLang reports it
            entry["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        out.append(entry)
    return out


def main():
    global ENC32, ENC4
    ENC32, ENC4 = load_encoders()
    os.makedirs(OUT_DIR, exist_ok=True)
    for spec, fname in (("dsv32", "v32.json"), ("dsv4", "v4.json")):
        cases = run(spec, COMMON)
        with open(os.path.join(OUT_DIR, fname), "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("%s: %d cases, %d refusals" % (fname, len(cases), sum("error" in c for c in cases)))


if __name__ == "__main__":
    main()
