#!/usr/bin/env bash
# Issue 45 item 2: the trained late chunks (benchmarks/contextual/train_main.sh) against the original model's
# late chunks, its naive chunks, BM25 and the fused strategies, on QMSum passages, SQuALITY, HotpotQA,
# passkey and needle at 1k-4k (--candidates blocks) and the essays task; compared query by query with Holm
# over the whole set; plus the short-text check on the held-out SQuAD articles.  Run ALONE (timings are
# recorded in each run); every run goes through the embedding cache, so a rerun resumes.
#
#   bash benchmarks/contextual/evaluate.sh [TRAINED] [OUT]   # defaults runs/contextual/minilm-pi4096, runs/contextual/eval
#
# Every strategy is one `longembed eval` run over the same tasks, so `longembed compare` pairs them query by
# query on every task and length (Holm-adjusted over all its tests).  The essays task is its own run per
# strategy (a task folder), compared the same way.  Chunks: tokens:256 for every chunk strategy (the
# trained model saw paragraphs of about 150 tokens: SQuAD paragraphs and HotpotQA passages).
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAINED=${1:-runs/contextual/minilm-pi4096}
OUT=${2:-runs/contextual/eval}
ORIG=${LONGEMBED_MODELS_DIR:-/work/models}/all-MiniLM-L6-v2
DATA=${LONGEMBED_DATA_DIR:-../shared/data}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
CHUNKS="--granularity chunks --chunking tokens:256"
TASKS="--tasks qmsum_passages squality hotpotqa passkey needle --lengths 1k 2k 4k --candidates blocks --data-dir $DATA"
[ -d results/essays/task ] || python benchmarks/essays/build_task.py --data "$DATA/paul_graham_essays" --out results/essays/task
ESSAYS="--task-dir results/essays/task --task-name essays"

run() {  # run NAME FLAGS...: the benchmark tasks, then the essays
  local name=$1; shift
  longembed eval "$@" $TASKS --output "$OUT/$name"
  longembed eval "$@" $ESSAYS --output "$OUT/essays/$name"
}
run trained-late        --model "$TRAINED" --method pi --max-length 4096 $CHUNKS --late
run trained-late+bm25   --model "$TRAINED" --method pi --max-length 4096 $CHUNKS --late --fuse bm25
run original-late       --model "$ORIG" --method pi --max-length 4096 $CHUNKS --late
run original-late+bm25  --model "$ORIG" --method pi --max-length 4096 $CHUNKS --late --fuse bm25
run original-naive      --model "$ORIG" --method truncate $CHUNKS --naive
run original-naive+bm25 --model "$ORIG" --method truncate $CHUNKS --naive --fuse bm25
run bm25                --model bm25

names="trained-late trained-late+bm25 original-late original-late+bm25 original-naive original-naive+bm25 bm25"
longembed compare $(for n in $names; do echo "$OUT/$n"; done) --output "$OUT/comparison"
longembed compare $(for n in $names; do echo "$OUT/essays/$n"; done) --output "$OUT/essays/comparison"
# the question of the issue, alone (one test per task and length, Holm over them): trained late vs original naive
longembed compare "$OUT/original-naive" "$OUT/trained-late" --output "$OUT/comparison-trained-vs-naive"

# short text: question -> paragraph nDCG@10 on the held-out SQuAD articles (the record's data.held_out_titles),
# trained (short inputs on the original positions: PI acts only above 512 tokens) vs original: within 1 point?
python - "$TRAINED" "$ORIG" "$DATA" "$OUT/short_text.json" <<'PY'
import json, sys
from pathlib import Path
from longembed.training.retrofit.fidelity import short_text_fidelity
trained, original, data, out = sys.argv[1:]
titles = json.loads((Path(trained) / "longembed_contextual.json").read_text())["data"]["held_out_titles"]
result = short_text_fidelity(trained, original, data, titles, student_method=None)
Path(out).write_text(json.dumps(result, indent=2) + "\n")
print(json.dumps(result, indent=2))
PY
