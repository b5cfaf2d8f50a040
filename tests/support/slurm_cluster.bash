# slurm_cluster.bash - a single-node Slurm cluster of the test's own (sourced by a bash test):
# munged with a key of its own, slurmctld and slurmd as root on loopback, every file (config,
# key, state, spool, logs) in one temporary folder, free ports, no cgroups (proctrack/linuxproc,
# task/none), no accounting database.  Debian 12's slurm-wlm 22.05 and munge.
#
#   slurm_own_network "$0" "$@"
#                              first thing in the test: runs it again in a network namespace of
#                              its own where only loopback is up (unshare -n), as slurmctld
#                              listens on every address; where that cannot be, goes on, saying so
#   slurm_cluster_start        configures and starts it, waits until sinfo shows the node idle,
#                              exports SLURM_CONF (sbatch, squeue, scontrol then use it) and
#                              SLURM_DIR; stops it all on the test's exit.  Where it cannot start
#                              it prints why (with the daemons' log tails) and exits 77 (skip).
#   slurm_cluster_stop         cancels the jobs left and stops the daemons (called on exit)
#   slurm_wait_gone ID... [--timeout S]
#                              waits until none of the jobs (an array's tasks too) is queued,
#                              running or completing; else says which is left and returns 1 on
#                              timeout, 2 at once for a job whose dependency can never be met
#   slurm_job_field ID FIELD   one field of `scontrol show job -o ID` (JobState, ExitCode, ...):
#                              a line per array task, as scontrol prints them
#   slurm_wait_file PATH [S]   waits until PATH exists (a job's sign of life); 1 on timeout
#   slurm_logs_tail            the daemons' log tails, for a failure's explanation
#
# Nothing outside the folder is written; no daemon outlives the test (an exit trap, and a watcher
# that stops them if the test is killed without running its traps).

SLURM_START_TIMEOUT=${SLURM_START_TIMEOUT:-30}

# In the namespace loopback gets a second address, 127.0.0.2: Slurm resolves with AI_ADDRCONFIG,
# which finds no IPv4 address where 127.0.0.1 is the only one configured.
slurm_own_network() {
    [ -n "${_SLURM_OWN_NETWORK:-}" ] && return 0
    local up='ip link set lo up && ip addr add 127.0.0.2/8 dev lo'
    if command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
        unshare -n -- bash -c "$up" >/dev/null 2>&1; then
        export _SLURM_OWN_NETWORK=1
        exec unshare -n -- bash -c "$up"' && exec bash "$@"' bash "$@"
    fi
    echo "note: no network namespace of its own (unshare -n, ip): slurmctld listens on every address while the test runs"
}

_slurm_skip() {
    echo "skipped: the Slurm cluster cannot start here: $*"
    [ -n "${SLURM_DIR:-}" ] && slurm_logs_tail
    slurm_cluster_stop
    exit 77
}

