#!/usr/bin/env python3
"""shard.py - issue 33's speed targets for `logdiff regress --shard / --merge`.

1. Each share reads only its inputs: N shares of a set of archives run under
   strace, which records every file each process opens (openat, whatever the
   input layer then does with it: read or mmap); the bytes of the inputs each
   share opened, summed over the shares, against the inputs' total size
   (ratio 1.00: every input read once, by one share).
   The two passes that follow conversations across shares (--conv-journal,
   then --conv-from) read every input twice (ratio 2.00), once a pass.
2. The merge of 1,000 partials of 1,000 requests each (1 % not ok, with their
   findings and records), generated here in the partial format
   (cmd/regress/regress_partial.h): `logdiff regress --merge` writing the
   text report, and then the JSON report, against a baseline of the same
   requests, in CPU seconds; the anchor in the same run is Python reading
   the same lines with json.loads (what a script putting them together
   would do first, before any comparison).
"""
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time


def cpu_of(cmd, **kw):
    """Runs cmd; returns (children's CPU seconds, wall seconds, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run(cmd, **kw).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall, rc


def opened_inputs(trace, inputs):
    """The inputs a strace -f -e trace=openat log shows opened successfully."""
    names = {os.path.abspath(p): p for p in inputs}
    seen = set()
    # an open split by another thread's call ("<unfinished ...>") has its
    # result on a later line: every input exists, so only a failure counts
    pat = re.compile(r'openat\([^,]*, "([^"]*)"')
    with open(trace) as f:
        for line in f:
            m = pat.search(line)
            if m and "= -1" not in line and os.path.abspath(m.group(1)) in names:
                seen.add(names[os.path.abspath(m.group(1))])
    return seen


def bytes_read(logdiff, inputs, shares, work, mode="partial"):
    """mode: "partial" (one pass), "journal" (the first of two passes: --conv-journal), "from"
    (the second: --conv-from the journals, --partial)."""
    total = sum(os.path.getsize(p) for p in inputs)
    per_share, opened_by = [], {}
    journals = os.path.join(work, "journals")
    os.makedirs(journals, exist_ok=True)
    for i in range(shares):
        trace = os.path.join(work, f"trace-{i}")
        out = {"partial": ["--partial", os.path.join(work, f"p{i}.json")],
               "journal": ["--conv-journal", os.path.join(journals, f"j{i}.jsonl")],
               "from": ["--conv-from", journals, "--partial", os.path.join(work, f"q{i}.json")]}[mode]
        cmd = ["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace, logdiff, "regress",
               "--shard", f"{i}/{shares}"] + out + inputs
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        seen = opened_inputs(trace, inputs)
        for p in seen:
            opened_by.setdefault(p, []).append(i)
        per_share.append(sum(os.path.getsize(p) for p in seen))
    twice = [p for p, s in opened_by.items() if len(s) > 1]
    missed = [p for p in inputs if p not in opened_by]
    return total, per_share, twice, missed


def make_inputs(gen_log, work, count, size_mb):
    """count gzip'd logs from tools/gen_bench_log.py (seeds 1..count)."""
    paths = []
    for k in range(count):
        log = os.path.join(work, f"server-{k}.log")
        subprocess.run([sys.executable, gen_log, "--size-mb", str(size_mb), "--seed", str(k + 1), log],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["gzip", "-f", "-1", log], check=True)
        paths.append(log + ".gz")
    return paths


def item_line(rid, share_first, rng, bad):
    # as regress_partial.c writes it: "key" left out when it is the rid, "errors"
    # and "info" when empty
    item = {"input": share_first, "rid": rid, "label": "server.log",
            "where": f"archive-{share_first}.tar.gz:server.log:{rng.randrange(1, 10**6)}",
            "verdict": "harness" if bad else "ok", "conversation": f"conv-{rng.randrange(10**9)}",
            "hash": f"{rng.getrandbits(64):016x}"}
    if bad:
        item["errors"] = ["harness.empty_assistant"]
    if bad:
        item["findings"] = [{"kind": "harness.empty_assistant", "severity": "error", "message": 2,
                             "detail": "assistant message 2 is empty", "array_offset": None,
                             "prompt_offset": None, "expected_len": None, "actual_len": 0,
                             "first_diff": None, "array_excerpt": None, "prompt_excerpt": None,
                             "related_rid": None, "unified_diff": None}]
        text = "x" * 200
        item["request"] = {"rid": rid, "flags": 0, "n_messages": 3,
                           "prompt": {"t": "<|im_start|>user\n" + text + "<|im_end|>\n", "f": 1},
                           "messages": [{"role": r, "content": {"t": c, "f": 1}, "reasoning": None,
                                         "tool_call_id": None, "name": None, "n_tool_calls": 0}
                                        for r, c in (("system", "s"), ("user", text), ("assistant", ""))]}
    return json.dumps({"item": item}, separators=(",", ":"))


