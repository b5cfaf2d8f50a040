#!/usr/bin/env python3
"""check_kubernetes.py - docs/cluster/'s Kubernetes recipe: k8s-regress-journals.yaml (a
PersistentVolumeClaim and the Indexed Job of the conversation journals), k8s-regress-shards.yaml
(the Indexed Job of the shards) and k8s-regress-merge.yaml (the merge Job).

Each document is validated against the Kubernetes API schema (kubernetes-validate, strict: an
unknown or misspelt field fails), then the fields the recipe rests on are checked: the Job is
Indexed, `--shard auto/N` with N its completions, each pod's partial named by its
JOB_COMPLETION_INDEX (from the job-completion-index annotation where declared) on a volume that
the merge Job mounts from the same claim, where the merge reads the partials; the journals' Job
alike (the same N and inputs), each pod's journal named by its index in the folder the shards
start from (--conv-from), on the same claim.  Then the same checks must fail on copies of the files each broken in one
way (the check can fail).  Exit 0 passed, 1 failed, 77 kubernetes-validate (PyPI) missing.

usage: check_kubernetes.py [DOCS_CLUSTER_DIR]
"""
import os
import sys

import recipe_check

try:
    import yaml
    import kubernetes_validate
except ImportError as e:
    print(f"skipped: {e.name} not installed (pip install kubernetes-validate==1.37.0)")
    sys.exit(77)

K8S_VERSION = "1.37.0"
JOURNALS = "k8s-regress-journals.yaml"
SHARDS = "k8s-regress-shards.yaml"
MERGE = "k8s-regress-merge.yaml"


def schema_problems(path):
    """kubernetes-validate's complaints about every document of the file."""
    problems = []
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        try:
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{os.path.basename(path)}: {d.get('kind')}: {e.message} at {list(e.path)}")
        except Exception as e:  # an unknown kind or apiVersion
            problems.append(f"{os.path.basename(path)}: {d.get('kind')}: {e}")
    return problems, docs


def one(docs, kind, problems, where):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        problems.append(f"{where}: {len(found)} {kind} documents, expected 1")
        return {}
    return found[0]


def volume_claims(pod):
    """volume name -> claim name, for the pod's persistentVolumeClaim volumes"""
    return {v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}


def mount_claim(pod, container, path, problems, where):
    """the claim of the volume mounted where PATH lies, or None"""
    claims = volume_claims(pod)
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") + "/"
        if path.startswith(mp) and (best is None or len(mp) > len(best[0])):
            best = (mp, m)
    if best is None or best[1]["name"] not in claims:
        problems.append(f"{where}: {path} is on no persistentVolumeClaim volume")
        return None
    if best[1].get("readOnly"):
        problems.append(f"{where}: {path} is on a read-only mount")
    return claims[best[1]["name"]]


def journal_problems(journal_docs, n, inputs, conv_from, claim, pvc):
    """the journals' Job against the shards' (n shards, their inputs, --conv-from, claim)"""
    p = []
    job = one(journal_docs, "Job", p, JOURNALS)
    if not job:
        return p
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed" or spec.get("completions") != n:
        p.append(f"{JOURNALS}: not an Indexed Job of {n} completions, as the shards")
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    argv = c.get("command", []) + c.get("args", [])
    if "regress" not in argv or "--shard" not in argv or "--conv-journal" not in argv:
        return p + [f"{JOURNALS}: the container does not run regress --shard ... --conv-journal ...: {argv}"]
    if argv[argv.index("--shard") + 1] != f"auto/{n}":
        p.append(f"{JOURNALS}: --shard {argv[argv.index('--shard') + 1]}, expected auto/{n}")
    journal = argv[argv.index("--conv-journal") + 1]
    if "$(JOB_COMPLETION_INDEX)" not in journal:
        p.append(f"{JOURNALS}: --conv-journal {journal} is not named by $(JOB_COMPLETION_INDEX)")
    if conv_from is None or os.path.dirname(journal) != conv_from.rstrip("/"):
        p.append(f"{JOURNALS}: journals written to {os.path.dirname(journal)}, the shards start from {conv_from}")
    if argv[argv.index("--conv-journal") + 2:] != inputs:
        p.append(f"{JOURNALS}: other inputs than the shards'")
    jclaim = mount_claim(pod, c, journal, p, JOURNALS)
    if jclaim is not None and claim is not None and jclaim != claim:
        p.append(f"{JOURNALS}: writes the journals to claim {jclaim}, the shards read {claim}")
    if pvc and jclaim is not None and jclaim != pvc["metadata"]["name"]:
        p.append(f"{JOURNALS}: the journals' claim {jclaim} is not the claim {pvc['metadata']['name']} defined here")
    return p


