#!/usr/bin/env bash
# gen_input_fixtures.sh - regenerates the seed corpus of tests/fuzz/fuzz_input.c
# (tests/fuzz/corpus/input/) with the standard tools: a plain text file, single
# gzip/zstd/xz/bzip2 streams, a tar, a tar.gz, a zip with a directory entry,
# and 300 bytes of junk.  The unit tests (tests/parse/input/test_input.c) make their
# own fixtures at run time with libarchive's write API and need nothing here.
# Usage: tools/gen_input_fixtures.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(dirname "$0")/..}
out="$root/tests/fuzz/corpus/input"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out" "$tmp/d"
printf 'one\ntwo\n' > "$tmp/d/x.log"
printf 'three' > "$tmp/y.log"
printf '[x] a\r\n{"b":1}\nlast' > "$out/plain.txt"
printf 'a\nb\n' | gzip -9n > "$out/small.gz"
printf 'z\n' | zstd -q > "$out/small.zst"
printf 'x\n' | xz > "$out/small.xz"
printf 'y\n' | bzip2 > "$out/small.bz2"
tarflags=(--owner=0 --group=0 --mtime=2020-01-01 --sort=name)
(cd "$tmp" && tar -b1 "${tarflags[@]}" -cf - y.log) > "$out/small.tar"
(cd "$tmp" && tar "${tarflags[@]}" -cf - d y.log | gzip -9n) > "$out/small.tar.gz"
rm -f "$out/small.zip"
(cd "$tmp" && touch -d 2020-01-01 d d/x.log y.log && TZ=UTC zip -qrX - d y.log) > "$out/small.zip"
head -c 300 /dev/urandom > "$out/junk.bin"
echo "wrote $(ls "$out" | wc -l) files to $out"
