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
# shellcheck source=benchmarks/contextual/strategies.sh
source benchmarks/contextual/strategies.sh
run_all
