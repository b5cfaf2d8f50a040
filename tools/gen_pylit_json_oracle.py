#!/usr/bin/env python3
# gen_pylit_json_oracle.py - what parse/pylit/pylit_json.c's string writer (ld_json_text,
# ld_json_write_text) must write for a log's bytes, from CPython: the oracle of
# tests/parse/pylit/test_pylit_json.c.  Standard library only; writes
# tests/parse/pylit/pylit_json_oracle.h (the committed copy: rerun and diff).
#
#   python3 tools/gen_pylit_json_oracle.py [OUT.h]
#   python3 tools/gen_pylit_json_oracle.py --show CASE   # a hashed case's bytes in and JSON out
#
# The bytes are read as logdiff reads a log: UTF-8, with a lone surrogate kept as its 3-byte
# WTF-8 form (ED A0..BF xx) read as that surrogate, and every other byte UTF-8 does not take
# read with surrogateescape (U+DC80..U+DCFF).  Each character is then written as
# json.dumps(ch, ensure_ascii=False) writes it, except two, the writer's choices: a surrogate is
# written as json.dumps(ch) (ensure_ascii=True) writes it, "\udXXX" (ensure_ascii=False would keep
# it raw, and raw surrogates are not UTF-8; pylit_json.h says why), and backspace and form feed as
# "\u0008", "\u000c" (json.dumps writes "\b", "\f"; json.loads reads both alike).
#
# The header holds:
#   * per byte b, the JSON body (between the quotes) of the one-byte string b;
#   * units: byte sequences of every UTF-8 kind (each length's edges, surrogates, overlong and
#     cut sequences, escapes), each with its body and whether it is open (some continuation byte
#     after it would change what it is written as: the test never puts one there);
#   * hashed cases: long strings the test builds with the generator below (xorshift64, the same
#     in test_pylit_json.c), with the length and FNV-1a 64 of the JSON text they must give.
import codecs
import json
import os
import sys

MASK = (1 << 64) - 1


def wtf8_or_escape(exc):
    o, k = exc.object, exc.start
    if o[k] == 0xED and k + 2 < len(o) and 0xA0 <= o[k + 1] <= 0xBF and 0x80 <= o[k + 2] <= 0xBF:
        return chr(((o[k] & 0x0F) << 12) | ((o[k + 1] & 0x3F) << 6) | (o[k + 2] & 0x3F)), k + 3
    return codecs.lookup_error("surrogateescape")(exc)


codecs.register_error("ld_wtf8_or_escape", wtf8_or_escape)


def char_json(ch):
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return json.dumps(ch)[1:-1]  # ensure_ascii=True's "\udXXX"
    if ch in "\b\f":
        return "\\u%04x" % ord(ch)
    return json.dumps(ch, ensure_ascii=False)[1:-1]


def body(bs):
    text = bs.decode("utf-8", "ld_wtf8_or_escape")
    return "".join(char_json(ch) for ch in text).encode("utf-8")


def literal(bs):
    return b'"' + body(bs) + b'"'


# Units: the UTF-8 kinds, each between ASCII in the test (and next to each other)
UNITS = [
    b"\xc2\x80", b"\xc3\xa9", b"\xdf\xbf",                          # 2 bytes
    b"\xe0\xa0\x80", b"\xe2\x82\xac", b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf",
    b"\xf0\x90\x80\x80", b"\xf0\x9f\x98\x80", b"\xf4\x8f\xbf\xbf",  # 4 bytes
    b"\xed\xa0\x80", b"\xed\xaf\xbf", b"\xed\xb0\x80", b"\xed\xbf\xbf",  # lone surrogates
    b"\xed\xa0\xbd\xed\xb2\xa9",                                    # a pair, kept apart
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf",  # overlong
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff\xfe",          # past U+10FFFF, never UTF-8
    b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0", b"\xed",    # cut (open)
    b"\x80", b"\xbf\xbf",                                           # continuations alone
    b"\xe2\x28\xa1", b"\xed\xa0\x41",                               # broken by ASCII
    b"\x7f", b"\x00", b"\x08\x0c", b'"\\', b"\r\n\t", b"\x1f",      # ASCII that stops a run
]


