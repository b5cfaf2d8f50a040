#!/usr/bin/env python3
"""gen_pylit_cases.py - oracle test cases for parse/pylit/pylit.c.

Writes, under testdata/parse/pylit/:
  y_random.txt  repr() of random Python values, one per line:  CANON <TAB> TEXT
  y_trunc.txt   SGLang text-mode renderings (shared/tools/sglang_render.py
                text_render) with truncation / abbreviation markers:  CANON <TAB> TEXT
  y_json.txt    json.dumps() of random JSON values, one in three first shortened by SGLang's own
                JSON-mode logger transformation (request_logger._transform_data_for_logging
                of the sglang wheel, max_length 8, so half = 4):  CANON <TAB> TEXT, CANON from
                json.loads(TEXT) with SGLang's cut shapes marked (X[h,t], E)
  n_random.txt  texts that ast.literal_eval rejects:  KIND <TAB> TEXT
                KIND: T = input ends inside a value (LD_ERR_TRUNCATED),
                      E = any error (syntax, truncated, or a bad escape found
                          when the strings are decoded)
Every expected value is computed by CPython from the value itself, never from
logdiff's output.  Lines starting with '#' are comments.

CANON grammar (the C test renders its parse tree the same way):
  N T F                  None True False
  i<decimal>             int
  f<16 hex digits>       float, IEEE-754 bits big-endian; fnan for any NaN
  s<hex> / b<hex>        str (UTF-8, lone surrogates as 3-byte WTF-8 =
                         'surrogatepass') / bytes
  L[..] U[..] S[..]      list, tuple, set; items joined by ','
  D[k:v,..]              dict
  C<name>(<arg>=v,..)    call repr; positional arguments have an empty name
  M<name>                dotted name (enum member)
  O<hex>                 <...> opaque repr, hex of the text between < and >
  E                      Ellipsis
  X[h,t]                 truncation marker, head and tail
  A<key>:<n>:<digest>    abbreviation marker

Usage: python3 tools/gen_pylit_cases.py [--shared DIR] [--out DIR] [--seed N]
Python 3 standard library only; output is reproducible for a given seed and
Python version (3.8+; the committed files come from 3.11).  The script
re-executes itself with PYTHONHASHSEED=0 so that set order is fixed.
"""

import argparse
import ast
import json
import math
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------ values that print as call/name/opaque reprs

class Call:
    """Prints like a dataclass / pydantic repr: Name(pos, field=value)."""

    def __init__(self, name, args):
        self.name = name
        self.args = args  # list of (name or None, value)

    def __repr__(self):
        parts = [("%s=%r" % (k, v)) if k else repr(v) for k, v in self.args]
        return "%s(%s)" % (self.name, ", ".join(parts))


class Dotted:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


class Opaque:
    def __init__(self, inner):
        self.inner = inner

    def __repr__(self):
        return "<%s>" % self.inner


# ------------------------------------------------------------------ canonical form

def canon(v):
    if v is None:
        return "N"
    if v is True:
        return "T"
    if v is False:
        return "F"
    if v is Ellipsis:
        return "E"
    if isinstance(v, int):
        return "i%d" % v
    if isinstance(v, float):
        return "fnan" if math.isnan(v) else "f" + struct.pack(">d", v).hex()
    if isinstance(v, str):
        return "s" + v.encode("utf-8", "surrogatepass").hex()
    if isinstance(v, bytes):
        return "b" + v.hex()
    if isinstance(v, list):
        return "L[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "U[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, set):
        return "S[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, dict):
        return "D[" + ",".join(canon(k) + ":" + canon(x) for k, x in v.items()) + "]"
    if isinstance(v, Call):
        return "C%s(%s)" % (v.name, ",".join((k or "") + "=" + canon(x) for k, x in v.args))
    if isinstance(v, Dotted):
        return "M" + v.name
    if isinstance(v, Opaque):
        return "O" + v.inner.encode("utf-8").hex()
    raise TypeError(type(v))


# ------------------------------------------------------------------ random values

