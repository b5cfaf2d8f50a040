#!/usr/bin/env bash
# logdiff regress past one machine: --shard I/N --partial FILE on each share, --merge of the
# partials writes byte for byte what one process over every input writes (text, --json, JUnit,
# HTML, --update-baseline), for several N (more shares than inputs included), with a log whose
# texts hold invalid UTF-8 and a lone surrogate, and with an unreadable input; a missing,
# duplicate, cut or foreign partial is an error that names it; --shard auto from Slurm's and
# Kubernetes' variables; diff --shard's outputs in share order are one run's.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
make_archives "$WORK"
cd "$WORK" || exit 1
B=baseline.json
run "baseline of the before archive" 0 "$LOGDIFF" regress --baseline $B --update-baseline before.tar.gz

# a log whose not-ok request holds an invalid byte and a lone surrogate (WTF-8) in a message
# and in its prompt: the partial must carry them exactly
mkdir -p odd
python3 - "$DEMO/server-0.log" odd/server-0.log <<'PY'
import sys
lines = open(sys.argv[1], 'rb').read().split(b'\n')
out = [l.replace(b'Plan the', b'Pl\xffan\xed\xa0\x80 the') if b'demo-empty-assistant-2' in l else l
       for l in lines]
open(sys.argv[2], 'wb').write(b'\n'.join(out))
PY
INPUTS=(server-0.tar.xz server-1-after.tar after.zip odd before.tar.gz)

# one_process DIR ARGS...: the reports of one process over INPUTS into DIR
one_process() {
    local dir=$1; shift
    mkdir -p "$dir"
    "$LOGDIFF" regress "$@" --junit "$dir/junit.xml" --html "$dir/report.html" "${INPUTS[@]}" \
        >"$dir/text" 2>/dev/null
    echo $? >"$dir/rc"
    "$LOGDIFF" regress "$@" --json "${INPUTS[@]}" >"$dir/json" 2>/dev/null
}

# sharded DIR N ARGS...: N shares, then the merge's reports into DIR
sharded() {
    local dir=$1 n=$2 i; shift 2
    mkdir -p "$dir"
    for ((i = 0; i < n; i++)); do
        "$LOGDIFF" regress --shard "$i/$n" --partial "$dir/part-$i.json" "${INPUTS[@]}" \
            >>"$dir/shares" 2>&1 || echo "share $i exit $?" >>"$dir/shares"
    done
    "$LOGDIFF" regress --merge "$@" --junit "$dir/junit.xml" --html "$dir/report.html" "$dir"/part-*.json \
        >"$dir/text" 2>"$dir/merge-err"
    echo $? >"$dir/rc"
    "$LOGDIFF" regress --merge "$@" --json "$dir"/part-*.json >"$dir/json" 2>/dev/null
}

# sharded2 DIR N ARGS...: the two passes that follow conversations across shares: every share's
# conversation journal, then every share from the journals of the shares before it; the merge's
# reports into DIR.  $SHARE_ARGS go to the shares.
sharded2() {
    local dir=$1 n=$2 i; shift 2
    mkdir -p "$dir/journals"
    for ((i = 0; i < n; i++)); do
        "$LOGDIFF" regress --shard "$i/$n" ${SHARE_ARGS:-} --conv-journal "$dir/journals/$i.jsonl" "${INPUTS[@]}" \
            >>"$dir/shares" 2>&1 || echo "journal $i exit $?" >>"$dir/shares"
    done
    for ((i = 0; i < n; i++)); do
        "$LOGDIFF" regress --shard "$i/$n" ${SHARE_ARGS:-} --conv-from "$dir/journals" --partial "$dir/part-$i.json" \
            "${INPUTS[@]}" >>"$dir/shares" 2>&1 || echo "share $i exit $?" >>"$dir/shares"
    done
    "$LOGDIFF" regress --merge "$@" --junit "$dir/junit.xml" --html "$dir/report.html" "$dir"/part-*.json \
        >"$dir/text" 2>"$dir/merge-err"
    echo $? >"$dir/rc"
    "$LOGDIFF" regress --merge "$@" --json "$dir"/part-*.json >"$dir/json" 2>/dev/null
}

