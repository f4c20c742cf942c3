# The seven strategies of issue 45's evaluation, sourced by evaluate.sh and evaluate_squality.sh (which set
# TRAINED, ORIG, OUT and TASKS first): `run NAME FLAGS...` is one `longembed eval` run into OUT/NAME, and
# `run_all` runs the seven then compares them against the trained late chunks (Holm over the comparison).
CHUNKS="--granularity chunks --chunking tokens:256"
TRAINED_LATE="--model $TRAINED --method pi --max-length 4096 $CHUNKS --late"
ORIGINAL_LATE="--model $ORIG --method pi --max-length 4096 $CHUNKS --late"
ORIGINAL_NAIVE="--model $ORIG --method truncate $CHUNKS --naive"
OTHERS="original-naive original-late bm25 trained-late+bm25 original-naive+bm25 original-late+bm25"

run() {  # run NAME FLAGS...
  local name=$1; shift
  # shellcheck disable=SC2086
  longembed eval "$@" $TASKS --output "$OUT/$name"
}

run_all() {  # the encoders first (the costly part), then BM25 and the fused runs (from the cache), then compare
  run trained-late        $TRAINED_LATE
  run original-naive      $ORIGINAL_NAIVE
  run original-late       $ORIGINAL_LATE
  run bm25                --model bm25
  run trained-late+bm25   $TRAINED_LATE --fuse bm25
  run original-naive+bm25 $ORIGINAL_NAIVE --fuse bm25
  run original-late+bm25  $ORIGINAL_LATE --fuse bm25
  # shellcheck disable=SC2046
  longembed compare "$OUT/trained-late" $(for n in $OTHERS; do echo "$OUT/$n"; done) --baseline "$OUT/trained-late" \
    --output "$OUT/comparison"
}