slurm_logs_tail() {
    local f
    for f in "$SLURM_DIR"/log/*.log; do
        [ -s "$f" ] || continue
        echo "--- tail of $f"
        tail -n 15 "$f"
    done
    for f in "$SLURM_DIR"/log/*.stderr; do
        grep -qi 'error\|fatal' "$f" 2>/dev/null || continue
        echo "--- errors in $f"
        grep -i 'error\|fatal' "$f" | tail -n 5
    done
}

# _slurm_free_ports N: N distinct TCP ports free on 127.0.0.1 now, one a line
_slurm_free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
}

# _slurm_node_line NAME: the node's real CPUs and memory as slurmd -C reads them
_slurm_node_line() {
    local probe
    probe=$(slurmd -C 2>/dev/null | head -n 1) || return 1
    case $probe in NodeName=*CPUs=*RealMemory=*) ;; *) return 1 ;; esac
    # slurmd -C names the node by its host name: the config's node is NAME on 127.0.0.1
    echo "NodeName=$1 NodeHostname=$(hostname) NodeAddr=127.0.0.1 ${probe#NodeName=* } State=UNKNOWN"
}

_slurm_write_conf() {
    local node=$1 ctld_port=$2 slurmd_port=$3 d=$SLURM_DIR
    local node_line
    node_line=$(_slurm_node_line "$node") || return 1
    cat >"$d/slurm.conf" <<EOF
# written by tests/support/slurm_cluster.bash for one test run
ClusterName=logdiff-test
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/run/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=600
$node_line
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

_slurm_start_munge() {
    local d=$SLURM_DIR
    mungekey -c -b 1024 -k "$d/munge/munge.key" >/dev/null 2>&1 || return 1
    munged -F --key-file="$d/munge/munge.key" --socket="$d/run/munge.socket" \
        --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
        --seed-file="$d/munge/munged.seed" >"$d/log/munged.stderr" 2>&1 &
    _slurm_started $! munged
    local i
    for i in $(seq 50); do
        munge -S "$d/run/munge.socket" -n 2>/dev/null | unmunge -S "$d/run/munge.socket" >/dev/null 2>&1 && return 0
        _slurm_alive $! || return 1
        sleep 0.1
    done
    return 1
}

# _slurm_node_state: the node's state as sinfo prints it (idle, unk*, drain, ...)
_slurm_node_state() {
    sinfo -h -N -o '%t' 2>/dev/null | head -n 1
}

# the daemons' process ids, kept in a file so that the watcher (a subshell started before
# them) stops them too
_slurm_started() { echo "$1 $2" >>"$SLURM_DIR/run/daemons.pids"; }   # PID NAME
_slurm_pids() { cut -d' ' -f1 "$SLURM_DIR/run/daemons.pids" 2>/dev/null; }
# _slurm_alive PID: running (a zombie, exited but not yet reaped, is not)
_slurm_alive() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$1/stat" 2>/dev/null; }

_slurm_watch_parent() { # stops the daemons if the test is gone without its traps (SIGKILL)
    local parent=$1
    (
        trap '' INT TERM
        while kill -0 "$parent" 2>/dev/null; do sleep 1; done
        slurm_cluster_stop
        rm -rf "$SLURM_DIR"
    ) >/dev/null 2>&1 </dev/null &
    _SLURM_WATCHER=$!
    disown "$_SLURM_WATCHER"   # no "Killed" from the shell when it is stopped
}

slurm_cluster_start() {
    local t
    for t in slurmctld slurmd munged mungekey sbatch squeue sinfo scontrol scancel python3; do
        command -v "$t" >/dev/null 2>&1 ||
            { echo "skipped: $t not found (Debian: apt-get install slurm-wlm munge)"; exit 77; }
    done
    [ "$(id -u)" -eq 0 ] || { echo "skipped: the test's Slurm cluster runs its daemons as root"; exit 77; }
    SLURM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ld-slurm.XXXXXX")
    # munged wants its socket's folder reachable by all, its key's by root alone
    chmod 755 "$SLURM_DIR"
    mkdir -m 700 "$SLURM_DIR/munge"
    mkdir -m 755 "$SLURM_DIR/run" "$SLURM_DIR/log" "$SLURM_DIR/state" "$SLURM_DIR/spool"
    export SLURM_DIR
    local prev
    prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
    # shellcheck disable=SC2064  # the previous trap's text, expanded now
    trap "slurm_cluster_stop; rm -rf \"\$SLURM_DIR\"; $prev" EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    _slurm_watch_parent $$

    _slurm_start_munge || _slurm_skip "munged did not start"
    local node ports
    node=$(hostname -s)
    ports=$(_slurm_free_ports 2) || _slurm_skip "no free port on 127.0.0.1"
    # shellcheck disable=SC2086
    _slurm_write_conf "$node" $ports || _slurm_skip "slurmd -C could not read this machine's CPUs and memory"
    export SLURM_CONF=$SLURM_DIR/slurm.conf
    # in the foreground (-D), their own children; what they print before their log is open
    # (and again after) in log/*.stderr
    slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_DIR/log/slurmctld.stderr" 2>&1 &
    _slurm_started $! slurmctld
    slurmd -D -f "$SLURM_CONF" -N "$node" >"$SLURM_DIR/log/slurmd.stderr" 2>&1 &
    _slurm_started $! slurmd
    local state="" i pid name
    for i in $(seq $((SLURM_START_TIMEOUT * 5))); do
        state=$(_slurm_node_state)
        [ "$state" = idle ] && return 0
        while read -r pid name; do
            _slurm_alive "$pid" || _slurm_skip "$name exited (node state '${state:-none}')"
        done <"$SLURM_DIR/run/daemons.pids"
        sleep 0.2
    done
    _slurm_skip "the node is not idle after ${SLURM_START_TIMEOUT}s (state '${state:-none}')"
}

# _slurm_job_procs: what jobs of this cluster left running once their slurmstepd is gone:
# slurmstepd processes holding a file of this cluster's folder, and processes whose environment
# has this cluster's SLURM_CONF and a SLURM_JOB_ID (a job's script and its children)
_slurm_job_procs() {
    local p pid env conf="SLURM_CONF=$SLURM_DIR/slurm.conf"
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] || [ "$pid" = "${BASHPID:-$$}" ] && continue
        if [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ]; then
            ls -l "$p/fd" 2>/dev/null | grep -qF "$SLURM_DIR/" && echo "$pid"
        else
            env=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
            printf '%s\n' "$env" | grep -qxF "$conf" &&
                printf '%s\n' "$env" | grep -q '^SLURM_JOB_ID=' && echo "$pid"
        fi
    done
}

slurm_cluster_stop() {
    [ -n "${SLURM_DIR:-}" ] || return 0
    local pids conf=$SLURM_DIR/slurm.conf i
    pids=$(_slurm_pids)
    if [ -n "$pids" ] && [ -f "$conf" ]; then
        SLURM_CONF=$conf scancel --quiet --user=root 2>/dev/null
        for i in $(seq 25); do
            [ -z "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    local pid
    for pid in $pids; do kill "$pid" 2>/dev/null; done
    for pid in $pids; do
        for i in $(seq 50); do _slurm_alive "$pid" || break; sleep 0.1; done
        _slurm_alive "$pid" && kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    for pid in $(_slurm_job_procs); do kill -9 "$pid" 2>/dev/null; done
    if [ -n "${_SLURM_WATCHER:-}" ] && [ "${BASHPID:-$$}" = "$$" ]; then
        kill -KILL "$_SLURM_WATCHER" 2>/dev/null   # it ignores TERM
    fi
    rm -f "$SLURM_DIR/run/daemons.pids"
}

slurm_wait_gone() {
    local timeout=60 ids=()
    while [ $# -gt 0 ]; do
        case $1 in --timeout) timeout=$2; shift 2 ;; *) ids+=("$1"); shift ;; esac
    done
    local list i queued
    list=$(IFS=,; echo "${ids[*]}")
    for i in $(seq $((timeout * 5))); do
        queued=$(squeue -h -j "$list" -o '%i %T %r' 2>/dev/null)
        [ -z "$queued" ] && return 0
        if printf '%s\n' "$queued" | grep -q ' DependencyNeverSatisfied$'; then
            echo "a job will never run: $(printf '%s\n' "$queued" | grep ' DependencyNeverSatisfied$' | head -n 1)"
            return 2
        fi
        sleep 0.2
    done
    echo "still queued after ${timeout}s: $(printf '%s\n' "$queued" | tr '\n' ';')"
    return 1
}

slurm_job_field() {
    scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}

slurm_wait_file() {
    local path=$1 timeout=${2:-60} i
    for i in $(seq $((timeout * 5))); do
        [ -e "$path" ] && return 0
        sleep 0.2
    done
    return 1
}