same_reports() {
    local a=$1 b=$2 f
    for f in rc text json junit.xml report.html; do cmp -s "$a/$f" "$b/$f" || { echo "differs: $f"; return 1; }; done
}

one_process one --baseline $B
check "one process: something regressed (exit 1)" grep -qx 1 one/rc
for n in 1 2 3 5 8; do
    sharded "s$n" $n --baseline $B
    check "$n shares merged = one process (text, json, junit, html, exit)" same_reports one "s$n"
done
check "the partial carries the odd bytes as hex" grep -q '"hex"' s1/part-0.json
check "8 shares of 5 inputs: the empty shares were written too" test -s s8/part-7.json
check "shares split conversations: the merge says so" grep -q "conversations.*more than one share" s3/merge-err
for n in 2 3 5; do
    sharded2 "t$n" $n --baseline $B
    check "$n shares in two passes merged = one process" same_reports one "t$n"
    check "  and no note" test ! -s "t$n/merge-err"
done
# the memory bounds: what one process forgot, the shares started from forget too
one_process onemax --baseline $B --max-conversations 1
SHARE_ARGS="--max-conversations 1" sharded2 tmax 3 --baseline $B
check "--max-conversations 1: three shares in two passes = one process" same_reports onemax tmax
check "  which forgot conversations" grep -q "conversations\? forgotten" onemax/text
check "one share: no such note" test ! -s s1/merge-err

# a conversation really split: turn 1 (the interrupted answer) in one input, turn 2 (sent back
# empty) in the next; one process finds harness.stale_assistant, two shares cannot, and the merge
# says why (the conversation's ids differ between the shares: it goes by the first turn's hash)
mkdir -p split
head -n 9 "$DEMO/server-0.log" >split/turn-1.log
tail -n +10 "$DEMO/server-0.log" >split/turn-2.log
for i in 0 1; do "$LOGDIFF" regress --shard $i/2 --partial split/p$i.json split/turn-1.log split/turn-2.log >/dev/null 2>&1; done
"$LOGDIFF" regress --merge --baseline $B --json split/p0.json split/p1.json >split/merged 2>split/merge-err
"$LOGDIFF" regress --baseline $B --json split/turn-1.log split/turn-2.log >split/one 2>/dev/null
check "a split conversation: one process finds the stale assistant turn" grep -q '"harness.stale_assistant"' split/one
check "  two shares do not" bash -c "! grep -q '\"harness.stale_assistant\"' split/merged"
check "  and the merge says that 1 conversation crossed shares" grep -q "note: 1 conversation (e.g. the one of request demo-interrupted-1) had requests in more than one share" split/merge-err
"$LOGDIFF" regress --partial split/whole.json split/turn-1.log split/turn-2.log >/dev/null 2>&1
"$LOGDIFF" regress --merge --baseline $B --json split/whole.json >split/merged1 2>split/merge1-err
check "  one share of both: the same as one process, no note" bash -c "cmp -s split/one split/merged1 && [ ! -s split/merge1-err ]"
# the two passes: journals, then each share from the journals before it: one process's verdicts
SAVED=("${INPUTS[@]}")
INPUTS=(split/turn-1.log split/turn-2.log)
one_process split/one2 --baseline $B
sharded2 split/two 2 --baseline $B
check "  two passes (--conv-journal, --conv-from): merged = one process" same_reports split/one2 split/two
check "  the stale assistant turn found" grep -q '"harness.stale_assistant"' split/two/json
check "  and no note" test ! -s split/two/merge-err
check "  a share's journal run says what it wrote" grep -q "share 0/2: [0-9]* conversation ops; journal split/two/journals/0.jsonl written" split/two/shares
mkdir -p split/empty
run "--conv-from a directory without the earlier share's journal: exit 2" 2 "$LOGDIFF" regress --shard 1/2 \
    --conv-from split/empty --partial split/x.json "${INPUTS[@]}"
check "  it names the share" grep -q "no journal of share 0/2, which this share starts from" "$WORK/err"
run "share 0 needs none" 0 "$LOGDIFF" regress --shard 0/2 --conv-from split/empty --partial split/x.json "${INPUTS[@]}"
"$LOGDIFF" regress --shard 0/3 --conv-journal split/empty/other.jsonl "${INPUTS[@]}" >/dev/null 2>&1
run "a journal of another run (3 shares): exit 2" 2 "$LOGDIFF" regress --shard 1/2 --conv-from split/empty \
    --partial split/x.json "${INPUTS[@]}"
