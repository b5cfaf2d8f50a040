#!/usr/bin/env python3
"""gen_capture_fixtures.py - a plain server log as production captures write it.

    gen_capture_fixtures.py [--split N] [--long BYTES] [--seam-text] OUT_DIR LOG...

Reads the plain log lines of LOG... (gzip by content) in order and writes into
OUT_DIR the same lines as each capture stores them, following each format's
documentation and its writer's source (not logdiff's code):

  plain.log          the lines themselves (after --long), the oracle's input
  docker-json.log    Docker's json-file driver (moby daemon/logger: the copier
                     cuts a line at 16 KiB; each piece is one JSON object and only
                     the last piece's "log" ends in "\\n"; the jsonlog writer
                     escapes < > & as \\u003c.., control bytes as \\u00XX, U+2028/9,
                     and writes each byte that is not part of valid UTF-8 as
                     \\ufffd, so a cut inside a character loses those bytes)
  cri.log            containerd / CRI-O (`<RFC 3339 nano> <stream> <P|F> <text>`;
                     P on every piece but the last, cut at 16 KiB)
  kubectl-prefix.log `kubectl logs --prefix` (lines already joined)
  vector.jsonl       Vector's JSON lines (the line in "message")
  fluent-bit.jsonl   Fluent Bit's (in "log", with "date")
  loki.jsonl         logcli query --output jsonl (in "line", with "labels")
  manifest.json      per capture: records written, lines split, pieces of the
                     split lines, bytes written as U+FFFD, lines

Request lines go to stderr (SGLang logs through Python's logging) and the other
lines to stdout; the stdout records are interleaved between the pieces of a
split stderr line, as a container's two streams are.

--long BYTES: every line that holds the demo's system prompt has a filler of
about BYTES inserted after its first words, in the message array and in the
templated prompt alike, so request lines are as long as real ones.
--seam-text: the filler is made of 3-byte characters, so Docker's cuts fall
inside characters (its U+FFFD loss is then counted in the manifest).
Standard library only.
"""
import argparse
import datetime
import gzip
import json
import os
import sys

ANCHOR = "You are CodePilot, an agent that"
T0 = datetime.datetime(2026, 11, 20, 9, 14, 0, tzinfo=datetime.timezone.utc)


def read_lines(paths):
    lines = []
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        lines.extend(data.decode("utf-8").splitlines())
    return lines