def make_partials(work, shares, per_share):
    rng = random.Random(1)
    inputs = [f"archive-{i}.tar.gz" for i in range(shares)]
    paths, baseline = [], []
    for s in range(shares):
        path = os.path.join(work, f"part-{s:04d}.json")
        head = {"format": "logdiff-regress-partial", "version": 2, "shard": {"index": s, "count": shares},
                "share": {"first": s, "end": s + 1}, "inputs": inputs,
                "settings": {"report_template": None, "no_conversations": False},
                "conv": {"digest": "%016x" % rng.getrandbits(64)}}
        lines = [json.dumps(head, separators=(",", ":")),
                 json.dumps({"member": {"input": s, "name": inputs[s] + ":server.log", "label": "server.log",
                                        "lines": per_share * 3, "request_lines": per_share * 3,
                                        "failed": False}}, separators=(",", ":"))]
        for k in range(per_share):
            bad = rng.random() < 0.01
            rid = f"{s:04d}-{k:05d}-{rng.getrandbits(32):08x}"
            lines.append(item_line(rid, s, rng, bad))
            baseline.append((rid, "ok", []))
        end = {"items": per_share, "members": 1, "problems": 0, "io_errors": 0, "capture_problems": 0,
               "over_limit": 0, "conversations": 0, "entries": 0, "bytes": 0, "peak_bytes": 0, "evicted": 0,
               "matched": 0}
        lines.append(json.dumps({"end": end}, separators=(",", ":")))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def python_anchor(paths):
    t = time.process_time()
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                json.loads(line)
                n += 1
    return time.process_time() - t, n


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: shard.py LOGDIFF GEN_BENCH_LOG WORKDIR SHARES")
    logdiff, gen_log, work, shares = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    inputs = make_inputs(gen_log, work, 12, 4)
    total, per_share, twice, missed = bytes_read(logdiff, inputs, shares, work)
    print(f"{'inputs read by shares':40s} {total:>14d} {sum(per_share):>14d} bytes  "
          f"ratio {sum(per_share) / total:.3f}  ({shares} shares: {', '.join(map(str, per_share))})")
    print(f"  inputs opened by more than one share: {len(twice)}; by none: {len(missed)}")
    # the two passes that follow conversations across shares: each reads the inputs once more
    t1 = time.perf_counter()
    _, per_journal, twice_j, missed_j = bytes_read(logdiff, inputs, shares, work, "journal")
    t2 = time.perf_counter()
    _, per_from, twice_f, missed_f = bytes_read(logdiff, inputs, shares, work, "from")
    t3 = time.perf_counter()
    jdir = os.path.join(work, "journals")
    jsize = sum(os.path.getsize(os.path.join(jdir, f)) for f in os.listdir(jdir))
    two = sum(per_journal) + sum(per_from)
    print(f"{'inputs read by two passes':40s} {total:>14d} {two:>14d} bytes  ratio {two / total:.3f}  "
          f"(journals {sum(per_journal)}, judging {sum(per_from)}; twice within a pass: "
          f"{len(twice_j) + len(twice_f)}, missed: {len(missed_j) + len(missed_f)})")
    print(f"  journals written: {jsize} bytes ({jsize / total:.3f} of the inputs, compressed); wall under strace: "
          f"journal pass {t2 - t1:.2f} s, judging pass {t3 - t2:.2f} s")
    parts = make_partials(work, 1000, 1000)
    size = sum(os.path.getsize(p) for p in parts)
    base = os.path.join(work, "baseline.json")
    cpu_up, wall_up, rc_up = cpu_of([logdiff, "regress", "--merge", "--baseline", base, "--update-baseline"] + parts,
                                    stdout=subprocess.DEVNULL)
    py_cpu, n_lines = python_anchor(parts)
    cpu_t, wall_t, rc_t = cpu_of([logdiff, "regress", "--merge", "--baseline", base] + parts,
                                 stdout=subprocess.DEVNULL)
    cpu_j, wall_j, rc_j = cpu_of([logdiff, "regress", "--merge", "--baseline", base, "--json"] + parts,
                                 stdout=subprocess.DEVNULL)
    print(f"partials: 1000 x 1000 requests, {size / 1e6:.1f} MB, {n_lines} lines")
    for name, cpu, wall, rc in (("merge, writing the baseline", cpu_up, wall_up, rc_up),
                                ("merge + compare, text report", cpu_t, wall_t, rc_t),
                                ("merge + compare, --json", cpu_j, wall_j, rc_j)):
        print(f"{name:40s} {py_cpu:>10.2f} {cpu:>10.2f} s CPU  ratio {py_cpu / cpu:5.2f}x  "
              f"(wall {wall:.2f} s, exit {rc})")
    ok_bytes = abs(sum(per_share) - total) == 0 and not twice and not missed
    worst = max(cpu_t, cpu_j, cpu_up)
    print(f"target: shares read the inputs once in all: {'pass' if ok_bytes else 'MISS'}")
    print(f"target: merge of 1,000 x 1,000 under a few seconds on one core: "
          f"{'pass' if worst < 5 else 'MISS'} (worst {worst:.2f} s CPU)")


if __name__ == "__main__":
    main()
