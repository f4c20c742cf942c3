#!/bin/bash
# QMSum passages (BM25 weak there): naive tokens vs passages embedded alone vs BM25, seeded sample of 150 queries
set -x
cd /work/wt-late56 && . /work/venv/bin/activate
export PYTHONPATH=$PWD/src
M=$HOME/.cache/longembed/models/all-MiniLM-L6-v2
T="--tasks qmsum_passages --max-queries 150 --data-dir /work/shared/data"
O=results/late-interaction/runs
time longembed eval --model bm25 $T --output $O/passages-bm25
time longembed eval --model $M --method truncate $T --granularity tokens --naive --output $O/passages-naive-tokens
time longembed eval --model $M --method truncate $T --output $O/passages-document
