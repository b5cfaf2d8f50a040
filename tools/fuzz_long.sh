#!/usr/bin/env bash
# fuzz_long.sh - every fuzz target for longer than CI's smoke run, keeping what it finds.
#
#   tools/fuzz_long.sh [MINUTES] [TARGET...]    # default 10 minutes each, every target
#
# Builds the targets with clang, libFuzzer, ASan and UBSan into build-fuzz/ (incremental), then
# runs each for MINUTES on two workers with its dictionary (tests/fuzz/dict/) and its seed corpus,
# growing the corpus in build-fuzz/corpus/TARGET/ (kept between runs: a later run goes on from
# there).  What it adds is merged back into tests/fuzz/corpus/TARGET/ only with --keep-new
# (minimised with -merge=1: review before committing).  A crash stops the target and leaves its
# input as build-fuzz/crash-* with the target's log; the script then exits 1.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
MINUTES=10
KEEP=0
TARGETS=()
for a in "$@"; do
    case $a in
        --keep-new) KEEP=1 ;;
        [0-9]*) MINUTES=$a ;;
        *) TARGETS+=("$a") ;;
    esac
done
B=${FUZZ_BUILD:-build-fuzz} # another build folder of the same configuration
cmake -S . -B "$B" -DCMAKE_C_COMPILER=clang -DLOGDIFF_FUZZ=ON \
      -DLOGDIFF_SANITIZE=address,undefined -DLOGDIFF_WERROR=ON >/dev/null || exit 2
if [ ${#TARGETS[@]} -eq 0 ]; then
    for src in tests/fuzz/fuzz_*.c; do n=$(basename "$src" .c); TARGETS+=("${n#fuzz_}"); done
fi
cmake --build "$B" -j "$(nproc)" --target "${TARGETS[@]/#/fuzz_}" >/dev/null || exit 2
status=0
for t in "${TARGETS[@]}"; do
    dict=$(tools/fuzz_dict.sh "$t")
    corpus=$B/corpus/$t
    mkdir -p "$corpus"
    cp -rn "tests/fuzz/corpus/$t/." "$corpus/" 2>/dev/null || true
    [ "$t" = template ] && [ -d ../shared/templates ] && cp -n ../shared/templates/*.jinja "$corpus/" 2>/dev/null
    before=$(ls "$corpus" | wc -l)
    echo "fuzz_long: $t for $MINUTES min (corpus $before files${dict:+, $dict})"
    # in the build folder: libFuzzer's -jobs writes fuzz-N.log where it runs
    if ! (cd "$B" && "./fuzz_$t" -max_total_time=$((MINUTES * 60)) -rss_limit_mb=2048 -jobs=2 -workers=2 \
            -artifact_prefix=./ ${dict:+-dict="$ROOT/$dict"} "$ROOT/$corpus") >"$B/fuzz_$t.log" 2>&1; then
        echo "fuzz_long: $t: a crash or leak; see $B/fuzz_$t.log and $B/crash-*" >&2
        status=1
        continue
    fi
    echo "fuzz_long: $t: corpus $before -> $(ls "$corpus" | wc -l) files"
    if [ "$KEEP" = 1 ]; then
        "$B/fuzz_$t" -merge=1 "tests/fuzz/corpus/$t" "$corpus" >>"$B/fuzz_$t.log" 2>&1
    fi
done
exit $status
