#!/usr/bin/env bash
# Issue 45, SQuALITY on its whole corpus: the second stage of benchmarks/contextual/evaluate.sh.
#
#   bash benchmarks/contextual/evaluate_squality.sh [TRAINED] [OUT]   # defaults as evaluate.sh's
#
# Why a stage of its own: evaluate.sh's --max-queries 110 keeps 27 of SQuALITY's 127 stories (a plain corpus
# is sampled by document: 4 questions a story), and among 27 candidates every strategy finds the story
# (trained late chunks: 100.0 [100.0, 100.0]); the sample measured nothing there.  Here the same seven
# strategies score all 508 questions over all 127 stories (the 27 already encoded come from the cache), and
# `longembed compare` pairs them against the trained late chunks.  benchmarks/contextual/summarize.py
# replaces the sampled SQuALITY by this one and adjusts the p-values of both comparisons together (Holm).
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAINED=${1:-runs/contextual/minilm-pi4096}
OUT=${2:-runs/contextual/eval}/squality-full
ORIG=${LONGEMBED_MODELS_DIR:-/work/models}/all-MiniLM-L6-v2
DATA=${LONGEMBED_DATA_DIR:-../shared/data}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
TASKS="--tasks squality --data-dir $DATA"
CHUNKS="--granularity chunks --chunking tokens:256"
TRAINED_LATE="--model $TRAINED --method pi --max-length 4096 $CHUNKS --late"
ORIGINAL_LATE="--model $ORIG --method pi --max-length 4096 $CHUNKS --late"
ORIGINAL_NAIVE="--model $ORIG --method truncate $CHUNKS --naive"

run() {  # run NAME FLAGS...
  local name=$1; shift
  # shellcheck disable=SC2086
  longembed eval "$@" $TASKS --output "$OUT/$name"
}
run trained-late        $TRAINED_LATE
run original-naive      $ORIGINAL_NAIVE
run original-late       $ORIGINAL_LATE
run bm25                --model bm25
run trained-late+bm25   $TRAINED_LATE --fuse bm25
run original-naive+bm25 $ORIGINAL_NAIVE --fuse bm25
run original-late+bm25  $ORIGINAL_LATE --fuse bm25

others="original-naive original-late bm25 trained-late+bm25 original-naive+bm25 original-late+bm25"
# shellcheck disable=SC2046
longembed compare "$OUT/trained-late" $(for n in $others; do echo "$OUT/$n"; done) --baseline "$OUT/trained-late" \
  --output "$OUT/comparison"