def field_problems(journal_docs, shard_docs, merge_docs):
    p = []
    pvc = one(journal_docs, "PersistentVolumeClaim", p, JOURNALS)
    job = one(shard_docs, "Job", p, SHARDS)
    merge = one(merge_docs, "Job", p, MERGE)
    if not (job and merge and pvc):
        return p
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        p.append(f"{SHARDS}: completionMode is {spec.get('completionMode')!r}, not Indexed")
    n = spec.get("completions")
    if not isinstance(n, int) or n < 1:
        p.append(f"{SHARDS}: completions {n!r}")
        return p
    if not 1 <= spec.get("parallelism", 1) <= n:
        p.append(f"{SHARDS}: parallelism {spec.get('parallelism')} outside 1..{n}")
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") != "Never":
        p.append(f"{SHARDS}: restartPolicy {pod.get('restartPolicy')!r}: a retried pod must be a new pod (Never)")
    c = pod["containers"][0]
    argv = c.get("command", []) + c.get("args", [])
    if "regress" not in argv or "--shard" not in argv or "--partial" not in argv:
        p.append(f"{SHARDS}: the container does not run regress --shard ... --partial ...: {argv}")
        return p
    shard = argv[argv.index("--shard") + 1]
    if shard != f"auto/{n}":
        p.append(f"{SHARDS}: --shard {shard}, expected auto/{n} (completions {n})")
    for e in c.get("env", []):
        if e.get("name") == "JOB_COMPLETION_INDEX" and e.get("valueFrom", {}).get("fieldRef", {}).get(
                "fieldPath") != "metadata.annotations['batch.kubernetes.io/job-completion-index']":
            p.append(f"{SHARDS}: JOB_COMPLETION_INDEX declared, not from the job-completion-index annotation")
    partial = argv[argv.index("--partial") + 1]
    if "$(JOB_COMPLETION_INDEX)" not in partial:
        p.append(f"{SHARDS}: --partial {partial} is not named by $(JOB_COMPLETION_INDEX)")
    claim = mount_claim(pod, c, partial, p, SHARDS)
    if claim is not None and claim != pvc["metadata"]["name"]:
        p.append(f"{SHARDS}: the partials' claim {claim} is not the claim {pvc['metadata']['name']} defined here")
    if claim is not None and "ReadWriteMany" not in pvc["spec"].get("accessModes", []):
        p.append(f"{SHARDS}: the partials' claim is not ReadWriteMany: pods on several nodes write it")
    inputs = argv[argv.index("--partial") + 2:]
    if len(inputs) < n:
        p.append(f"{SHARDS}: {len(inputs)} inputs for {n} shards")
    conv_from = argv[argv.index("--conv-from") + 1] if "--conv-from" in argv else None
    if conv_from is None:
        p.append(f"{SHARDS}: the shards do not start from the journals (--conv-from)")
    else:
        mount_claim(pod, c, conv_from.rstrip("/") + "/journal-0.jsonl", p, SHARDS)
    p += journal_problems(journal_docs, n, inputs, conv_from, claim, pvc)

    mspec = merge["spec"]
    mpod = mspec["template"]["spec"]
    mc = mpod["containers"][0]
    mline = " ".join(mc.get("command", []) + mc.get("args", []))
    if "regress --merge" not in mline or "--baseline" not in mline:
        p.append(f"{MERGE}: the container does not run regress --merge --baseline ...: {mline}")
    if mspec.get("completionMode", "NonIndexed") != "NonIndexed" or mspec.get("completions", 1) != 1:
        p.append(f"{MERGE}: the merge must be one pod")
    folder = os.path.dirname(partial)
    if f"{folder}/partial-*.json" not in mline:
        p.append(f"{MERGE}: does not merge {folder}/partial-*.json")
    mclaim = mount_claim(mpod, mc, folder + "/partial-0.json", p, MERGE)
    if claim is not None and mclaim is not None and mclaim != claim:
        p.append(f"{MERGE}: reads the partials from claim {mclaim}, the shards write them to {claim}")
    return p


def check(folder):
    p0, journal_docs = schema_problems(os.path.join(folder, JOURNALS))
    p1, shard_docs = schema_problems(os.path.join(folder, SHARDS))
    p2, merge_docs = schema_problems(os.path.join(folder, MERGE))
    problems = p0 + p1 + p2
    try:
        problems += field_problems(journal_docs, shard_docs, merge_docs)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        problems.append(f"a field the recipe needs is missing or malformed: {e!r}")
    return problems


# (what is broken, file, text, replacement): each must make check() fail
BROKEN = [
    ("a misspelt field (schema)", SHARDS, "  parallelism: 4", "  paralelism: 4"),
    ("a field of the wrong type (schema)", MERGE, "backoffLimit: 0", "backoffLimit: none"),
    ("not Indexed", SHARDS, "completionMode: Indexed", "completionMode: NonIndexed"),
    ("N is not completions", SHARDS, "completions: 4", "completions: 5"),
    ("the partial not named by the index", SHARDS, "partial-$(JOB_COMPLETION_INDEX).json", "partial.json"),
    ("the index from another annotation", SHARDS, "annotations['batch.kubernetes.io/job-completion-index']",
     "annotations['batch.kubernetes.io/job-index']"),
    ("the merge reads another claim", MERGE, "claimName: logdiff-partials", "claimName: other"),
    ("the merge reads another folder", MERGE, "    /partials/partial-*.json", "    /data/partial-*.json"),
    ("no --merge", MERGE, "regress --merge", "regress"),
    ("the shards not from the journals", SHARDS, "            - --conv-from\n            - /partials\n", ""),
    ("the journals written elsewhere", JOURNALS, "/partials/journal-$(JOB_COMPLETION_INDEX).jsonl",
     "/tmp/journal-$(JOB_COMPLETION_INDEX).jsonl"),
    ("the journal not named by the index", JOURNALS, "journal-$(JOB_COMPLETION_INDEX).jsonl", "journal.jsonl"),
    ("the journals of other inputs", JOURNALS, "            - /logs/server-7.tar.gz\n", ""),
    ("the journals' N is not the shards'", JOURNALS, "  completions: 4", "  completions: 3"),
    ("a misspelt field in the journals' Job (schema)", JOURNALS, "backoffLimitPerIndex", "backoffLimitPerIdx"),
]


def main():
    return recipe_check.run(f"{JOURNALS}, {SHARDS} and {MERGE}: valid against Kubernetes {K8S_VERSION}, the "
                            "fields as the recipe needs", [JOURNALS, SHARDS, MERGE], check, BROKEN)


if __name__ == "__main__":
    sys.exit(main())
