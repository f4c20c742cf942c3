#!/usr/bin/env bash
# Issue 45 item 2: the trained late chunks (benchmarks/contextual/train_main.sh) against the original model's
# late chunks, its naive chunks, BM25 and the fused strategies, on QMSum passages, SQuALITY, HotpotQA,
# passkey and needle at 1k-4k (--candidates blocks) and the essays task (110 questions of our own writing);
# compared query by query against the trained late chunks, with Holm over the whole set.  Run ALONE (timings
# are recorded in each run); every run goes through the embedding cache, so a rerun resumes.
#
#   bash benchmarks/contextual/evaluate.sh [TRAINED] [OUT]   # defaults runs/contextual/minilm-pi4096, runs/contextual/eval
#   MAX_QUERIES=0 bash benchmarks/contextual/evaluate.sh ...  # every query of every task (about 5x the cost)
#
# Scale, and why: one late-chunked MiniLM pass over every task here is 7.5M tokens, about two hours on the
# 2-core CPU, and three encoders are compared.  --max-queries 110 (seed 0) keeps a seeded sample of at most 110
# queries per task and length, drawn in whole groups with the documents they rank (longembed.tasks.subsample):
# 15 QMSum meetings with their 110 passage queries (each query ranks exactly the passages it ranks in the full
# task), 27 SQuALITY stories with their 108 questions, 110 HotpotQA documents with their questions; passkey
# and needle (50 queries a length) and the essays (110) are whole.  2.8M tokens per encoder.
#
# Every strategy is one `longembed eval` run over all the tasks, so `longembed compare` pairs them query by
# query on every task and length and adjusts all its tests together.  Chunks: tokens:256 for every chunk
# strategy (the trained model saw paragraphs of about 150 tokens: SQuAD paragraphs and HotpotQA passages).
# Order: the three encoders first (the costly part; the trained one first), then BM25 and the fused runs,
# which read the encoders' vectors from the cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAINED=${1:-runs/contextual/minilm-pi4096}
OUT=${2:-runs/contextual/eval}
ORIG=${LONGEMBED_MODELS_DIR:-/work/models}/all-MiniLM-L6-v2
DATA=${LONGEMBED_DATA_DIR:-../shared/data}
MAX_QUERIES=${MAX_QUERIES:-110}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
python benchmarks/essays/build_task.py --data "$DATA/paul_graham_essays" --out results/essays/task --overwrite
SAMPLE=$([ "$MAX_QUERIES" = 0 ] || echo "--max-queries $MAX_QUERIES --sample-seed 0")
TASKS="--tasks qmsum_passages squality hotpotqa passkey needle --lengths 1k 2k 4k --candidates blocks
       --task-dir results/essays/task --task-name essays --data-dir $DATA $SAMPLE"
# shellcheck source=benchmarks/contextual/strategies.sh
source benchmarks/contextual/strategies.sh
run_all

# the training's effect on the fused strategy, alone
longembed compare "$OUT/original-late+bm25" "$OUT/trained-late+bm25" --output "$OUT/comparison-fused"
# SQuALITY on its whole corpus (the sample above keeps 27 of 127 stories, where every strategy scores ~100),
# then the table of RESULTS.md (its p-values Holm-adjusted over every test shown)
bash benchmarks/contextual/evaluate_squality.sh "$TRAINED" "$OUT"
python benchmarks/contextual/summarize.py "$OUT" --out results/contextual/summary.md
