#!/usr/bin/env python3
"""gen_tok_gguf_seeds.py - seed corpus for tests/fuzz/fuzz_tokgguf.c: tiny GGUF files of our own
holding a byte-level BPE vocabulary (tokenizer.ggml.* keys as llama.cpp writes them), for each
pre-tokenizer name the loader knows, plus damaged variants (truncated, a merge naming a missing
token, a wrong model name).  Written with the struct module from the GGUF layout (GGUF v3,
little-endian); standard library only, deterministic.
Usage: python3 tools/gen_tok_gguf_seeds.py   (writes tests/fuzz/corpus/tokgguf/)
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus", "tokgguf")
STRING, ARRAY, UINT32, BOOL = 8, 9, 4, 7


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def str_array(items):
    return struct.pack("<IQ", STRING, len(items)) + b"".join(gstr(x) for x in items)


def int_array(items):
    return struct.pack("<IQ", 5, len(items)) + b"".join(struct.pack("<i", x) for x in items)


def gguf(pairs):
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs))
    return head + b"".join(pairs)


def byte_token(b):
    """GPT-2 bytes_to_unicode for one byte."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in printable:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(printable)).index(b))


def vocab_file(pre, model="gpt2", extra_merge=None):
    tokens = [byte_token(b) for b in range(256)]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "Ġ w"]
    for m in merges:
        a, b = m.split(" ")
        tokens.append(a + b)
    if extra_merge:
        merges.append(extra_merge)
    tokens += ["<|endoftext|>", "<|im_start|>", "<tool>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 4]
    pairs = [kv("tokenizer.ggml.model", STRING, gstr(model)),
             kv("tokenizer.ggml.pre", STRING, gstr(pre)),
             kv("tokenizer.ggml.tokens", ARRAY, str_array(tokens)),
             kv("tokenizer.ggml.token_type", ARRAY, int_array(types)),
             kv("tokenizer.ggml.merges", ARRAY, str_array(merges)),
             kv("tokenizer.ggml.bos_token_id", UINT32, struct.pack("<I", len(tokens) - 3)),
             kv("tokenizer.ggml.add_bos_token", BOOL, b"\x01")]
    return gguf(pairs)


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    for pre in ("gpt-2", "llama-bpe", "qwen2", "deepseek-v3", "deepseek-llm", "deepseek-coder"):
        files["vocab-" + pre] = vocab_file(pre)
    files["bad-merge"] = vocab_file("gpt-2", extra_merge="Ġw x")
    files["bad-model"] = vocab_file("gpt-2", model="llama")
    files["bad-pre"] = vocab_file("no-such-pre")
    files["truncated"] = vocab_file("gpt-2")[:300]
    for name, data in files.items():
        with open(os.path.join(OUT, name + ".gguf"), "wb") as fh:
            fh.write(data)
    print(f"{len(files)} seeds in {OUT}")


if __name__ == "__main__":
    main()
