#!/usr/bin/env python3
"""check_github.py - docs/cluster/github-regress.yml, the GitHub Actions recipe.

The workflow is validated against the GitHub workflow schema that check-jsonschema ships
(--builtin-schema vendor.github-workflows, no network), then the fields the recipe rests on
are checked: a matrix of journal jobs 0..N-1 each running `regress --shard I/N --conv-journal
FILE` and uploading FILE; a matrix of shards 0..N-1 that needs them, runs when one failed,
downloads every journal into one folder and runs `regress --shard I/N --conv-from FOLDER
--partial FILE` with I the matrix value and N the matrix size (the same N as the journals'),
uploading FILE as an artifact of its own; a merge job
that needs the shards, runs when one failed (`!cancelled()` or `always()`), downloads every
partial into one folder and merges them with `regress --merge --baseline`.  Then the same
checks must fail on copies of the file each broken in one way (the check can fail).
Exit 0 passed, 1 failed, 77 check-jsonschema (PyPI) missing.

usage: check_github.py [DOCS_CLUSTER_DIR]
"""
import os
import re
import subprocess
import sys

import recipe_check

try:
    import yaml
    import check_jsonschema  # noqa: F401  (run below as a module of this interpreter)
except ImportError as e:
    print(f"skipped: {e.name} not installed (pip install check-jsonschema==0.39.0)")
    sys.exit(77)

WORKFLOW = "github-regress.yml"
SHARD_ARG = "--shard ${{ matrix.shard }}/${{ strategy.job-total }}"
PARTIAL = "partial-${{ matrix.shard }}.json"
JOURNAL = "journal-${{ matrix.shard }}.jsonl"