CHAR_POOLS = [
    (30, lambda r: chr(r.randint(0x20, 0x7E))),
    (6, lambda r: r.choice("'\"\\ ")),
    (5, lambda r: chr(r.choice(list(range(0x20)) + [0x7F]))),
    (4, lambda r: chr(r.randint(0x80, 0xFF))),
    (3, lambda r: r.choice("\u200b\u2028\u00ad\ufeff\u0085\u3000")),
    (4, lambda r: chr(r.randint(0x4E00, 0x9FFF))),
    (3, lambda r: chr(r.randint(0x1F600, 0x1F64F))),
    (3, lambda r: chr(r.choice([r.randint(0x100, 0xD7FF), r.randint(0xE000, 0xFFFF)]))),
    (2, lambda r: chr(r.randint(0x10000, 0x10FFFF))),
    (3, lambda r: chr(r.randint(0xD800, 0xDFFF))),
]
POOL_WEIGHTS = [w for w, _ in CHAR_POOLS]


def rand_str(r, maxlen=24):
    n = r.choice([0, 1, 2, r.randint(0, maxlen), r.randint(0, maxlen), r.randint(0, 4 * maxlen)])
    # most strings mix two or three pools, like real text
    pools = r.choices(CHAR_POOLS, weights=POOL_WEIGHTS, k=r.randint(1, 3))
    return "".join(r.choice(pools)[1](r) for _ in range(n))


def rand_int(r):
    k = r.random()
    if k < 0.5:
        return r.randint(-1000, 200000)
    if k < 0.7:
        return r.choice([0, -1, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 10**18, 10**19, -10**19])
    if k < 0.85:
        return r.randint(-2**63, 2**63 - 1)
    return r.choice([1, -1]) * r.randint(10**19, 10**r.randint(20, 300))


def rand_float(r):
    k = r.random()
    if k < 0.3:
        return r.choice([math.inf, -math.inf, math.nan, 0.0, -0.0, 1e-05, 1e+300, 1.5e+300,
                         5e-324, 1.7976931348623157e308, 0.1, 0.7, 1e16, 123456789.0, 2.5e-7])
    if k < 0.6:
        return r.uniform(-1000, 1000)
    if k < 0.8:
        return r.choice([1, -1]) * 10 ** r.uniform(-320, 308)
    bits = r.getrandbits(64)
    return struct.unpack(">d", bits.to_bytes(8, "big"))[0]


def rand_name(r, dotted=False):
    first = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
    rest = first + "0123456789"
    parts = []
    for _ in range(r.randint(2, 3) if dotted else 1):
        parts.append(r.choice(first) + "".join(r.choice(rest) for _ in range(r.randint(0, 10))))
    name = ".".join(parts)
    if name in ("True", "False", "None", "inf", "nan", "Ellipsis") or name.split(".")[0] in (
            "r", "b", "u", "br", "rb", "R", "B", "U", "bR", "Br", "rB", "Rb", "BR", "RB"):
        name = "X" + name
    return name


def rand_scalar(r, pure):
    k = r.random()
    if k < 0.32:
        return rand_str(r)
    if k < 0.55:
        return rand_int(r)
    if k < 0.7:
        f = rand_float(r)
        if pure and (math.isinf(f) or math.isnan(f)):
            return 1.5
        return f
    if k < 0.78:
        return bytes(r.getrandbits(8) for _ in range(r.randint(0, 16)))
    if k < 0.9:
        return r.choice([None, True, False])
    if pure:
        return r.randint(0, 9)
    k = r.random()
    if k < 0.4:
        return Dotted(rand_name(r, dotted=True))
    if k < 0.7:
        return Opaque(r.choice(["function f at 0x7f3a2c1b0d30", "object object at 0x7f00",
                                "Foo <nested> x", "class 'int'", "built-in method x"]))
    return Ellipsis


def rand_hashable(r, depth, pure):
    k = r.random()
    if k < 0.7 or depth <= 0:
        v = rand_scalar(r, True)
        if v is None:
            return 7  # hash(None) is address-based before 3.12: set order would vary
        return v if not isinstance(v, float) or not math.isnan(v) else 0.5
    return tuple(rand_hashable(r, depth - 1, pure) for _ in range(r.randint(0, 3)))


def rand_value(r, depth, pure=False):
    if depth <= 0 or r.random() < 0.35:
        return rand_scalar(r, pure)
    k = r.random()
    n = r.choice([0, 1, 2, 3, r.randint(0, 8)])
    if k < 0.3:
        return [rand_value(r, depth - 1, pure) for _ in range(n)]
    if k < 0.45:
        return tuple(rand_value(r, depth - 1, pure) for _ in range(n))
    if k < 0.7:
        return {rand_hashable(r, 2, pure): rand_value(r, depth - 1, pure) for _ in range(n)}
    if k < 0.8:
        s = {rand_hashable(r, 2, pure) for _ in range(max(n, 1))}
        return s
    if pure:
        return [rand_int(r) for _ in range(n)]
    args = [(None, rand_value(r, depth - 1)) for _ in range(r.randint(0, 2))]
    args += [(rand_name(r), rand_value(r, depth - 1)) for _ in range(r.randint(0, 4))]
    return Call(rand_name(r, dotted=r.random() < 0.2), args)


