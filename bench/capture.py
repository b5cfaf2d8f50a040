#!/usr/bin/env python3
"""capture.py - `logdiff scan --json` through each capture against the plain log, same run.

    bench/capture.py [--size-mb N] [--runs R] [--logdiff PATH] [--keep]

Writes the demo story with ~100 KB request lines as each capture stores it
(tools/gen_capture_fixtures.py; and journald's, printed by journalctl from a real
journal file: tools/gen_journal_fixtures.py, where systemd-journal-remote is
there), repeats each file with fresh rids up to about
N MB of plain log (the captures hold the same lines, wrapped and cut at 16 KiB),
then times `logdiff scan --json` (best of R, pinned to one core where taskset
is there) on the plain log and on each capture, and prints

    scan_<capture>_<N>MB  <plain s>  <capture s>  s  <ratio>

with ratio = plain time / capture time (the capture's speed as a fraction of
the plain scan's, on the same lines); then the verdict against the target
(issue 28: Docker json-file, CRI and journalctl -o json >= 0.70; the shippers'
JSON lines are read with cJSON and have no target) and the machine.  Exit 0 when everything
ran (a miss is still 0), 2 when something could not run.
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "gen_capture_fixtures.py")
GEN_JOURNAL = os.path.join(ROOT, "tools", "gen_journal_fixtures.py")
CAPTURES = ["docker-json.log", "cri.log", "kubectl-prefix.log", "vector.jsonl", "fluent-bit.jsonl"]
# journalctl's outputs (their own plain log: the same lines in journal order)
JOURNAL = {"journal-json.log": "json.log", "journal-export.log": "export.log",
           "journal-short-iso.log": "short-iso.log", "journal-cat.log": "cat-both.log"}
TARGETED = ("docker-json.log", "cri.log", "journal-json.log")  # issue 28's wrappers with a target
TARGET = 0.70


def repeat(src, dst, size):
    """src's lines again and again, every rid made new ("demo-" -> "demo<k>-")"""
    with open(src, "rb") as fh:
        base = fh.read()
    copies = max(1, -(-size // len(base)))
    with open(dst, "wb") as out:
        for k in range(copies):
            out.write(base.replace(b"demo-", b"demo%d-" % k))
    return os.path.getsize(dst)


def timed(cmd, runs):
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    best = None
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(pin + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t
        if r.returncode not in (0, 1):
            raise RuntimeError("%s: exit %d" % (" ".join(cmd), r.returncode))
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--logdiff", default=os.path.join(ROOT, "build-bench", "logdiff"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = os.path.join(ROOT, "build", "bench", "capture")
    os.makedirs(work, exist_ok=True)
    base = os.path.join(work, "base")
    demo = os.path.join(ROOT, "testdata", "demo")
    subprocess.run([sys.executable, GEN, "--long", "100000", base, os.path.join(demo, "server-0.log"),
                    os.path.join(demo, "server-1.log.gz")], check=True)
    size = a.size_mb * 1000 * 1000
    sizes = {c: repeat(os.path.join(base, c), os.path.join(work, c), size) for c in ["plain.log"] + CAPTURES}
    jbase = os.path.join(work, "journal")
    # one service: its plain log holds the lines in the same order, so that
    # the pairer does the same work on both and the ratio is the capture's
    rc = subprocess.run([sys.executable, GEN_JOURNAL, "--one-service", "--long", "100000", jbase,
                         os.path.join(demo, "server-0.log"),
                         os.path.join(demo, "server-1.log.gz")]).returncode
    journal = dict(JOURNAL, **{"journal-plain.log": "plain.log"}) if rc == 0 else {}
    if rc:
        print("journald captures skipped: tools/gen_journal_fixtures.py exit %d" % rc)
    for c, f in journal.items():
        sizes[c] = repeat(os.path.join(jbase, f), os.path.join(work, c), size)
    try:
        plain = timed([a.logdiff, "scan", "--json", os.path.join(work, "plain.log")], a.runs)
    except (OSError, RuntimeError) as e:
        print("logdiff scan not available: %s" % e)
        return 2
    jplain = timed([a.logdiff, "scan", "--json", os.path.join(work, "journal-plain.log")], a.runs) if journal else 0
    worst = None
    for c in CAPTURES + [c for c in JOURNAL if journal]:
        t = timed([a.logdiff, "scan", "--json", os.path.join(work, c)], a.runs)
        base_t = jplain if c in JOURNAL else plain
        ratio = base_t / t
        if c in TARGETED:
            worst = ratio if worst is None else min(worst, ratio)
        print("scan_%s_%dMB  %.3f  %.3f  s  %.2f" % (c.split(".")[0], a.size_mb, base_t, t, ratio))
    print("throughput_plain  %.0f MB/s" % (sizes["plain.log"] / plain / 1e6))
    print("capture vs plain: %.2f (lowest of docker-json, cri, journal-json)  target>=%.2f: %s"
          % (worst, TARGET, "PASS" if worst >= TARGET else "MISS"))
    print("machine: %s, %s, %d cores" % (platform.node(), platform.processor() or platform.machine(), os.cpu_count()))
    print("inputs: " + ", ".join("%s %.1f MB" % (c, s / 1e6) for c, s in sizes.items()))
    if not a.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
