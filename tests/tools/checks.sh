#!/usr/bin/env bash
# checks.sh - the repository's own checks catch what they are for:
# tools/check-layering.sh on a small tree that breaks each kind of rule (and
# passes once mended), tools/check-cycles.py on objects that call each other
# in a circle (reported, then allowed by a list, then gone).  The checks run
# over the real tree as tools.layering and tools.cycles; this says that they
# can fail.  Needs cc, nm and python3.
set -u
: "${LD_SOURCE_DIR:?}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
not_ok() { failed=$((failed + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
expect() { # NAME PATTERN FILE: FILE has a line matching PATTERN
    if grep -qE "$2" "$3"; then ok "$1"; else not_ok "$1" "no line matches: $2" "$(head -c 800 "$3")"; fi
}

# ---------------------------------------------------------------- layering
T=$WORK/tree
mkdir -p "$T/include" "$T/kernels/ref" "$T/engine/formats" "$T/replay/tokenizer" "$T/replay/analysis" \
         "$T/parse/input" "$T/cmd"
printf '#pragma once\n' >"$T/include/ld_error.h"
printf '#pragma once\n' >"$T/kernels/ref/ref_ops.h"
printf '#pragma once\n' >"$T/engine/engine.h"
printf '#pragma once\n' >"$T/engine/formats/gguf.h"
printf '#pragma once\n' >"$T/replay/analysis/finding.h"
printf '#pragma once\n' >"$T/parse/input/input.h"
# every rule broken once
printf '#include "engine/engine.h"\n' >"$T/kernels/ref/ref_ops.c"              # a kernel reaching up
printf '#include "replay/analysis/finding.h"\n' >"$T/replay/tokenizer/tok.c"  # tokenizer -> analysis
printf '#include "gguf.h"\n' >"$T/replay/tokenizer/tok_gguf.c"                 # a bare non-sibling name
printf '#include "engine/engine.h"\n' >"$T/cmd/main.c"                         # cmd/ -> engine/
printf '#include <stdio.h>\nvoid f(void) { printf("x"); }\n' >"$T/parse/input/input.c" # library printing
printf '#include <stdio.h>\nvoid g(void) { fputs("x", stderr); }\n' >"$T/parse/input/input_log.c" # to stderr
bash "$LD_SOURCE_DIR/tools/check-layering.sh" "$T" >"$WORK/layer.out" 2>&1
rc=$?
[ $rc = 1 ] && ok "layering: a broken tree fails (exit 1)" || not_ok "layering: exit $rc, expected 1"
expect "layering: a kernel including the engine" "kernels/ref/ref_ops.c includes engine/engine.h" "$WORK/layer.out"
expect "layering: the tokenizer including the analysis" "replay/tokenizer/tok.c includes replay/analysis/finding.h" "$WORK/layer.out"
expect "layering: a bare name for another folder's header" "tok_gguf.c includes \"gguf.h\", which is neither beside it" "$WORK/layer.out"
expect "layering: cmd/ including the engine" "cmd/main.c includes engine/engine.h" "$WORK/layer.out"
expect "layering: library code printing" "library code must not exit or print: parse/input/input.c" "$WORK/layer.out"
expect "layering: library code writing to stderr" "parse/input/input_log.c:2:" "$WORK/layer.out"
# mended: what the rules allow
printf '#include "ref_ops.h"\n#include "ld_error.h"\n' >"$T/kernels/ref/ref_ops.c"
printf '#include "parse/input/input.h"\n' >"$T/replay/tokenizer/tok.c"
printf '#include "engine/formats/gguf.h"\n' >"$T/replay/tokenizer/tok_gguf.c"
printf '#include "parse/input/input.h"\n' >"$T/cmd/main.c"
printf '#include <stdio.h>\nint f(char *b) { return snprintf(b, 2, "x"); }\n' >"$T/parse/input/input.c"
printf 'const char *g(void) { return "<stdout|stderr> \\" stderr"; }\n' >"$T/parse/input/input_log.c" # named in a message
if bash "$LD_SOURCE_DIR/tools/check-layering.sh" "$T" >"$WORK/layer2.out" 2>&1; then
    ok "layering: the mended tree passes"
else
    not_ok "layering: the mended tree fails" "$(cat "$WORK/layer2.out")"
fi

# ---------------------------------------------------------------- cycles
B=$WORK/build
O=$B/CMakeFiles/ld_demo.dir/lib
mkdir -p "$O" "$WORK/src/lib"
printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' >"$WORK/src/lib/a.c"
printf 'int a(int);\nint b(int x) { return x ? a(x - 1) : 1; }\n' >"$WORK/src/lib/b.c"
printf 'int a(int);\nint c(int x) { return a(x); }\n' >"$WORK/src/lib/c.c"
for f in a b c; do cc -c "$WORK/src/lib/$f.c" -o "$O/$f.c.o" || not_ok "cc $f.c"; done
# check-cycles.py takes a source tree at its own root: a copy of it beside the sources
mkdir -p "$WORK/src/tools"
cp "$LD_SOURCE_DIR/tools/check-cycles.py" "$WORK/src/tools/"
: >"$WORK/src/tools/cycles-allowed.txt"
python3 "$WORK/src/tools/check-cycles.py" "$B" >"$WORK/cyc.out" 2>&1
rc=$?
[ $rc = 1 ] && ok "cycles: a circle fails (exit 1)" || not_ok "cycles: exit $rc, expected 1" "$(cat "$WORK/cyc.out")"
expect "cycles: the circle named by its files" "circle of calls between files: lib/a.c <-> lib/b.c$" "$WORK/cyc.out"
if grep -q "lib/c.c <->" "$WORK/cyc.out"; then not_ok "cycles: a one-way call is not a circle"; else ok "cycles: a one-way call is not a circle"; fi
echo "lib/b.c <-> lib/a.c  # allowed, in either order" >"$WORK/src/tools/cycles-allowed.txt"
if python3 "$WORK/src/tools/check-cycles.py" "$B" >"$WORK/cyc2.out" 2>&1; then ok "cycles: an allowed circle passes"
else not_ok "cycles: an allowed circle fails" "$(cat "$WORK/cyc2.out")"; fi
rm "$O/b.c.o"
python3 "$WORK/src/tools/check-cycles.py" "$B" >"$WORK/cyc3.out" 2>&1
expect "cycles: an allowed circle that is gone is pointed out" "the allowed circle lib/a.c <-> lib/b.c is gone" "$WORK/cyc3.out"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
