#!/usr/bin/env bash
# The differential check against SGLang's own request logger: the logs of
# testdata/sglang-logger/ were written by sglang 0.5.23's request_logger.py
# (tools/gen_sglang_logger_fixtures.py) at levels 1-3, text and JSON, with
# concurrent requests, a client disconnect, a rejected request, tool calls
# with unicode, an aborted answer, and messages hidden in a level-2 cut.
# Every request must get the verdict and error findings it was built for.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/sglang-logger"
for level in 1 2 3; do
    for fmt in text json; do
        name=level$level-$fmt.log
        "$LOGDIFF" diff --json "$D/$name" >"$WORK/$name.json" 2>"$WORK/err"
        check "$name: every request judged as built" \
            python3 "$LD_SOURCE_DIR/tests/cli/check_sglang_logger.py" "$D/expect.json" "$name" "$WORK/$name.json"
        "$LOGDIFF" diff "$D/$name" >"$WORK/human" 2>&1
        check "$name: every line read, no input error" grep -q "lines read, 0 health checks left out, 0 input errors" "$WORK/human"
    done
done

# --tokenizer: where level 2 kept the input ids whole, they give the whole
# prompt back and the hidden messages are decided
TOK="${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}/tokenizers/ggml-vocab-gpt-2.gguf"
if [ -f "$TOK" ]; then
    for level in 2 3; do
        for fmt in text json; do
            name=level$level-$fmt.log
            "$LOGDIFF" diff --json --tokenizer "$TOK" "$D/$name" >"$WORK/$name.tok.json" 2>"$WORK/err"
            check "$name --tokenizer: every request judged as built" python3 \
                "$LD_SOURCE_DIR/tests/cli/check_sglang_logger.py" "$D/expect.json" "$name" "$WORK/$name.tok.json" --tokenizer
        done
    done
    run "level 2 --tokenizer: the whole prompt's verdict (exit 1)" 1 "$LOGDIFF" diff --verbose --tokenizer "$TOK" "$D/level2-text.log"
    check "the finding says the whole prompt came from the ids" grep -q \
        "info  log.truncated: templated prompt cut by the logger at byte 1024; judged on the whole prompt ([0-9]* bytes) decoded from the [0-9]* input ids it kept whole" "$WORK/out"
else
    echo "skip --tokenizer: $TOK absent"
fi

# the human report of a hidden message names the cut and declines to decide
run "level 2: a hidden message is reported (exit 1)" 1 "$LOGDIFF" diff "$D/level2-text.log"
check "the hidden message's finding names the cut" grep -q \
    "error log.message_hidden \[message 1\]: message 1 (user): content (61 bytes) lies where the logger cut the prompt (at byte 1024): whether the template kept it cannot be told from this log" "$WORK/out"
check "the long messages around the cut are not called dropped" sh -c "! grep -q 'template.dropped_message' '$WORK/out'"
# the same conversation at level 3 shows the template's fault
run "level 3: the dropped messages are found (exit 1)" 1 "$LOGDIFF" diff "$D/level3-text.log"
check "level 3: two dropped messages in each of the two requests built so" test "$(grep -c 'error template.dropped_message' "$WORK/out")" = 4

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
