#!/usr/bin/env python3
# baseline_template.py - the Python side of bench/template.sh: a chat template
# rendered with jinja2 exactly as HF transformers' apply_chat_template sets it
# up (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
# extensions=[loopcontrols]), `tojson` = json.dumps(ensure_ascii=False), the
# globals raise_exception and strftime_now), compiled once, then rendered N
# times with the request's messages / tools / chat_template_kwargs,
# add_generation_prompt=True and the given bos/eos tokens (None when absent).
#
#   python3 bench/baseline_template.py TEMPLATE.jinja REQUEST.json N [--bos T] [--eos T] [--out FILE]
#
# Times are the thread's CPU time (time.thread_time, as bench_tpl_render
# times its side), so that other work on the machine does not count.
# Prints `render_s <best seconds per render>  mean_s <mean>  bytes <prompt
# bytes as UTF-8>  n <N>  compile_s <one compile>`; --out writes the prompt
# (UTF-8) for the byte comparison.  jinja2 3.1.6 is the version measured.
import argparse
import json
import sys
import time
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers: json.dumps instead of jinja2's own tojson (which escapes
    # HTML characters)
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def arguments(extra=()):
    """The command line both baselines take (bench/template.sh passes the same)."""
    ap = argparse.ArgumentParser()
    for name in ("template", "request"):
        ap.add_argument(name)
    ap.add_argument("n", type=int)
    for name in ("--bos", "--eos", "--out") + tuple(extra):
        ap.add_argument(name)
    return ap.parse_args()


def request_context(path, bos, eos):
    """The template's context from the request JSON at path, as transformers builds it."""
    with open(path, encoding="utf-8") as f:
        req = json.load(f)
    ctx = {"messages": req["messages"], "add_generation_prompt": True, "bos_token": bos, "eos_token": eos}
    if req.get("tools") is not None:
        ctx["tools"] = req["tools"]
    ctx.update(req.get("chat_template_kwargs") or {})
    return ctx


def best_of(n, render):
    """(best, mean) thread CPU seconds of n calls of render()."""
    best, total = float("inf"), 0.0
    n = max(1, n)
    for _ in range(n):
        t0 = time.thread_time()
        render()
        dt = time.thread_time() - t0
        total += dt
        best = min(best, dt)
    return best, total / n, n


def write_prompt(path, out):
    if path:
        with open(path, "wb") as f:
            f.write(out.encode("utf-8"))


def main():
    args = arguments()
    with open(args.template, encoding="utf-8") as f:
        source = f.read()
    ctx = request_context(args.request, args.bos, args.eos)
    t0 = time.thread_time()
    tpl = compile_template(source)
    compile_s = time.thread_time() - t0
    out = tpl.render(**ctx)  # untimed: the output, and warm caches
    write_prompt(args.out, out)
    best, mean, n = best_of(args.n, lambda: tpl.render(**ctx))
    print("render_s %.9f  mean_s %.9f  bytes %d  n %d  compile_s %.6f"
          % (best, mean, len(out.encode("utf-8")), n, compile_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
