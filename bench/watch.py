#!/usr/bin/env python3
# watch.py - logdiff watch against issue 32's speed targets, with `logdiff diff` on the same
# lines measured in the same run as the anchor (bench/watch.sh builds and calls this).
#
#   python3 bench/watch.py LOGDIFF LOG            # LOG: tools/gen_bench_log.py's (agentic, level 3)
#
# Prints one line per figure:
#   stdin_cpu    watch - < LOG (to its end) against diff LOG: CPU seconds (user + system), MB/s of
#                CPU, and watch's share of diff's speed (the same judging, plus following)
#   live         LOG appended to a followed file in 4 MB writes as fast as the disk takes them:
#                MB/s from the first write to the last verdict (wall) and of watch's CPU time;
#                target >= 100 MB/s (one core: watch is one thread)
#   soak         (--soak: LOG appended again and again, the file rotated by rename and create
#                after each copy, up to TOTAL_MB) watch's resident memory after each copy, once
#                it has caught up; target: flat after warm-up (the end within 10% of the value
#                a quarter of the way), with --conversation-memory CONV_MEM (default 32M: the
#                bound reached early, so the plateau shows)
#   latency      RUNS requests appended one at a time to a followed file (a Receive OpenAI,
#                Receive and Finish line each, from the demo log, renamed): seconds from the
#                write of the Finish line to its verdict on watch's stdout; p50 and max;
#                target max <= 1 s
# Exit status 0 when everything ran (a target miss is still 0), 2 when something could not.
import json
import os
import re
import resource
import select
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("RUNS", "3"))
LAT_RUNS = int(os.environ.get("LAT_RUNS", "20"))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_of(argv, stdin=None):
    before = child_cpu()
    with open(os.devnull, "wb") as null:
        rc = subprocess.call(argv, stdin=stdin, stdout=null, stderr=null)
    if rc not in (0, 1):
        sys.exit("watch.py: %s: exit %d" % (" ".join(argv), rc))
    return child_cpu() - before


def stdin_cpu(logdiff, log, mb):
    best_w = best_d = float("inf")
    for _ in range(RUNS):  # interleaved: the machine's load hits both alike
        with open(log, "rb") as f:
            best_w = min(best_w, cpu_of([logdiff, "watch", "--json", "-"], stdin=f))
        best_d = min(best_d, cpu_of([logdiff, "diff", "--json", log]))
    print("stdin_cpu  diff %.3f s (%.0f MB/s)  watch %.3f s (%.0f MB/s)  watch/diff speed %.2f"
          % (best_d, mb / best_d, best_w, mb / best_w, best_d / best_w))


def append(src_path, dst_path):
    """src appended to dst in 4 MB writes, as fast as they go; bytes written."""
    n = 0
    with open(src_path, "rb") as src, open(dst_path, "ab") as dst:
        while True:
            chunk = src.read(4 << 20)
            if not chunk:
                return n
            dst.write(chunk)
            dst.flush()
            n += len(chunk)


def count_verdicts(proc, want, deadline):
    """Reads watch's JSON lines until `want` requests; the time of the last."""
    seen, buf, last = 0, b"", None
    fd = proc.stdout.fileno()
    while seen < want and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if not r:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        seen += sum(1 for l in lines if l.startswith(b'{"rid": "') or l.startswith(b'{"rid":"'))
        last = time.monotonic()
    return seen, last