check "  it names it" grep -q "split/empty/other.jsonl is a journal of another run" "$WORK/err"
mkdir -p split/cut && head -c -20 split/two/journals/0.jsonl >split/cut/0.jsonl
run "a cut journal: exit 2" 2 "$LOGDIFF" regress --shard 1/2 --conv-from split/cut --partial split/x.json "${INPUTS[@]}"
check "  it names the file and line" grep -q "split/cut/0.jsonl:[0-9]*: byte [0-9]*: the last line has no end" "$WORK/err"
mkdir -p split/edited && sed 's/Here is the plan/Here is a plan/' split/two/journals/0.jsonl >split/edited/0.jsonl
run "an edited journal: exit 2" 2 "$LOGDIFF" regress --shard 1/2 --conv-from split/edited --partial split/x.json "${INPUTS[@]}"
check "  the digest says so" grep -q "another digest: an op was changed" "$WORK/err"
# the logs changed between the passes: share 1 started from a journal that is not share 0's
cp split/turn-1.log split/turn-1.orig
sed -i 's/Here is the plan/Here is a plan/' split/turn-1.log
"$LOGDIFF" regress --shard 0/2 --partial split/two/part-0.json "${INPUTS[@]}" >/dev/null 2>&1
run "a share started from another journal than the merged share's: exit 2" 2 "$LOGDIFF" regress --merge \
    --baseline $B split/two/part-0.json split/two/part-1.json
check "  it names the share" grep -q "share 1/2 started from a conversation journal of share 0/2 other than" "$WORK/err"
mv split/turn-1.orig split/turn-1.log
run "--conv-from without --partial: exit 2" 2 "$LOGDIFF" regress --shard 1/2 --conv-from split/empty "${INPUTS[@]}"
run "--conv-journal without --shard: exit 2" 2 "$LOGDIFF" regress --conv-journal x "${INPUTS[@]}"
run "--merge with --conv-from: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B --conv-from split/two split/two/part-0.json
INPUTS=("${SAVED[@]}")

# --update-baseline from the merge = from one process
"$LOGDIFF" regress --baseline one/new.json --update-baseline "${INPUTS[@]}" >/dev/null 2>&1
run "merge --update-baseline" 0 "$LOGDIFF" regress --merge --baseline s3/new.json --update-baseline s3/part-*.json
check "the merged baseline = one process's" cmp -s one/new.json s3/new.json

# an unreadable input: its share exits 2 but writes its partial; the merge reports it as one
# process does (exit 2)
INPUTS+=(no-such.tar.gz)
one_process bad --baseline $B
sharded sbad 3 --baseline $B
check "an unreadable input: exit 2 in one process" grep -qx 2 bad/rc
check "its share said so (exit 2)" grep -q "share 2 exit 2" sbad/shares
check "the merge reports it as one process" same_reports bad sbad
unset 'INPUTS[5]'

# partials that are not one run's shares
run "a missing share: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B s5/part-0.json s5/part-1.json \
    s5/part-3.json s5/part-4.json
check "it names the share and its inputs" grep -q "share 2/5 is missing: no partial for its inputs: after.zip" "$WORK/err"
run "a share twice: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B s3/part-0.json s3/part-1.json \
    s3/part-2.json s3/part-1.json
