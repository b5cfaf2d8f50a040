#!/usr/bin/env python3
# baseline_tiktoken.py - tiktoken, the fastest byte-level BPE there is, on request-sized pieces:
# the anchor bench/tokenize.sh times `logdiff tokenize -z` against.
#
#   python3 bench/baseline_tiktoken.py TOKENIZER.json PIECES RUNS OUT_IDS
#
# Builds a tiktoken Encoding from the tokenizer.json's own GPT-2 vocabulary (its byte-level
# tokens turned back into bytes; ranks = ids, which for GPT-2 follow the merge order; the added
# tokens left out, as tiktoken's own "gpt2" does) and GPT-2's pre-tokenizer pattern: nothing is
# downloaded.  PIECES holds texts separated by NUL bytes; each is encoded alone with
# encode_ordinary (special tokens as text, as logdiff's default) on one thread.  Prints the best
# and mean CPU seconds of all the pieces' encoding and the id count, and writes the ids of the
# first run to OUT_IDS in `logdiff tokenize -z`'s format (a line of space-separated ids a piece).
import json
import sys
import time

import tiktoken

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def byte_decoder():
    """GPT-2's byte-level alphabet, read backwards: printable bytes stand for themselves, the
    others for code points from 256 on."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def encoding(path):
    d = json.load(open(path, encoding="utf-8"))
    dec = byte_decoder()
    added = {t["content"] for t in d.get("added_tokens", [])}
    ranks = {bytes(dec[c] for c in tok): i for tok, i in d["model"]["vocab"].items() if tok not in added}
    return tiktoken.Encoding("gpt2-from-tokenizer-json", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={})


def main():
    path, pieces_path, runs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    enc = encoding(path)
    data = open(pieces_path, "rb").read()
    pieces = [p.decode("utf-8") for p in data.split(b"\0")]
    if pieces and pieces[-1] == "":
        pieces.pop()
    times, ids = [], None
    for _ in range(runs):
        t0 = time.process_time()
        got = [enc.encode_ordinary(p) for p in pieces]
        times.append(time.process_time() - t0)
        if ids is None:
            ids = got
    with open(out, "w") as fh:
        for row in ids:
            fh.write(" ".join(map(str, row)) + "\n")
    print(f"best {min(times):.4f} mean {sum(times) / len(times):.4f} ids {sum(map(len, ids))} "
          f"pieces {len(pieces)} tiktoken {tiktoken.__version__}")


if __name__ == "__main__":
    main()