# ------------------------------------------------------------------ SGLang truncation

def safe_key(r):
    """Dict keys are printed raw as '{k}' by SGLang: keep them free of quotes,
    backslashes and non-printables so the literal stays valid."""
    alphabet = "abcdefghijklmnopqrstuvwxyz_0123456789 -.:/"
    k = "".join(r.choice(alphabet) for _ in range(r.randint(1, 12)))
    if r.random() < 0.1:
        k += chr(r.randint(0x4E00, 0x9FFF))
    return k


def trunc_canon(v, limit, abbrev):
    """Canonical form of sglang_render.text_render(v, limit, abbrev=abbrev)."""
    half = limit // 2
    if isinstance(v, str):
        if len(v) <= limit:
            return canon(v)
        return "X[%s,%s]" % (canon(v[:half]), canon(v[-half:]))
    if isinstance(v, (list, tuple)):
        if len(v) <= limit:
            return canon(v)
        return "X[%s,%s]" % (canon(v[:half]), canon(v[-half:]))
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if abbrev is not None and abbrev.applies(k, x):
                shown = abbrev_canon(abbrev, k, x)
            else:
                shown = trunc_canon(x, limit, abbrev)
            parts.append(canon(str(k)) + ":" + shown)
        return "D[" + ",".join(parts) + "]"
    if type(v).__name__ == "Record":
        parts = []
        for k, x in v.fields:
            if abbrev is not None and abbrev.applies(k, x):
                shown = abbrev_canon(abbrev, k, x)
            else:
                shown = trunc_canon(x, limit, abbrev)
            parts.append(k + "=" + shown)
        return "C%s(%s)" % (v.name, ",".join(parts))
    return canon(v)


def abbrev_canon(abbrev, key, value):
    marker = abbrev.marker(key, value)           # "<key: N chars, blake2b=HEX>"
    digest = marker[marker.rindex("=") + 1:-1]
    return "A%s:%d:%s" % (key, len(value), digest)


def rand_trunc_value(r, render, depth):
    k = r.random()
    if k < 0.35 or depth <= 0:
        return rand_str(r, maxlen=40)
    if k < 0.55:
        n = r.randint(0, 40)
        if r.random() < 0.7:
            seq = [rand_int(r) for _ in range(n)]
        else:
            seq = [rand_value(r, 1) for _ in range(n)]
        return tuple(seq) if r.random() < 0.15 else seq
    if k < 0.75:
        return {safe_key(r): rand_trunc_value(r, render, depth - 1) for _ in range(r.randint(0, 4))}
    if k < 0.85:
        fields = [(rand_name(r), rand_trunc_value(r, render, depth - 1)) for _ in range(r.randint(0, 5))]
        return render.Record(rand_name(r), fields)
    if r.random() < 0.5:
        return rand_scalar(r, False)
    v = rand_value(r, 2)
    # a dict directly under text_render gets its keys printed raw as '{k}',
    # which breaks for non-str keys; inside a list Python's repr is used
    return [v] if isinstance(v, dict) else v


def gen_trunc(r, render, count):
    out = []
    while len(out) < count:
        v = rand_trunc_value(r, render, 3)
        limit = r.choice([2, 3, 4, 6, 8, 16, 32])
        abbrev = None
        if r.random() < 0.2:
            abbrev = render.Abbrev({"text", "prompt", "content"}, r.choice([0, 4, 10]))
            if not isinstance(v, (dict, render.Record)):
                v = {"text": rand_str(r, 40), "x": v}
        text = render.text_render(v, limit, abbrev=abbrev)
        if "\n" in text or "\r" in text:
            continue  # only exotic str() of objects could do this; not a repr
        out.append((trunc_canon(v, limit, abbrev), text))
    return out


# ------------------------------------------------------------------ negatives

JUNK = ",:]})[{(=;@$?!#"


def rejected(text):
    try:
        ast.literal_eval(text)
    except Exception:  # noqa: BLE001 - any rejection counts
        return True
    return False


def is_bare_name(text):
    t = text.rstrip()
    return bool(t) and all(part.isidentifier() for part in t.split("."))