def is_open(u):
    """whether continuation bytes after u change what u is written as (u a cut sequence): one
    of every value, then two and three of the lowest and the highest"""
    tails = [bytes([c]) for c in range(0x80, 0xC0)]
    tails += [bytes([c]) + bytes(rest) for c in range(0x80, 0xC0)
              for rest in ([0x80], [0xBF], [0x80, 0x80], [0xBF, 0xBF], [0x80, 0xBF], [0xBF, 0x80])]
    return any(body(u + t) != body(u) + body(t) for t in tails)


class Rng:
    """xorshift64, as test_pylit_json.c's"""

    def __init__(self, seed):
        self.x = seed

    def next(self):
        x = self.x
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        self.x = x
        return x


def random_text(seed, n):
    """n bytes: mostly printable ASCII, and bytes and units of every kind (test_pylit_json.c's
    random_text)"""
    rng, out = Rng(seed), bytearray()
    while len(out) < n:
        r = rng.next()
        kind, v = r % 16, r >> 8
        if kind < 9:
            out.append(0x20 + v % 95)
        elif kind == 9:
            out.append(v % 256)
        elif kind == 10:
            out.append(b'\x00\n\t"\\\x7f\x1f\x08'[v % 8])
        elif kind == 11:
            out.append(0x80 + v % 64)
        elif kind == 12:
            out.append(0xC0 + v % 64)
        else:
            out += UNITS[v % len(UNITS)]
    return bytes(out[:n])


def all_surrogates(sep):
    return b"".join(bytes([0xED, 0xA0 + hi, 0x80 + lo]) + sep for hi in range(32) for lo in range(64))


# Hashed cases: (seed, length) of random_text; seed 0 is all surrogates back to back, 1 each
# followed by 'x' (their lengths are the text's own)
CASES = [(0, 0), (1, 0)] + [(1000 + k, n) for k, n in enumerate(
    [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 100, 200, 170, 171, 1000, 1023, 1024, 1025, 4096, 20000, 100000])]


def case_text(seed, n):
    if seed == 0:
        return all_surrogates(b"")
    if seed == 1:
        return all_surrogates(b"x")
    return random_text(seed, n)


def fnv1a64(bs):
    h = 0xCBF29CE484222325
    for b in bs:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def c_literal(bs):
    return '"' + "".join(chr(c) if 0x20 <= c < 0x7F and c not in b'"\\?' else "\\%03o" % c
                         for c in bs) + '"'


def rows_bytes():
    return ["    {%s, %d}, /* 0x%02x */" % (c_literal(body(bytes([b]))), len(body(bytes([b]))), b)
            for b in range(256)]


def rows_units():
    return ["    {%s, %d, %s, %d, %d}," % (c_literal(u), len(u), c_literal(body(u)), len(body(u)), int(is_open(u)))
            for u in UNITS]


def rows_cases():
    rows = []
    for seed, n in CASES:
        out = literal(case_text(seed, n))
        rows.append("    {%d, %d, %d, 0x%016xull}," % (seed, n, len(out), fnv1a64(out)))
    return rows


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--show":
        seed, n = CASES[int(sys.argv[2])]
        text = case_text(seed, n)
        sys.stdout.write("%s\n%s\n" % (text.hex(), literal(text).decode("utf-8", "surrogateescape")))
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parse", "pylit", "pylit_json_oracle.h")
    text = """/* pylit_json_oracle.h - generated by tools/gen_pylit_json_oracle.py (CPython %s's json),
 * do not edit: what ld_json_text writes for a log's bytes (the rules are the script's). */
#ifndef LD_PYLIT_JSON_ORACLE_H
#define LD_PYLIT_JSON_ORACLE_H

#include <stdint.h>

/* the JSON body (between the quotes) of the one-byte string b */
static const struct {
    const char *body;
    unsigned char len;
} pylit_json_byte_oracle[256] = {
%s
};

/* a unit's bytes, its body, and whether a continuation byte after it would change that */
static const struct {
    const char *bytes;
    unsigned char len;
    const char *body;
    unsigned char body_len, open;
} pylit_json_unit_oracle[] = {
%s
};

/* a hashed case: its text's seed and length (random_text; seeds 0 and 1 are the surrogates),
 * the JSON text's length and FNV-1a 64 */
static const struct {
    uint64_t seed;
    size_t n, json_len;
    uint64_t json_fnv;
} pylit_json_case_oracle[] = {
%s
};

#endif
""" % (sys.version.split()[0], "\n".join(rows_bytes()), "\n".join(rows_units()), "\n".join(rows_cases()))
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
