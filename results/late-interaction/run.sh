#!/bin/bash
# issue 56 item 2: training-free late interaction vs naive chunks vs BM25, MiniLM, under load
set -x
cd /work/wt-late56 && . /work/venv/bin/activate
export PYTHONPATH=$PWD/src
M=$HOME/.cache/longembed/models/all-MiniLM-L6-v2
T="--tasks qmsum,squality,passkey,needle --lengths 256,1024 --max-queries 80 --data-dir /work/shared/data"
O=results/late-interaction/runs
time longembed eval --model bm25 $T --output $O/bm25
time longembed eval --model $M --method truncate $T --granularity tokens --late --output $O/late-tokens
time longembed eval --model $M --method truncate $T --granularity chunks --naive --chunking tokens:256 --output $O/naive-chunks
time longembed eval --model $M --method truncate $T --granularity tokens --naive --chunking tokens:256 --output $O/naive-tokens
