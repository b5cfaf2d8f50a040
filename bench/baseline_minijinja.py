#!/usr/bin/env python3
# baseline_minijinja.py - the second anchor of bench/template.sh: the same chat
# template rendered with minijinja (the Rust engine, `pip install minijinja`)
# from Python, on the same context as bench/baseline_template.py gives jinja2
# (the request's messages / tools / chat_template_kwargs,
# add_generation_prompt=True, the given bos/eos tokens, None when absent).
#
#   python3 bench/baseline_minijinja.py TEMPLATE.jinja REQUEST.json N [--bos T] [--eos T] [--out FILE]
#                                       [--compare JINJA2_OUT]
#
# The environment is the closest minijinja has to transformers' jinja2 one:
# trim_blocks, lstrip_blocks, no trailing newline kept, Python-compatible
# methods (pycompat: str.split, .strip, dict.items, ...), and the globals
# raise_exception and strftime_now.  minijinja's own filters are kept (its
# `tojson` is serde_json's: compact separators and `<`, `>`, `&`, `'` escaped,
# where transformers' is json.dumps), so the prompt may differ from jinja2's:
# bench/template.sh says so and still times it; that is minijinja's speed.
# The template is compiled once (add_template), then rendered N times.
#
# Times are the thread's CPU time (time.thread_time), as the other sides'.
# Prints `render_s <best seconds per render>  mean_s <mean>  bytes <prompt
# bytes as UTF-8>  n <N>  compile_s <one compile>  version <minijinja>`, and
# with --compare `vs_jinja2 <verdict>` against jinja2's prompt in that file:
# `identical`, `tojson-html-escapes` (the same once minijinja's \u0027,
# \u003c, \u003e and \u0026 are read back as ' < > &) or `differs-at-<byte>`;
# --out writes the prompt (UTF-8).  Exit 2 when minijinja is missing or
# refuses the template.
import sys
import time
from datetime import datetime
from importlib import metadata

from baseline_template import arguments, best_of, request_context, write_prompt  # the same context and clock

try:
    import minijinja
except ImportError:
    print("baseline_minijinja.py: minijinja is not installed (pip install minijinja)", file=sys.stderr)
    sys.exit(2)


def raise_exception(message):
    raise minijinja.TemplateError(message)


def strftime_now(format):
    return datetime.now().strftime(format)


def compile_template(source):
    env = minijinja.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                                pycompat=True)
    env.add_global("raise_exception", raise_exception)
    env.add_global("strftime_now", strftime_now)
    env.add_template("chat", source)
    return env


HTML_ESCAPES = (("\\u0027", "'"), ("\\u003c", "<"), ("\\u003e", ">"), ("\\u0026", "&"))


def compare(ours, path):
    """How minijinja's prompt differs from jinja2's (in the file at path)."""
    with open(path, "rb") as f:
        theirs = f.read()
    mine = ours.encode("utf-8")
    if mine == theirs:
        return "identical"
    unescaped = ours
    for esc, ch in HTML_ESCAPES:
        unescaped = unescaped.replace(esc, ch)
    if unescaped.encode("utf-8") == theirs:
        return "tojson-html-escapes"
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    return "differs-at-%d" % at


def main():
    args = arguments(extra=("--compare",))
    with open(args.template, encoding="utf-8") as f:
        source = f.read()
    ctx = request_context(args.request, args.bos, args.eos)
    t0 = time.thread_time()
    try:
        env = compile_template(source)
    except minijinja.TemplateError as e:
        print("baseline_minijinja.py: minijinja refuses the template: %s" % e, file=sys.stderr)
        return 2
    compile_s = time.thread_time() - t0
    try:
        out = env.render_template("chat", **ctx)  # untimed: the output, and warm caches
    except minijinja.TemplateError as e:
        print("baseline_minijinja.py: render failed: %s" % e, file=sys.stderr)
        return 2
    write_prompt(args.out, out)
    best, mean, n = best_of(args.n, lambda: env.render_template("chat", **ctx))
    line = ("render_s %.9f  mean_s %.9f  bytes %d  n %d  compile_s %.6f  version %s"
            % (best, mean, len(out.encode("utf-8")), n, compile_s, metadata.version("minijinja")))
    if args.compare:
        line += "  vs_jinja2 " + compare(out, args.compare)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