def live(logdiff, log, mb, want):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "server.log")
        proc = subprocess.Popen([logdiff, "watch", "--json", "--poll", "0.05", path],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        cpu0 = child_cpu()
        t0 = time.monotonic()
        append(log, path)
        seen, last = count_verdicts(proc, want, t0 + 300)
        proc.terminate()
        proc.wait()
        cpu = child_cpu() - cpu0
    if seen < want:
        sys.exit("watch.py: live: %d of %d verdicts" % (seen, want))
    wall = last - t0
    verdict = "PASS" if mb / wall >= 100 else "MISS"
    print("live  %.0f MB in %.2f s: %.0f MB/s (wall, first write to last verdict), %.0f MB/s of CPU  "
          "target>=100 MB/s: %s" % (mb, wall, mb / wall, mb / cpu if cpu else float("inf"), verdict))


def demo_request(src_dir):
    """The first request of the demo log (its Receive OpenAI, Receive and Finish lines)."""
    lines = open(os.path.join(src_dir, "testdata/demo/server-0.log"), encoding="utf-8").read().split("\n")
    rid = re.search(r"rid='([^']+)'", next(l for l in lines if "Receive: obj=" in l)).group(1)
    openai = next(l for l in lines if "Receive OpenAI:" in l)
    mine = [l for l in lines if "rid='%s'" % rid in l]
    return rid, [openai] + mine


def latency(logdiff, src_dir):
    rid, lines = demo_request(src_dir)
    lat = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "server.log")
        open(path, "w").close()
        proc = subprocess.Popen([logdiff, "watch", "--json", path],  # the default poll
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        with open(path, "a", encoding="utf-8") as f:
            for i in range(LAT_RUNS):
                new = "lat-%d" % i
                for l in lines[:-1]:
                    f.write(l.replace("rid='%s'" % rid, "rid='%s'" % new) + "\n")
                f.flush()
                time.sleep(0.05)
                f.write(lines[-1].replace("rid='%s'" % rid, "rid='%s'" % new) + "\n")
                f.flush()
                t = time.monotonic()
                seen, last = count_verdicts(proc, 1, t + 10)
                if not seen:
                    sys.exit("watch.py: latency: no verdict for %s in 10 s" % new)
                lat.append(last - t)
                time.sleep(0.1)
        proc.terminate()
        proc.wait()
    lat.sort()
    verdict = "PASS" if lat[-1] <= 1.0 else "MISS"
    print("latency  %d requests: p50 %.3f s, max %.3f s (Finish written to verdict read)  target max<=1 s: %s"
          % (len(lat), lat[len(lat) // 2], lat[-1], verdict))


def rss_kib(pid):
    try:
        for l in open("/proc/%d/status" % pid):
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0


def soak(logdiff, log, total_mb, conv_mem):
    """LOG appended again and again to a followed file rotated (rename and create) every copy,
    until total_mb; watch's resident memory sampled after each copy."""
    copies = max(1, int(round(total_mb * 1e6 / os.path.getsize(log))))
    samples = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "server.log")
        proc = subprocess.Popen([logdiff, "watch", "--json", "--poll", "0.05", "--conversation-memory", conv_mem,
                                 path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        total = 0
        for i in range(copies):
            if i:
                os.replace(path, path + ".1")  # the rotated file replaces the one before it
            total += append(log, path)
            wait_quiet(proc)  # caught up: everything written so far was judged
            samples.append((total / 1e6, rss_kib(proc.pid)))
        proc.terminate()
        proc.wait()
    print("soak  %d copies of %.0f MB (rotated after each), --conversation-memory %s: resident KiB after each copy:"
          % (copies, os.path.getsize(log) / 1e6, conv_mem))
    print("      " + " ".join("%.0fMB:%d" % s for s in samples))
    warm = samples[min(len(samples) - 1, max(1, len(samples) // 4))][1]
    end = samples[-1][1]
    verdict = "PASS" if end <= warm * 1.1 else "MISS"
    print("soak  after warm-up %d KiB, at the end %d KiB: ratio %.2f  target flat (<=1.10): %s"
          % (warm, end, end / warm if warm else float("inf"), verdict))


def wait_quiet(proc):
    """Reads (and drops) watch's stdout until it has been quiet for 0.6 s."""
    fd = proc.stdout.fileno()
    quiet = 0
    while quiet < 3:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r and not os.read(fd, 1 << 20):
            return
        quiet = 0 if r else quiet + 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--soak":
        soak(sys.argv[2], sys.argv[3], float(sys.argv[4]), os.environ.get("CONV_MEM", "32M"))
        return
    if len(sys.argv) != 3:
        sys.exit("usage: watch.py LOGDIFF LOG | watch.py --soak LOGDIFF LOG TOTAL_MB")
    logdiff, log = sys.argv[1], sys.argv[2]
    src_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mb = os.path.getsize(log) / 1e6
    out = subprocess.run([logdiff, "diff", "--json", log], capture_output=True).stdout
    want = sum(1 for l in out.split(b"\n") if l.startswith(b'{"rid": "') or l.startswith(b'{"rid":"'))
    stdin_cpu(logdiff, log, mb)
    live(logdiff, log, mb, want)
    latency(logdiff, src_dir)


if __name__ == "__main__":
    main()
