#!/usr/bin/env python3
"""check_exposition.py - reads a render of logdiff watch's metrics back with
the Python prometheus_client parser (an independent reader of the text
format) and compares every value with what metrics_calls.h's calls must give,
worked out here from the calls themselves.

Usage: check_exposition.py FILE.  Exit 0 when every value matches, 1 with
the differences, 77 when prometheus_client is not installed (pip install
prometheus-client).
"""
import math
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("skipped: the Python module prometheus_client is not installed", file=sys.stderr)
    sys.exit(77)

JUDGED_AT = 1700000000.5
RENDER_AT = 1700000042.25
ODD_KIND = 'odd"kind\\with\nnewline'

# metrics_calls.h, call for call
JUDGED = [  # verdict, prompt bytes, messages, now
    ("ok", 500, 1, JUDGED_AT),
    ("ok", 1024, 2, JUDGED_AT),
    ("harness", 5000, 3, JUDGED_AT),
    ("template", 4194304, 512, JUDGED_AT),
    ("ok", 10000000, 1000, JUDGED_AT + 0.5),
]
FINDINGS = [("harness.empty_assistant", "warning"), ("harness.empty_assistant", "warning"),
            ("template.render_mismatch", "error"), (ODD_KIND, "info")]
LINES = [("parsed", 120), ("skipped", 3), ("error", 1), ("parsed", 5)]
BYTES = [123456789, 11]
CAPTURE = [(4, 1), (1, 0)]
GAUGES = [(7, 42), (5, 40)]
EVENTS = ["rotated", "rotated", "truncated"]

PROMPT_BOUNDS = [1024 * 4 ** i for i in range(7)]          # 1 KiB .. 4 MiB
MESSAGE_BOUNDS = [2 ** i for i in range(10)]               # 1 .. 512
VERDICTS = ["ok", "harness", "template", "sampling", "log", "kernels"]
STATUSES = ["parsed", "skipped", "error"]
EVENT_KINDS = ["rotated", "truncated", "gone", "problem"]


def counts(keys, start):
    out = {k: 0 for k in start}
    for k in keys:
        out[k] = out.get(k, 0) + 1
    return out


def histogram(name, values, bounds):
    """Expected samples of a histogram: cumulative buckets, _sum, _count."""
    exp = {}
    for b in bounds:
        exp[(name + "_bucket", (("le", float(b)),))] = sum(1 for v in values if v <= b)
    exp[(name + "_bucket", (("le", math.inf),))] = len(values)
    exp[(name + "_sum", ())] = sum(values)
    exp[(name + "_count", ())] = len(values)
    return exp


def expected():
    exp = {}
    for verdict, n in counts([j[0] for j in JUDGED], VERDICTS).items():
        exp[("logdiff_requests_judged_total", (("verdict", verdict),))] = n
    for (kind, sev), n in counts(FINDINGS, []).items():
        exp[("logdiff_findings_total", (("kind", kind), ("severity", sev)))] = n
    lines = {s: 0 for s in STATUSES}
    for s, n in LINES:
        lines[s] += n
    for s, n in lines.items():
        exp[("logdiff_lines_read_total", (("status", s),))] = n
    for e, n in counts(EVENTS, EVENT_KINDS).items():
        exp[("logdiff_source_events_total", (("event", e),))] = n
    exp[("logdiff_read_bytes_total", ())] = sum(BYTES)
    exp[("logdiff_rejoined_lines_total", ())] = sum(c[0] for c in CAPTURE)
    exp[("logdiff_cut_lines_total", ())] = sum(c[1] for c in CAPTURE)
    exp[("logdiff_open_requests", ())] = GAUGES[-1][0]
    exp[("logdiff_conversations", ())] = GAUGES[-1][1]
    last = JUDGED[-1][3]
    exp[("logdiff_last_request_timestamp_seconds", ())] = last
    exp[("logdiff_seconds_since_last_request", ())] = RENDER_AT - last
    exp.update(histogram("logdiff_prompt_bytes", [j[1] for j in JUDGED], PROMPT_BOUNDS))
    exp.update(histogram("logdiff_request_messages", [j[2] for j in JUDGED], MESSAGE_BOUNDS))
    return exp


TYPES = {"logdiff_requests_judged": "counter", "logdiff_findings": "counter",
         "logdiff_lines_read": "counter", "logdiff_read_bytes": "counter",
         "logdiff_rejoined_lines": "counter", "logdiff_cut_lines": "counter",
         "logdiff_source_events": "counter", "logdiff_open_requests": "gauge",
         "logdiff_conversations": "gauge", "logdiff_last_request_timestamp_seconds": "gauge",
         "logdiff_seconds_since_last_request": "gauge", "logdiff_prompt_bytes": "histogram",
         "logdiff_request_messages": "histogram", "logdiff_build_info": "gauge",
         "logdiff_start_time_seconds": "gauge"}


def key(sample):
    labels = []
    for k, v in sorted(sample.labels.items()):
        labels.append((k, float(v) if k == "le" else v))
    return (sample.name, tuple(labels))


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    got, types, problems = {}, {}, []
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        if not fam.documentation:
            problems.append(f"{fam.name}: no HELP text")
        for s in fam.samples:
            k = key(s)
            if k in got:
                problems.append(f"{k}: twice")
            got[k] = s.value
    for name, t in TYPES.items():
        if types.get(name) != t:
            problems.append(f"{name}: type {types.get(name)!r}, expected {t!r}")
    exp = expected()
    for k, v in exp.items():
        if k not in got:
            problems.append(f"missing {k}")
        elif not math.isclose(got[k], v, rel_tol=0, abs_tol=1e-9):
            problems.append(f"{k}: {got[k]!r}, expected {v!r}")
    build = [k for k in got if k[0] == "logdiff_build_info"]
    if len(build) != 1 or got[build[0]] != 1 or dict(build[0][1]).get("version", "") == "":
        problems.append(f"logdiff_build_info: {build}")
    start = got.get(("logdiff_start_time_seconds", ()), 0)
    if not start > 1.6e9:
        problems.append(f"logdiff_start_time_seconds: {start}")
    extra = set(got) - set(exp) - set(build) - {("logdiff_start_time_seconds", ())}
    for k in sorted(extra, key=str):
        problems.append(f"unexpected {k} = {got[k]}")
    for p in problems:
        print("check_exposition:", p, file=sys.stderr)
    print(f"check_exposition: {len(exp)} values compared, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