def gen_negative(r, count):
    out = []
    while len(out) < count:
        text = repr(rand_value(r, 3, pure=True))
        if len(text) < 2:
            continue
        if r.random() < 0.5:
            # a log line cut in the middle: the input ends inside the value
            cut = text[:r.randint(1, len(text) - 1)]
            if rejected(cut) and not is_bare_name(cut):
                out.append(("T", cut))
            continue
        i = r.randint(0, len(text) - 1)
        if r.random() < 0.5:
            if (i > 0 and text[i - 1].isalpha()) or text[i].isalpha():
                continue  # Tr,ue or b,'x' would leave plain names, which we accept
            bad = text[:i] + r.choice(JUNK) + text[i:]
        elif text[i].isalpha():
            continue  # deleting a letter of True/None gives a plain name, which we accept
        else:
            bad = text[:i] + text[i + 1:]
        if bad and rejected(bad):
            out.append(("E", bad))
    return out


# ------------------------------------------------------------------ main

# ------------------------------------------------------------------ JSON mode

JSON_HALF = 4


def rand_json(r, depth):
    k = r.random()
    if depth <= 0 or k < 0.5:
        return r.choice([None, True, False, rand_int(r), rand_float(r), rand_str(r), rand_str(r, 40)])
    if k < 0.75:
        return [rand_json(r, depth - 1) for _ in range(r.randint(0, 11))]
    return {rand_str(r, 8): rand_json(r, depth - 1) for _ in range(r.randint(0, 5))}


def json_canon(v, half):
    """canon() of a value json.loads gave, with SGLang's JSON-mode cut shapes as markers: a string
    of exactly 2*half+3 code points with "..." after `half`, a list of exactly 2*half+1 items
    whose middle one is "..." (the documented rule, applied to what the log holds)."""
    if isinstance(v, str) and len(v) == 2 * half + 3 and v[half:half + 3] == "...":
        return "X[%s,%s]" % (canon(v[:half]), canon(v[half + 3:]))
    if isinstance(v, list):
        items = [json_canon(x, half) for x in v]
        if len(v) == 2 * half + 1 and v[half] == "...":
            items[half] = "E"
        return "L[" + ",".join(items) + "]"
    if isinstance(v, dict):
        return "D[" + ",".join(canon(k) + ":" + json_canon(x, half) for k, x in v.items()) + "]"
    return canon(v)


def gen_json(seed, count):
    sys.path.insert(0, HERE)
    import gen_rerender_fixtures as rr
    import gen_sglang_logger_fixtures as lg
    transform = lg.load_logger(rr)._transform_data_for_logging
    r = random.Random(seed + 1)
    rows = []
    while len(rows) < count:
        v = rand_json(r, 3)
        if r.random() < 1 / 3:
            v = transform(v, max_length=2 * JSON_HALF)
        text = json.dumps(v, ensure_ascii=r.random() < 0.5)
        if len(text) > 3000:
            continue
        rows.append((json_canon(json.loads(text), JSON_HALF), text))
    return rows


def write(path, header, rows):
    with open(path, "wb") as f:
        f.write(("# generated by tools/gen_pylit_cases.py; do not edit\n# %s\n" % header).encode())
        for a, b in rows:
            line = a + "\t" + b + "\n"
            assert line.count("\n") == 1, repr(b)
            f.write(line.encode("utf-8", "surrogatepass"))


def main():
    # set iteration order of str/bytes depends on hash randomisation: pin it
    # so that the committed files are reproducible
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "testdata", "parse", "pylit"))
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--count", type=int, default=3000)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as render

    r = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    while len(rows) < args.count:
        v = rand_value(r, 4)
        text = repr(v)
        if len(text) > 3000:
            continue
        rows.append((canon(v), text))
    write(os.path.join(args.out, "y_random.txt"), "seed %d: CANON<TAB>repr(value)" % args.seed, rows)
    write(os.path.join(args.out, "y_trunc.txt"), "seed %d: CANON<TAB>sglang_render.text_render(value, limit)"
          % args.seed, gen_trunc(r, render, args.count // 3))
    write(os.path.join(args.out, "n_random.txt"), "seed %d: KIND<TAB>text rejected by ast.literal_eval"
          % args.seed, gen_negative(r, args.count // 2))
    write(os.path.join(args.out, "y_json.txt"), "seed %d: CANON<TAB>json.dumps(value), half %d"
          % (args.seed, JSON_HALF), gen_json(args.seed, args.count))


if __name__ == "__main__":
    main()