def schema_problems(path):
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                        "vendor.github-workflows", path], capture_output=True, text=True)
    if r.returncode == 0:
        return []
    lines = [l.strip() for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    best = [l for l in lines if "unexpected" in l or "is not" in l or "required" in l]
    return [f"{WORKFLOW}: schema: " + (best[-1] if best else " / ".join(lines[-3:]))]


def step_using(steps, action):
    return [s for s in steps if str(s.get("uses", "")).startswith(action + "@")]


def runs_on_failure(cond):
    return isinstance(cond, str) and ("!cancelled()" in cond or "always()" in cond)


def journal_problems(journal, shard):
    """the journal jobs, and the shards' use of their journals"""
    p = []
    if journal.get("strategy", {}).get("matrix") != shard.get("strategy", {}).get("matrix"):
        p.append(f"{WORKFLOW}: the journal jobs' matrix is not the shards'")
    if journal.get("strategy", {}).get("fail-fast", True):
        p.append(f"{WORKFLOW}: the journal jobs' fail-fast must be false: one failed journal must not cancel the others")
    runs = [s for s in journal.get("steps", []) if "regress --shard" in str(s.get("run", ""))]
    if len(runs) != 1 or SHARD_ARG not in runs[0]["run"] or f"--conv-journal {JOURNAL}" not in runs[0]["run"]:
        p.append(f"{WORKFLOW}: the journal job must run regress {SHARD_ARG} --conv-journal {JOURNAL}")
    up = step_using(journal.get("steps", []), "actions/upload-artifact")
    if len(up) != 1 or up[0].get("with", {}).get("path") != JOURNAL or \
            up[0].get("with", {}).get("name") != "journal-${{ matrix.shard }}":
        p.append(f"{WORKFLOW}: the journal job must upload its journal as journal-<shard>")
    needs = shard.get("needs")
    if needs != "journal" and not (isinstance(needs, list) and "journal" in needs):
        p.append(f"{WORKFLOW}: the shard jobs do not need the journal jobs: needs {needs!r}")
    if not runs_on_failure(shard.get("if")):
        p.append(f"{WORKFLOW}: the shard jobs do not run when a journal job failed: if {shard.get('if')!r}")
    down = step_using(shard.get("steps", []), "actions/download-artifact")
    d = down[0].get("with", {}) if len(down) == 1 else {}
    if d.get("pattern") != "journal-*" or d.get("merge-multiple") is not True:
        p.append(f"{WORKFLOW}: the shard job must download every journal-* artifact into one folder: {d}")
    runs = [s for s in shard.get("steps", []) if "regress --shard" in str(s.get("run", ""))]
    if len(runs) == 1 and f"--conv-from {d.get('path', '.')} " not in runs[0]["run"]:
        p.append(f"{WORKFLOW}: the shard step does not start from the journals (--conv-from {d.get('path', '.')})")
    return p


def field_problems(wf):
    p = []
    jobs = wf.get("jobs", {})
    journal, shard, merge = jobs.get("journal"), jobs.get("shard"), jobs.get("merge")
    if not journal or not shard or not merge:
        return [f"{WORKFLOW}: jobs journal, shard and merge expected, found {sorted(jobs)}"]
    p += journal_problems(journal, shard)
    strategy = shard.get("strategy", {})
    matrix = strategy.get("matrix", {})
    if set(matrix) != {"shard"}:
        p.append(f"{WORKFLOW}: the matrix must have the shard dimension alone (job-total is N): {sorted(matrix)}")
    values = matrix.get("shard")
    if not isinstance(values, list) or values != list(range(len(values))) or not values:
        p.append(f"{WORKFLOW}: matrix.shard {values!r} is not 0..N-1")
    if strategy.get("fail-fast", True):
        p.append(f"{WORKFLOW}: fail-fast must be false: a failed shard must not cancel the others")
    runs = [s for s in shard.get("steps", []) if "regress --shard" in str(s.get("run", ""))]
    if len(runs) != 1:
        p.append(f"{WORKFLOW}: one step of the shard job must run regress --shard, found {len(runs)}")
    else:
        run = runs[0]["run"]
        if SHARD_ARG not in run:
            p.append(f"{WORKFLOW}: the shard step does not pass {SHARD_ARG}: {run}")
        if f"--partial {PARTIAL}" not in run:
            p.append(f"{WORKFLOW}: the shard step does not write --partial {PARTIAL}")
    up = step_using(shard.get("steps", []), "actions/upload-artifact")
    if len(up) != 1:
        p.append(f"{WORKFLOW}: the shard job must upload one artifact, found {len(up)}")
        return p
    w = up[0].get("with", {})
    if w.get("path") != PARTIAL or not str(w.get("name", "")).startswith("partial-") \
            or "${{ matrix.shard }}" not in str(w.get("name")):
        p.append(f"{WORKFLOW}: the upload is not the shard's own partial: {w}")
    if not runs_on_failure(up[0].get("if")):
        p.append(f"{WORKFLOW}: the partial is not uploaded when regress exits 2 (an unreadable input)")

    needs = merge.get("needs")
    if needs != "shard" and not (isinstance(needs, list) and "shard" in needs):
        p.append(f"{WORKFLOW}: the merge job does not need the shard job: needs {needs!r}")
    if not runs_on_failure(merge.get("if")):
        p.append(f"{WORKFLOW}: the merge job does not run when a shard failed: if {merge.get('if')!r}")
    down = step_using(merge.get("steps", []), "actions/download-artifact")
    if len(down) != 1:
        p.append(f"{WORKFLOW}: the merge job must download the partials once, found {len(down)}")
        return p
    d = down[0].get("with", {})
    folder = d.get("path", ".")
    if d.get("pattern") != "partial-*" or d.get("merge-multiple") is not True:
        p.append(f"{WORKFLOW}: the download must take every partial-* artifact into one folder: {d}")
    mruns = [s for s in merge.get("steps", []) if "regress --merge" in str(s.get("run", ""))]
    if len(mruns) != 1:
        p.append(f"{WORKFLOW}: one step of the merge job must run regress --merge, found {len(mruns)}")
    elif not re.search(r"--baseline \S+", mruns[0]["run"]) or f"{folder}/partial-*.json" not in mruns[0]["run"]:
        p.append(f"{WORKFLOW}: the merge does not compare {folder}/partial-*.json with a --baseline")
    return p


def check(folder):
    path = os.path.join(folder, WORKFLOW)
    problems = schema_problems(path)
    with open(path) as f:
        wf = yaml.safe_load(f)
    try:
        problems += field_problems(wf)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        problems.append(f"{WORKFLOW}: a field the recipe needs is missing or malformed: {e!r}")
    return problems


# (what is broken, text, replacement): each must make check() fail
BROKEN = [
    ("a misspelt key (schema)", "    needs: shard", "    need: shard"),
    ("a wrong value (schema)", "runs-on: ubuntu-latest", "runs-on: [[ubuntu-latest]]"),
    ("a shard missing from the matrix", "shard: [0, 1, 2, 3]", "shard: [0, 1, 3]"),
    ("N not the matrix size", "/${{ strategy.job-total }}", "/4"),
    ("fail-fast", "fail-fast: false", "fail-fast: true"),
    ("the merge skipped when a shard failed", "    needs: shard\n    # after every shard, failed ones included (Slurm's afterany): a missing share is named\n    if: ${{ !cancelled() }}\n",
     "    needs: shard\n"),
    ("the shards skipped when a journal job failed", "    needs: journal\n    # also when a journal job failed: the shards after it fail naming it, and the merge names them\n    if: ${{ !cancelled() }}\n",
     "    needs: journal\n"),
    ("the shards not from the journals", " --conv-from journals --partial", " --partial"),
    ("the journals downloaded elsewhere", "          path: journals\n", "          path: other\n"),
    ("the journal not uploaded", "          name: journal-${{ matrix.shard }}\n", "          name: journal\n"),
    ("the journal jobs on another matrix", "shard: [0, 1, 2, 3]", "shard: [0, 1, 2]"),
    ("the partials downloaded into one folder each", "merge-multiple: true", "merge-multiple: false"),
    ("no merge", "regress --merge --baseline", "regress --baseline"),
]


def main():
    return recipe_check.run(f"{WORKFLOW}: valid against the GitHub workflow schema, the fields as the recipe "
                            "needs", [WORKFLOW], check, [(what, WORKFLOW, old, new) for what, old, new in BROKEN])


if __name__ == "__main__":
    sys.exit(main())