check "it names both files" grep -q "share 1/3 is there twice: s3/part-1.json and s3/part-1.json" "$WORK/err"
run "shares of different runs: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B s2/part-0.json s3/part-1.json
check "it says why" grep -q "not shares of one run: another number of shares" "$WORK/err"
"$LOGDIFF" regress --shard 1/2 --no-conversations --partial nc.json "${INPUTS[@]}" >/dev/null 2>&1
run "other judging settings: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B s2/part-0.json nc.json
check "it says so" grep -q "other judging settings" "$WORK/err"
"$LOGDIFF" regress --shard 1/2 --partial other.json server-0.tar.xz after.zip >/dev/null 2>&1
run "another input list: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B s2/part-0.json other.json
check "it says so" grep -q "another list of inputs" "$WORK/err"
head -c 2000 s1/part-0.json >cut.json
run "a cut partial: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B cut.json
check "file, line and byte named, and why" grep -Eq "cut.json:[0-9]+: byte [0-9]+: .*cut" "$WORK/err"
sed '1s/"version":2/"version":3/' s1/part-0.json >v3.json
run "another format version: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B v3.json
check "it names the version" grep -q "format version 3" "$WORK/err"
sed '$s/"items":[0-9]*/"items":999/' s1/part-0.json >count.json
run "an end line that does not match: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B count.json
check "it says what it holds" grep -q "the file holds .* items" "$WORK/err"
run "not a partial: exit 2" 2 "$LOGDIFF" regress --merge --baseline $B $B
check "it says so" grep -q "not a partial of logdiff regress" "$WORK/err"

# options that do not go together
run "--shard without --partial: exit 2" 2 "$LOGDIFF" regress --shard 0/2 --baseline $B before.tar.gz
run "--merge with a judging option: exit 2" 2 "$LOGDIFF" regress --merge --template x --baseline $B s1/part-0.json
check "it names it" grep -q "leave out --template" "$WORK/err"
run "--partial with --junit: exit 2" 2 "$LOGDIFF" regress --partial p.json --junit j.xml before.tar.gz
for spec in 2/2 -1/2 x 1/0 auto/0 1/2/3; do
    run "--shard $spec: exit 2" 2 "$LOGDIFF" regress --shard "$spec" --partial p.json before.tar.gz
done

# --shard auto: a Slurm job array (--array=2-5: task 3 is share 1 of 4), a Kubernetes Indexed Job
run "Slurm array task 3 of 2-5" 0 env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=2 SLURM_ARRAY_TASK_MAX=5 \
    SLURM_ARRAY_TASK_COUNT=4 "$LOGDIFF" regress --shard auto --partial auto.json "${INPUTS[@]}"
check "it is share 1/4" grep -q '"shard":{"index":1,"count":4}' auto.json
run "Slurm array 0-6:2, task 4: share 2/4" 0 env SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=0 \
    SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_STEP=2 "$LOGDIFF" regress --shard auto --partial auto.json "${INPUTS[@]}"
check "it is share 2/4" grep -q '"shard":{"index":2,"count":4}' auto.json
run "a sparse Slurm array (1,3,5): exit 2" 2 env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 \
    SLURM_ARRAY_TASK_MAX=5 SLURM_ARRAY_TASK_COUNT=3 "$LOGDIFF" regress --shard auto --partial auto.json before.tar.gz
check "it says why" grep -q "not an unbroken range" "$WORK/err"
run "auto/N that is not the array's size: exit 2" 2 env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=4 \
    SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 "$LOGDIFF" regress --shard auto/3 --partial auto.json before.tar.gz
run "Kubernetes index 2 of auto/3" 0 env JOB_COMPLETION_INDEX=2 "$LOGDIFF" regress --shard auto/3 \
    --partial auto.json "${INPUTS[@]}"
check "it is share 2/3" grep -q '"shard":{"index":2,"count":3}' auto.json
run "Kubernetes without a count: exit 2" 2 env JOB_COMPLETION_INDEX=2 "$LOGDIFF" regress --shard auto \
    --partial auto.json before.tar.gz
check "it asks for auto/N" grep -q "auto/N" "$WORK/err"
run "no scheduler: exit 2" 2 env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX "$LOGDIFF" regress \
    --shard auto --partial auto.json before.tar.gz
check "it names both variables" grep -q "SLURM_ARRAY_TASK_ID.*JOB_COMPLETION_INDEX" "$WORK/err"

# diff --shard: the shares' records in share order are one run's (conversations within a share)
"$LOGDIFF" diff --json --no-conversations "${INPUTS[@]}" >diff-all 2>/dev/null
for i in 0 1 2; do "$LOGDIFF" diff --json --no-conversations --shard $i/3 "${INPUTS[@]}" 2>/dev/null; done >diff-shares
check "diff: 3 shares' records = one run's" cmp -s diff-all diff-shares
finish
