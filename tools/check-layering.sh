#!/usr/bin/env bash
# check-layering.sh - enforces the one-way dependencies of the design, folder
# by folder, through every subfolder:
#   cmd/ -> replay/ -> parse/,  replay/ -> engine/ -> kernels/,  all -> include/
# and inside the layers the rules below (the tokenizer and the template
# interpreter know nothing of the analysis or the replay run; replay/ reaches
# the engine through engine/engine.h; ...).  Also: library code never exits
# or writes to the standard streams.
# Usage: tools/check-layering.sh [SOURCE_DIR]; prints violations, exit 1 if any.
set -uf  # -f: the rules' X/** are patterns, not globs
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
bad=0
report() { echo "layering: $*"; bad=1; }

# What each folder's files may include besides their own folder and the base
# (include/, the generated logdiff_config.h).  "X/**" is X and everything
# below it; "X" alone is that folder (or that one file).  A folder without a
# line of its own takes its nearest parent's.  engine/engine.h is the
# engine's contract: its folders implement it, and replay/ sees only it.
rules='
include
kernels
kernels/ref
kernels/cpu                 kernels/ref
kernels/cuda                kernels/ref
engine                      engine/** kernels/**
engine/formats
engine/backend              engine/engine.h engine/formats kernels/ref kernels/cpu
engine/backend/cuda         engine/engine.h engine/backend engine/formats kernels/cuda kernels/ref
engine/backend/cpu          engine/engine.h engine/backend engine/formats kernels/ref kernels/cpu
engine/models               engine/engine.h engine/backend engine/formats kernels/ref
engine/models/dense         engine/engine.h engine/models engine/backend engine/formats kernels/ref
engine/models/deepseek_v3   engine/engine.h engine/models engine/models/dense engine/backend engine/formats kernels/ref
engine/models/deepseek_v4   engine/engine.h engine/models engine/models/dense engine/models/deepseek_v3 engine/backend engine/formats kernels/ref
engine/tp                   engine/engine.h engine/models/** engine/backend/** engine/formats kernels/**
parse                       parse/**
parse/input
parse/follow                parse/input
parse/capture               parse/input parse/line parse/pylit
parse/pylit
parse/line                  parse/pylit
parse/request               parse/pylit parse/line
parse/pair                  parse/input parse/line parse/pylit parse/request
replay                      replay/** parse/** engine/engine.h
replay/tokenizer            parse/input engine/formats/gguf.h
replay/template             replay/template/** parse/input engine/formats/gguf.h
replay/template/jinja       replay/template/jinja/**
replay/template/deepseek    replay/template/jinja
replay/analysis             replay/template replay/tokenizer parse/request parse/pylit
replay/run                  replay/analysis replay/tokenizer parse/** engine/engine.h
cmd                         cmd/** replay/** parse/**
'

# rule_of DIR: the allowed list of DIR's nearest folder with a rule
rule_of() {
    local d=$1 line
    while :; do
        line=$(printf '%s\n' "$rules" | awk -v d="$d" '$1 == d { $1 = ""; print "+" $0; exit }')
        [ -n "$line" ] && { echo "${line#+}"; return; }
        [ "$d" = "${d%/*}" ] && return
        d=${d%/*}
    done
}

# allowed TARGET LIST: whether the resolved include TARGET is in LIST
allowed() {
    local target=$1 tdir=${1%/*} entry
    for entry in $2; do
        case $entry in
        */\*\*) [ "$tdir" = "${entry%/\*\*}" ] || [[ $tdir == "${entry%/\*\*}"/* ]] && return 0 ;;
        *) [ "$tdir" = "$entry" ] || [ "$target" = "$entry" ] && return 0 ;;
        esac
    done
    return 1
}

# resolve DIR NAME: where `#include "NAME"` in DIR leads, as the build's
# include path finds it (the file's own folder, the base, the root)
resolve() {
    local dir=$1 name=$2
    if [ -f "$dir/$name" ]; then realpath -m --relative-to=. "$dir/$name"
    elif [ -f "include/$name" ] || [ "$name" = logdiff_config.h ]; then echo "include/$name"
    elif [ -f "$name" ]; then echo "$name"
    fi
}

check_folder_includes() {
    local f dir list name target
    while IFS= read -r f; do
        dir=${f%/*}
        list=$(rule_of "$dir")
        while IFS= read -r name; do
            [ -n "$name" ] || continue
            target=$(resolve "$dir" "$name")
            if [ -z "$target" ]; then
                report "$f includes \"$name\", which is neither beside it, in include/ nor a path from the root"
                continue
            fi
            [ "${target%/*}" = "$dir" ] || [ "${target%/*}" = include ] && continue
            allowed "$target" "$list" || report "$f includes $target (${dir}/ may include: ${list:-its own folder only})"
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find include kernels engine parse replay cmd -type f \
                  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
}
check_folder_includes

# only cmd/ exits or prints
# (string literals are blanked first: a message may name "stderr")
hits=$(find parse replay engine kernels include -type f \( -name '*.c' -o -name '*.cu' \) | sort |
    while read -r f; do
        sed -E 's/"([^"\\]|\\.)*"/""/g' "$f" |
            grep -n -E '\b(exit|abort|printf|puts|perror)\s*\(|\b(stdout|stderr)\b' | sed "s|^|$f:|"
    done |
    grep -v -E '^\S+:[0-9]+:\s*(/\*|\*)' | grep -v -E 'snprintf|vsnprintf|fprintf\(f,|fprintf\(out,')
[ -n "$hits" ] && report "library code must not exit or print: $hits"
if [ $bad = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $bad
