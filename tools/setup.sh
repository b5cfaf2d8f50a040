#!/usr/bin/env bash
# setup.sh - the two commands of the README, for a fresh Debian machine.
#   tools/setup.sh demo   install what is missing, build, run logdiff on the demo logs
#   tools/setup.sh test   install what is missing, build, run every CPU test
#                         (normal build with -Werror, then ASan+UBSan, then a
#                         short libFuzzer run of every fuzz target)
# Environment: BUILD_DIR (default build), FUZZ_SECONDS (default 20 per target),
# JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-demo}
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

need_pkgs() {
    # libsystemd-dev: journald's own *.journal files; libmicrohttpd-dev: watch --metrics-listen (both optional at build time)
    local pkgs="cmake make gcc pkg-config python3 libcjson-dev libpcre2-dev libzstd-dev zlib1g-dev libarchive-dev libutf8proc-dev libsystemd-dev libmicrohttpd-dev gzip zstd xz-utils bzip2 zip"
    # chromium: the HTML report test (regress_html.sh); g++: the CUDA kernels on the CPU emulator
    # (tests/support/cuda_emu, built where the CUDA toolkit's headers are)
    # systemd-journal-remote and journalctl: the journald fixtures are a real journal file,
    # printed by journalctl (tests/cli/journal.sh); prometheus (and its promtool) and
    # python3-prometheus-client: watch's metrics read back, docs/ops/'s rules checked;
    # slurm-wlm and munge: the single-node Slurm cluster tests/cli/regress_slurm.sh starts;
    # python3-pip: the PyPI checkers below
    [ "$mode" = test ] && pkgs="$pkgs clang libclang-rt-14-dev chromium g++ systemd systemd-journal-remote prometheus python3-prometheus-client slurm-wlm munge python3-pip"
    local missing=""
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    echo "$missing"
}

install_missing() {
    local missing
    missing=$(need_pkgs)
    [ -z "$missing" ] && return 0
    echo "setup: installing$missing" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >&2
}

# kubernetes-validate and check-jsonschema (PyPI, pinned): docs/cluster/'s Kubernetes manifests
# and GitHub workflow checked against the schemas they ship (tests/docs/cluster/; they skip
# without them)
PIP_PKGS="kubernetes-validate==1.37.0 check-jsonschema==0.39.0"
install_pip_missing() {
    [ "$mode" = test ] || return 0
    local missing="" p
    for p in $PIP_PKGS; do
        python3 -m pip show -q "${p%%==*}" >/dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "setup: pip installing$missing" >&2
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check $missing >&2 ||
        echo "setup: pip could not install$missing: the tests needing them will skip" >&2
}

build() { # build DIR [cmake args...]
    local dir=$1; shift
    cmake -S . -B "$dir" -DLOGDIFF_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

# the demo's build: only the logdiff binary, its progress in a log file, so
# that what a newcomer sees is the report (the log's tail when it fails)
build_demo() {
    mkdir -p "$BUILD_DIR"
    local log=$BUILD_DIR/demo-build.log
    echo "setup: building logdiff (progress in $log)" >&2
    if ! { cmake -S . -B "$BUILD_DIR" -DLOGDIFF_WERROR=ON && cmake --build "$BUILD_DIR" -j "$JOBS" --target logdiff; } >"$log" 2>&1; then
        tail -40 "$log" >&2
        exit 1
    fi
}

# the CMake argument that hands the plain build's CUDA kernels to another
# build of this tree (nothing where that build has none: no nvcc)
prebuilt_cuda_kernels() {
    local lib dir=$BUILD_DIR
    case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
    lib=$(find "$dir" -maxdepth 2 -name libld_kernels_cuda.a 2>/dev/null | head -1)
    [ -n "$lib" ] && echo "-DLOGDIFF_CUDA_KERNELS_LIB=$lib"
    return 0
}

fuzz_smoke() {
    local dir=$BUILD_DIR-fuzz
    build "$dir" -DCMAKE_C_COMPILER=clang -DLOGDIFF_FUZZ=ON -DLOGDIFF_SANITIZE=address,undefined
    for src in tests/fuzz/fuzz_*.c; do
        local name fmt work
        name=$(basename "$src" .c); fmt=${name#fuzz_}
        work=$(mktemp -d)
        cp -r "tests/fuzz/corpus/$fmt/." "$work/" 2>/dev/null || true
        # real chat templates are third-party data: they stay in ../shared and
        # only seed the run when that folder is there
        if [ "$fmt" = template ] && [ -d ../shared/templates ]; then
            cp ../shared/templates/*.jinja "$work/" 2>/dev/null || true
        fi
        local dict
        dict=$(tools/fuzz_dict.sh "$fmt")
        echo "fuzz: $name for ${FUZZ_SECONDS}s" >&2
        "$dir/$name" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 \
            ${dict:+-dict="$dict"} "$work" >"$dir/$name.log" 2>&1 || { tail -40 "$dir/$name.log"; exit 1; }
        rm -rf "$work"
    done
}

install_missing
install_pip_missing
case "$mode" in
demo)
    build_demo
    # with the model's real chat template (in ../shared) the diff also re-renders every
    # logged array and shows where the server's prompt differs
    qwen=../shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja
    tpl=()
    [ -f "$qwen" ] && tpl=(--template "$qwen")
    echo "== logdiff diff ${tpl[*]} testdata/demo/ =="
    "$BUILD_DIR/logdiff" diff "${tpl[@]}" testdata/demo/ && rc=0 || rc=$?
    echo "== logdiff scan testdata/demo/ =="
    "$BUILD_DIR/logdiff" scan testdata/demo/ || true
    # diff exits 1 when it found something, as diff(1) does: the demo's point
    [ "$rc" -le 1 ] || exit "$rc"
    ;;
test)
    # the plain build first: it compiles the CUDA kernels (every default
    # architecture, where nvcc exists) once, and the ASan build links them
    build "$BUILD_DIR"
    build "$BUILD_DIR-asan" -DLOGDIFF_SANITIZE=address,undefined $(prebuilt_cuda_kernels)
    # emu_long: the CUDA emulator's whole-session replays, left to the plain build below
    ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$BUILD_DIR-asan" -L cpu -LE emu_long --output-on-failure -j "$JOBS"
    fuzz_smoke
    ctest --test-dir "$BUILD_DIR" -L cpu --output-on-failure -j "$JOBS"
    ;;
*)
    echo "usage: tools/setup.sh demo|test" >&2; exit 2 ;;
esac
