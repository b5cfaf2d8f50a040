#!/usr/bin/env bash
# check-layering.sh - enforces the one-way dependencies of the design:
#   cmd/ -> replay/ -> parse/,  replay/ -> engine/ -> kernels/
# and that library code never exits or writes to the standard streams.
# Usage: tools/check-layering.sh [SOURCE_DIR]; prints violations, exit 1 if any.
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
bad=0
report() { echo "layering: $*"; bad=1; }

# directory -> directories whose headers it must not include
check_includes() {
    local dir=$1; shift
    [ -d "$dir" ] || return 0
    for forbidden in "$@"; do
        for h in $(ls "$forbidden" 2>/dev/null | grep '\.h$'); do
            grep -Hn "#include *\"$h\"" "$dir"/*.c "$dir"/*.h 2>/dev/null |
                while read -r hit; do echo "layering: $hit includes $forbidden/$h"; done
        done
    done
}
out=$(
    check_includes parse replay engine kernels cmd
    check_includes engine replay parse cmd
    check_includes kernels replay parse engine cmd
    check_includes replay cmd
)
[ -n "$out" ] && { echo "$out"; bad=1; }

# only cmd/ exits or prints
for dir in parse replay engine kernels; do
    [ -d "$dir" ] || continue
    hits=$(grep -Hn -E '\b(exit|abort|printf|puts|perror)\s*\(|\b(stdout|stderr)\b' \
        "$dir"/*.c 2>/dev/null | grep -v -E '^\S+:\s*(/\*|\*)' |
        grep -v -E 'snprintf|vsnprintf|fprintf\(f,|fprintf\(out,' )
    [ -n "$hits" ] && report "library code must not exit or print: $hits"
done
if [ $bad = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $bad