def lengthen(lines, size, seam_text):
    unit = "\u65e5\u672c\u8a9e\u306e\u6587\u8108 " if seam_text else "context kept for the agent, in its memory; "
    filler = " [" + unit * (size // len(unit.encode()) + 1) + "]"
    return [l.replace(ANCHOR, ANCHOR + filler, 1) if ANCHOR in l else l for l in lines]


def is_request_line(line):
    return any(k in line for k in ("Receive OpenAI:", "Receive:", "Finish:", "Abort", "obj="))


def pieces(data, size):
    """a line's bytes cut as the capture cuts them: every `size` bytes"""
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def rfc3339_nano(k):
    """RFC 3339 with nanoseconds, trailing zeros dropped (Go's RFC3339Nano)"""
    t = T0 + datetime.timedelta(microseconds=1000 * k + 7)
    frac = ("%06d" % t.microsecond + "000").rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("." + frac if frac else "") + "Z"


def go_decode(b, i):
    """Go's utf8.DecodeRune: (code point or None when invalid, size)"""
    c = b[i]
    n = 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 else 0
    if not n or i + n > len(b):
        return None, 1
    try:
        return ord(b[i:i + n].decode("utf-8")), n
    except UnicodeDecodeError:
        return None, 1


def docker_string(b):
    """moby's jsonlog escaping of a piece; (JSON string, bytes replaced by U+FFFD)"""
    out, i, replaced = ['"'], 0, 0
    while i < len(b):
        c = b[i]
        if c < 0x80:
            if c == 0x5C or c == 0x22:
                out.append("\\" + chr(c))
            elif c == 0x0A:
                out.append("\\n")
            elif c == 0x0D:
                out.append("\\r")
            elif c < 0x20 or chr(c) in "<>&":
                out.append("\\u%04x" % c)
            else:
                out.append(chr(c))
            i += 1
            continue
        cp, n = go_decode(b, i)
        if cp is None:
            out.append("\\ufffd")
            replaced += 1
        elif cp in (0x2028, 0x2029):
            out.append("\\u%04x" % cp)
        else:
            out.append(chr(cp))
        i += n
    out.append('"')
    return "".join(out), replaced


class Writer:
    def __init__(self, path):
        self.fh = open(path, "wb")
        self.stats = {"records": 0, "split_lines": 0, "split_pieces": 0, "replaced_bytes": 0, "lines": 0}

    def line_done(self, n_pieces):
        self.stats["lines"] += 1
        if n_pieces > 1:
            self.stats["split_lines"] += 1
            self.stats["split_pieces"] += n_pieces

    def emit(self, text):
        self.fh.write((text.encode("utf-8") if isinstance(text, str) else text) + b"\n")
        self.stats["records"] += 1


class Docker(Writer):
    def record(self, piece, stream, k):
        s, replaced = docker_string(piece)
        self.stats["replaced_bytes"] += replaced
        self.emit('{"log":%s,"stream":"%s","time":"%s"}' % (s, stream, rfc3339_nano(k)))


class Cri(Writer):
    def record(self, piece, stream, k, last):
        head = "%s %s %s " % (rfc3339_nano(k), stream, "F" if last else "P")
        self.emit(head.encode() + piece)  # the bytes as they came, a cut character too


def write_split(lines, split, docker, cri):
    """the two 16 KiB-cutting captures, the stdout lines interleaved between
    the pieces of a split request line"""
    others = [l for l in lines if not is_request_line(l)]
    k = 0
    for line in lines:
        if not is_request_line(line):
            continue
        parts = pieces(line.encode("utf-8") + b"\n", split)
        for j, p in enumerate(parts):
            last = j == len(parts) - 1
            docker.record(p, "stderr", k)
            cri.record(p[:-1] if last else p, "stderr", k, last)
            k += 1
            if not last and others:  # the other stream goes on meanwhile
                o = others.pop(0)
                docker.record(o.encode() + b"\n", "stdout", k)
                cri.record(o.encode(), "stdout", k, True)
                docker.line_done(1)
                cri.line_done(1)
                k += 1
        docker.line_done(len(parts))
        cri.line_done(len(parts))
    for o in others:
        docker.record(o.encode() + b"\n", "stdout", k)
        cri.record(o.encode(), "stdout", k, True)
        docker.line_done(1)
        cri.line_done(1)
        k += 1


def write_joined(lines, out):
    """the captures that keep a line whole: kubectl --prefix and the shippers"""
    ws = {n: Writer(os.path.join(out, n)) for n in
          ("kubectl-prefix.log", "vector.jsonl", "fluent-bit.jsonl", "loki.jsonl")}
    for k, line in enumerate(lines):
        t = rfc3339_nano(k)
        ws["kubectl-prefix.log"].emit("[pod/sglang-0/server] " + line)
        ws["vector.jsonl"].emit(json.dumps({"host": "node-1", "message": line, "source_type": "kubernetes_logs",
                                            "timestamp": t}, ensure_ascii=False))
        ws["fluent-bit.jsonl"].emit(json.dumps({"date": 1763630040.0 + k, "log": line + "\n", "stream": "stderr",
                                                "time": t}, ensure_ascii=False))
        ws["loki.jsonl"].emit(json.dumps({"labels": {"app": "sglang", "pod": "sglang-0"}, "line": line,
                                          "timestamp": t}, ensure_ascii=False))
        for w in ws.values():
            w.line_done(1)
    return ws


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", type=int, default=16384, help="bytes a piece (Docker and CRI: 16 KiB)")
    ap.add_argument("--long", type=int, default=0, help="make the demo's request lines about this long")
    ap.add_argument("--seam-text", action="store_true", help="a filler of 3-byte characters")
    ap.add_argument("out")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    lines = read_lines(a.logs)
    if a.long:
        lines = lengthen(lines, a.long, a.seam_text)
    with open(os.path.join(a.out, "plain.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(l + "\n" for l in lines))
    docker = Docker(os.path.join(a.out, "docker-json.log"))
    cri = Cri(os.path.join(a.out, "cri.log"))
    write_split(lines, a.split, docker, cri)
    ws = write_joined(lines, a.out)
    ws["docker-json.log"], ws["cri.log"] = docker, cri
    manifest = {}
    for name, w in ws.items():
        w.fh.close()
        manifest[name] = w.stats
    with open(os.path.join(a.out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
