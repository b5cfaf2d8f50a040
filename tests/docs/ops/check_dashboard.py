#!/usr/bin/env python3
"""check_dashboard.py - docs/ops/'s queries against what logdiff watch
exports: the Grafana dashboard parses as JSON, has the panels the
operations guide describes, and every metric any of its queries (and,
where PyYAML is installed, every alerting rule) names is one the render
emits (a logdiff_ family, with _bucket/_sum/_count for histograms) or
Prometheus' own `up`.

Usage: check_dashboard.py SAMPLE_PROGRAM OPS_DIR
SAMPLE_PROGRAM prints a render with every family (tests/cmd/watch/
metrics_sample.c).  Exit 0, or 1 naming each problem.
"""
import json
import re
import subprocess
import sys

# PromQL words that are neither metrics nor functions (functions are
# followed by "(")
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan"}
OTHER_METRICS = {"up"}  # Prometheus' own, for the scrape's health

# every metric the guide says the dashboard shows
REQUIRED = {"logdiff_requests_judged_total", "logdiff_findings_total", "logdiff_lines_read_total",
            "logdiff_read_bytes_total", "logdiff_open_requests", "logdiff_conversations",
            "logdiff_last_request_timestamp_seconds", "logdiff_seconds_since_last_request",
            "logdiff_prompt_bytes_bucket", "logdiff_request_messages_bucket"}


def emitted_names(sample_program):
    """The sample names of a render (every line that is not a comment)."""
    text = subprocess.run([sample_program], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def metric_names(expr):
    """The metric names a PromQL expression selects."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)        # strings
    e = re.sub(r"\{[^}]*\}", " ", e)                     # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                    # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if word in KEYWORDS or rest.startswith("("):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "$"):
            continue  # 10m, $var
        names.add(word)
    return names


def dashboard_exprs(dash):
    for panel in dash.get("panels", []):
        for t in panel.get("targets", []):
            yield panel.get("title", "?"), t.get("expr", "")
        for sub in panel.get("panels", []):  # collapsed rows
            for t in sub.get("targets", []):
                yield sub.get("title", "?"), t.get("expr", "")
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        if var.get("type") == "query" and isinstance(q, str):
            m = re.match(r"label_values\((?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,)?", q)
            if m and m.group(1):
                yield "variable " + var["name"], m.group(1)


def check_queries(where, exprs, emitted, problems):
    seen = set()
    for title, expr in exprs:
        if not expr:
            problems.append(f"{where}: '{title}' has an empty query")
        for name in metric_names(expr):
            seen.add(name)
            if name not in emitted and name not in OTHER_METRICS:
                problems.append(f"{where}: '{title}' queries {name}, which logdiff does not export")
    return seen


def alert_exprs(path, problems):
    try:
        import yaml
    except ImportError:
        print("note: PyYAML not installed: the alerts' metric names are not checked here "
              "(promtool still checks the rules: tests/docs/ops/alerts.sh)")
        return []
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return [(r.get("alert", r.get("record", "?")), r["expr"])
            for g in doc["groups"] for r in g["rules"]]


def main():
    sample, ops = sys.argv[1], sys.argv[2]
    emitted = emitted_names(sample)
    problems = []
    with open(f"{ops}/grafana-logdiff.json", encoding="utf-8") as f:
        dash = json.load(f)
    for key in ("title", "uid", "panels", "schemaVersion"):
        if key not in dash:
            problems.append(f"dashboard: no {key}")
    ids = [p.get("id") for p in dash.get("panels", [])]
    if len(ids) != len(set(ids)):
        problems.append("dashboard: two panels share an id")
    seen = check_queries("dashboard", dashboard_exprs(dash), emitted, problems)
    for name in sorted(REQUIRED - seen):
        problems.append(f"dashboard: no panel shows {name}")
    kinds = {p.get("type") for p in dash.get("panels", [])}
    if "heatmap" not in kinds:
        problems.append("dashboard: no heatmap of the histograms")
    alerts = alert_exprs(f"{ops}/logdiff-alerts.yml", problems)
    check_queries("alerts", alerts, emitted, problems)
    for p in problems:
        print("FAIL:", p)
    print(f"{len(seen)} metrics queried by the dashboard, {len(alerts)} alert rules; "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
