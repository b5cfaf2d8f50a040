#!/bin/sh
# fuzz_dict.sh TARGET - the libFuzzer dictionary of a fuzz target (tests/fuzz/dict/), or nothing.
case $1 in
    template) d=template ;;
    pylit) d=pylit ;;
    logline) d=logline ;;
    capture) d=capture ;;
    input) d=input ;;
    gguf|tokgguf) d=gguf ;;
    watchstate) d=watchstate ;;
    tokjson|modelcfg|dscfg|ds4cfg|safetensors|specs|dsenc|partial|journal) d=json ;;
    *) exit 0 ;;
esac
cd "$(dirname "$0")/.." && [ -f "tests/fuzz/dict/$d.dict" ] && echo "tests/fuzz/dict/$d.dict"
