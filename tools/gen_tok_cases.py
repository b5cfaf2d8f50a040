#!/usr/bin/env python3
"""gen_tok_cases.py - expected token ids for tests/replay/tokenizer/test_tok.c, from HF `tokenizers`.

    pip install tokenizers==0.23.3
    python3 tools/gen_tok_cases.py [--shared ../shared] [--out testdata/replay/tok/cases.json.zst]

Builds a deterministic corpus (seeded; >1 MB of mixed text: prose with contractions, code,
CJK, emoji, whitespace runs, numbers, combining marks, other scripts, special-token strings),
and encodes it with HF tokenizers through ../shared/tokenizers/gpt2-tokenizer.json (read, never
copied) and through variants of it that differ only in normalizer, pre-tokenizer, added tokens
and post-processor (Qwen2-, Llama-3- and DeepSeek-V3-style Split chains, Digits, every Split
behaviour, NFC, lstrip/rstrip/single_word/normalized added tokens, TemplateProcessing).  The
output (zstd-compressed JSON) holds the variants as patches, the texts and, per case, the config,
the flags (add_special: encode(add_special_tokens=True); parse_special: encode_special_tokens
False) and the ids.

The shared gpt2-tokenizer.json has one merge ("ĠCla ude") whose product is not in its vocabulary
(id 40559 is "ĠLLMProvider" there; the GGUF of the same model has "ĠClaude"), so HF refuses to
load it as it is.  Both this script and the C test drop the merges listed in "removed_merges"
before loading.  Texts with invalid UTF-8 cannot be given to HF; the C test only round-trips those.
"""
import argparse, json, os, random, subprocess, sys

PIN = "0.23.3"

QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DSV3 = [r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]


def split(pattern, behavior="Isolated", invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
            "behavior": behavior, "invert": invert}


def bl(prefix=False, regex=False):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": False, "use_regex": regex}


def added(i, content, special=True, lstrip=False, rstrip=False, normalized=False, single_word=False):
    return {"id": i, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def template(pre, post, specials):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": s, "type_id": 0}} for s in pre] + [{"Sequence": {"id": "A", "type_id": 0}}]
            + [{"SpecialToken": {"id": s, "type_id": 0}} for s in post],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {s: {"id": s, "ids": [i], "tokens": [s]} for s, i in specials.items()}}


EOT = added(50256, "<|endoftext|>", normalized=True)
CHAT = [EOT, added(50257, "<|im_start|>"), added(50258, "<|im_end|>"), added(50259, "<tool_call>", special=False)]
# patches over the gpt2 tokenizer.json: top-level keys replaced; "model_ignore_merges" sets model.ignore_merges
CONFIGS = {
    "gpt2": {},
    "qwen2": {"normalizer": {"type": "NFC"}, "model_ignore_merges": False, "added_tokens": CHAT,
              "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(QWEN2), bl()]},
              "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                                 "use_regex": False}},
    "llama3": {"model_ignore_merges": True,
               "added_tokens": [EOT, added(50257, "<|begin_of_text|>"), added(50258, "<|eot_id|>", lstrip=True, rstrip=True),
                                added(50259, "<|im_start|>", normalized=True, special=False, rstrip=True),
                                added(50260, "user", special=False, single_word=True),
                                added(50261, "<tool_call>", special=False, lstrip=True)],
               "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(LLAMA3), bl()]},
               "post_processor": {"type": "Sequence", "processors": [
                   {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                   template(["<|begin_of_text|>"], [], {"<|begin_of_text|>": 50257})]}},
    "dsv3": {"normalizer": {"type": "Sequence", "normalizers": []},
             "added_tokens": [EOT, added(50257, "<\uff5cbegin\u2581of\u2581sentence\uff5c>"),
                              added(50258, "<\uff5cend\u2581of\u2581sentence\uff5c>"), added(50259, "<think>", special=False)],
             "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(p) for p in DSV3] + [bl()]},
             "post_processor": template(["<\uff5cbegin\u2581of\u2581sentence\uff5c>"], ["<\uff5cend\u2581of\u2581sentence\uff5c>"],
                                        {"<\uff5cbegin\u2581of\u2581sentence\uff5c>": 50257,
                                         "<\uff5cend\u2581of\u2581sentence\uff5c>": 50258})},
    "split_prev": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFC"}]},
                   "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                       split("[,;.]", "MergedWithPrevious"), {"type": "Digits", "individual_digits": True}, bl(True, True)]},
                   "post_processor": {"type": "BertProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["<|endoftext|>", 50256]}},
    "split_next": {"normalizer": {"type": "NFKC"},
                   "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                       split(" ", "MergedWithNext", literal=True), split("--", "Removed", literal=True), bl()]}},
    "split_contig": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                         split(r"\p{L}", "Contiguous", invert=True), {"type": "Digits", "individual_digits": False},
                         bl(False, True)]}},
    "split_invert": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                         split(r"\s+", "Removed", invert=True), split(r"[A-Z]", "MergedWithNext"), bl(True, False)]}},
}

WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had by "
         "word but not what all were we when your can said there use an each which she do how their if will up other "
         "about out many then them these so some her would make like him into time has look two more write go see "
         "number no way could people my than first water been call who oil its now find long down day did get come "
         "made may part tokenizer server request prompt model vLLM SGLang llama Qwen DeepSeek JSON").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "n't", "'x",
                "\u2019s", "'\u017f"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b",
          "\u180e", "\u2009", "\f", "\v", " \t \n"]
EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1EF\U0001F1F5",
         "\u2764\ufe0f", "\U0001F916", "\U0001F525\U0001F525", "\u2603", "\U0001FAE0"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "<|begin_of_text|>", "<|eot_id|>",
            "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<think>", "user",
            "<|im_", "<|endoftext", " <|eot_id|> ", "users", "_user_", "<|im_start|>user\n"]
CODE = ['def f(x):\n    return x**2  # square\n', 'int main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}\n',
        'for (size_t i = 0; i < n; i++) a[i] += b[i] * 3.14159;', '    if (!ok) { goto fail; }\n',
        'SELECT id, name FROM users WHERE age >= 18 ORDER BY name;', '{"key": [1, 2, 3], "nested": {"a": null}}',
        '#include <stdio.h>\n', 'x = [i for i in range(100) if i % 3 == 0]', '$ ls -la /tmp && echo "done" | tee log.txt',
        'fn main() -> Result<(), Box<dyn Error>> { Ok(()) }', '<div class="a">&nbsp;</div>', '===>>> ... !!! ???']
SCRIPTS = ["\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5",
           "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
           "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
           "\uc548\ub155\ud558\uc138\uc694", "\u05e9\u05dc\u05d5\u05dd", "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0"]
MARKS = ["e\u0301", "A\u030a", "\u1100\u1161\u11a8", "\ufb01", "\u2460", "\u00bd", "\u00b2", "\u216b", "\u0661\u0662\u0663",
         "\u212a", "o\u0308\u0304", "\u1e9b\u0323", "\uff21\uff22\uff23", "\u3300", "\u00c5", "\u212b"]


def segment_words(rng):
    out = []
    for _ in range(rng.randrange(3, 40)):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.1: w = w.upper()
        elif r < 0.25: w = w.capitalize()
        if rng.random() < 0.12: w += rng.choice(CONTRACTIONS)
        out.append(w)
        out.append(rng.choice([" "] * 12 + [", ", ". ", "! ", "? ", "  ", "\n", " - ", "; "]))
    return "".join(out)


def segment(rng):
    k = rng.randrange(11)
    if k <= 2:
        return segment_words(rng)
    if k == 3: return rng.choice(CODE) * rng.randrange(1, 3)
    if k == 4: return "".join(chr(rng.choice([rng.randrange(0x4e00, 0x9fa6), rng.randrange(0x3041, 0x3097),
                                               rng.randrange(0x30a1, 0x30fb), rng.randrange(0xac00, 0xd7a4)]))
                              for _ in range(rng.randrange(1, 60)))
    if k == 5: return "".join(rng.choice(EMOJI + [" "]) for _ in range(rng.randrange(1, 10)))
    if k == 6: return "".join(rng.choice(SPACES) for _ in range(rng.randrange(1, 12)))
    if k == 7:
        r = rng.random()
        if r < 0.3: return str(rng.randrange(10 ** rng.randrange(1, 30)))
        if r < 0.6: return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 8)}f}"
        return rng.choice(["3333333", "1,234,567.89", "0x1F", "1e-9", "2026-11-29", "12:34:56", "\u0663\u0664", "\u2155"])
    if k == 8: return rng.choice(SCRIPTS + MARKS) + rng.choice(["", " ", "\n"]) + rng.choice(MARKS)
    if k == 9: return rng.choice(SPECIALS)
    return rng.choice(["a" * rng.randrange(50, 400), " " * rng.randrange(10, 300), "\n" * rng.randrange(3, 50),
                       "-" * rng.randrange(5, 100), "!?" * rng.randrange(3, 30), "1" * rng.randrange(10, 200)])


