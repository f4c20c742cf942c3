#!/usr/bin/env bash
# Overlapping chunks against non-overlapping ones (issue 54, item 4): `longembed eval` with the packaged
# MiniLM over naive and late chunks of 256 tokens, without overlap and with 32 tokens shared between
# neighbours (tokens:256:32), on QMSum, SQuALITY, HotpotQA and the essays task; one results folder per run
# under $OUT, then the nDCG@10 of each in a table (benchmarks/RESULTS.md, "Overlapping chunks").
#
#   bash benchmarks/overlap_chunks.sh                  # the full tasks (run it alone: hours on 2 cores)
#   MAX_QUERIES=20 bash benchmarks/overlap_chunks.sh   # small, to check that it runs
#
# DATA: the shared data (default ../shared/data beside the repository); OUT: where the runs go.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${DATA:-$REPO/../shared/data}"
OUT="${OUT:-$REPO/results/overlap_chunks}"
MAX_QUERIES="${MAX_QUERIES:-}"
CHUNKINGS="${CHUNKINGS:-tokens:256 tokens:256:32}"
KINDS="${KINDS:---naive --late}"
limit=()
[ -n "$MAX_QUERIES" ] && limit=(--max-queries "$MAX_QUERIES")

python "$REPO/benchmarks/essays/build_task.py" --data "$DATA/paul_graham_essays" --out "$OUT/essays-task" >/dev/null

for kind in $KINDS; do
  for chunking in $CHUNKINGS; do
    name="${kind#--}-${chunking//:/-}"
    longembed eval --model default --data-dir "$DATA" --tasks qmsum squality hotpotqa \
      --granularity chunks --chunking "$chunking" "$kind" "${limit[@]}" \
      --output "$OUT/$name/tasks" --no-estimate
    longembed eval --model default --task-dir "$OUT/essays-task" --task-name essays \
      --granularity chunks --chunking "$chunking" "$kind" "${limit[@]}" \
      --output "$OUT/$name/essays" --no-estimate
  done
done

python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = {}
for results in sorted(out.glob("*/*/results.json")):
    run = json.loads(results.read_text())
    for task, entry in (run.get("tasks") or {}).items():
        interval, counts = entry.get("interval") or {}, entry.get("counts") or {}
        cell = f"{entry['score']:.2f} [{interval.get('low', 0):.1f}, {interval.get('high', 0):.1f}]"
        rows.setdefault(f"{task} ({counts.get('queries')} q, {counts.get('documents')} docs)", {})[
            results.parent.parent.name] = cell
names = sorted({n for r in rows.values() for n in r})
print("| task | " + " | ".join(names) + " |")
print("|---|" + "---:|" * len(names))
for task, r in rows.items():
    print(f"| {task} | " + " | ".join(r.get(n, "") for n in names) + " |")
PY
