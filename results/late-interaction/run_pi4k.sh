#!/bin/bash
# late interaction with each token seeing its context up to Lt = 4096 (PI), QMSum sample and passkey/needle 1k
set -x
cd /work/wt-late56 && . /work/venv/bin/activate
export PYTHONPATH=$PWD/src
M=$HOME/.cache/longembed/models/all-MiniLM-L6-v2
time longembed eval --model $M --method pi --max-length 4096 --tasks qmsum,passkey,needle --lengths 1024 \
    --max-queries 80 --data-dir /work/shared/data --granularity tokens --late --output results/late-interaction/runs/late-tokens-pi4k