def corpus(rng, total, max_segments):
    texts, size = [], 0
    while size < total:
        t = "".join(segment(rng) for _ in range(rng.randrange(1, max_segments)))
        texts.append(t)
        size += len(t.encode())
    return texts


def fixed_texts():
    return ["", " ", "Hello world", " Hello world", "Hello World", "  leading", "trailing  ", "\n", "\t\t",
            "<|endoftext|>", "a<|endoftext|>b", " <|eot_id|>  x", "<|im_start|>user\nhi<|im_end|>\n",
            "users user user_ _user", "<tool_call> x", "x  <tool_call>", "caf\u00e9 cafe\u0301", "ｆｕｌｌ width",
            "don't I'M we'VE you'll", "\u1100\u1161\u11a8 \u00c5 \u212b", "1234567890 ①②③ ½", "a--b -- c", "A.B,C;D",
            "Hello\u0085world\u200bx\u180ey\u2028z", "\u017f \u212a 'S '\u017f"]


def make_tokenizer(base, patch):
    from tokenizers import Tokenizer
    d = json.loads(json.dumps(base))
    for k, v in patch.items():
        if k == "model_ignore_merges": d["model"]["ignore_merges"] = v
        else: d[k] = v
    return Tokenizer.from_str(json.dumps(d))


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--out", default=os.path.join(here, "..", "testdata", "replay", "tok", "cases.json.zst"))
    a = ap.parse_args()
    import tokenizers
    if tokenizers.__version__ != PIN:
        sys.exit(f"gen_tok_cases.py: needs tokenizers=={PIN} (pip install tokenizers=={PIN}), found {tokenizers.__version__}")
    base = json.load(open(os.path.join(a.shared, "tokenizers", "gpt2-tokenizer.json"), encoding="utf-8"))
    vocab = base["model"]["vocab"]
    removed = [m for m in base["model"]["merges"] if "".join(m.split(" ")) not in vocab]
    base["model"]["merges"] = [m for m in base["model"]["merges"] if m not in removed]
    rng = random.Random(20261129)
    texts = fixed_texts() + corpus(rng, 1_100_000, 9)
    n_main = len(texts)
    small = corpus(random.Random(5), 60_000, 6)
    texts += small
    cases = []
    for name, patch in CONFIGS.items():
        tok = make_tokenizer(base, patch)
        which = range(n_main) if name == "gpt2" else list(range(len(fixed_texts()))) + list(range(n_main, len(texts)))
        for flags in (0, 1, 2, 3):  # bit 0 add_special, bit 1 parse_special
            if name == "gpt2" and flags == 1: continue  # no post-processor ids: same as 0
            tok.encode_special_tokens = not (flags & 2)
            for i in which:
                if flags and name == "gpt2" and i >= 200 and "<|" not in texts[i]: continue
                ids = tok.encode(texts[i], add_special_tokens=bool(flags & 1)).ids
                cases.append([name, flags, i, ids])
    doc = {"generator": "tools/gen_tok_cases.py", "tokenizers_version": PIN, "source": "tokenizers/gpt2-tokenizer.json",
           "removed_merges": removed, "configs": CONFIGS, "texts": texts,
           "cases": cases}
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    z = subprocess.run(["zstd", "-19", "-q", "-c"], input=raw, stdout=subprocess.PIPE, check=True).stdout
    open(a.out, "wb").write(z)
    print(f"{len(texts)} texts ({sum(len(t.encode()) for t in texts)} bytes), {len(cases)} cases, "
          f"{len(raw)} bytes JSON, {len(z)} bytes compressed -> {a.out}")


if __name__ == "__main__":
    main()
