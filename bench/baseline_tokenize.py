#!/usr/bin/env python3
# baseline_tokenize.py - HF `tokenizers` encoding, the baseline that bench/tokenize.sh times
# against `logdiff tokenize`.
#
#   python3 bench/baseline_tokenize.py TOKENIZER.json TEXT RUNS OUT_IDS
#
# Loads the tokenizer once, then encodes the whole TEXT RUNS times (one call each, batch of one,
# add_special_tokens=False, special tokens as text like logdiff's default) on one thread
# (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false are set by the caller), prints the best and
# mean seconds per encode and the id count, and writes the ids of the first run to OUT_IDS in
# `logdiff tokenize`'s format (ids separated by single spaces, then a newline).
import sys
import time

from tokenizers import Tokenizer, __version__


def main():
    path, text_path, runs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    tok = Tokenizer.from_file(path)
    tok.encode_special_tokens = True
    text = open(text_path, encoding="utf-8", newline="").read()
    times, ids = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        enc = tok.encode(text, add_special_tokens=False)
        times.append(time.perf_counter() - t0)
        if ids is None:
            ids = enc.ids
    open(out, "w").write(" ".join(map(str, ids)) + "\n")
    print(f"best {min(times):.4f} mean {sum(times) / len(times):.4f} ids {len(ids)} tokenizers {__version__}")


if __name__ == "__main__":
    main()
