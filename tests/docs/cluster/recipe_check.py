"""recipe_check.py - what the checks of docs/cluster/'s recipes share: the folder to check, and
running a check on the recipe as it is and then on copies broken in one way each, every one of
which must fail (so that the check can fail).

run(describe, files, check, broken): `files` the recipe's file names, `check(folder)` its
problems (a list, empty when fine), `broken` a list of (what is broken, file, text, replacement).
Prints "ok"/"FAIL" lines and "N passed, N failed"; returns the exit status.
"""
import os
import sys
import tempfile


def folder_of_argv():
    if len(sys.argv) > 1:
        return sys.argv[1]
    root = os.environ.get("LD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    return os.path.join(root, "docs", "cluster")


def broken_copy(folder, files, name, old, new, tmp):
    """The recipe copied into tmp with `old` replaced by `new` in `name`; False when `old` is gone."""
    for f in files:
        with open(os.path.join(folder, f)) as src:
            text = src.read()
        if f == name:
            if old not in text:
                return False
            text = text.replace(old, new, 1)
        with open(os.path.join(tmp, f), "w") as dst:
            dst.write(text)
    return True


def run(describe, files, check, broken):
    folder = folder_of_argv()
    passed = failed = 0
    problems = check(folder)
    if problems:
        failed += 1
        print(f"FAIL {', '.join(files)}:")
        for x in problems:
            print("     " + x)
    else:
        passed += 1
        print(f"ok   {describe}")
    for what, name, old, new in broken:
        with tempfile.TemporaryDirectory() as tmp:
            if not broken_copy(folder, files, name, old, new, tmp):
                failed += 1
                print(f"FAIL broken copy '{what}': {name} no longer has {old!r}")
                continue
            found = check(tmp)
        if found:
            passed += 1
            print(f"ok   broken copy fails: {what} ({found[0]})")
        else:
            failed += 1
            print(f"FAIL broken copy passes: {what}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
