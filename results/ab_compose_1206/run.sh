#!/bin/bash
# usage: bash run.sh TAG ROUNDS side...  (run from this directory; each side is a tree /tmp/comp/<side>,
# the sides alternate each round)
#   TAG c*: python manage.py bench --core --n 5000 --workers 2 --concurrency 16  -> <side>_<tag><round>.json
#   TAG e*: python effect_serial.py (the serial gated effect, see that file)     -> <side>_<tag><round>.json
#   TAG q*: the same as e*, on a quiet machine (after the lead's CI run)           -> <side>_<tag><round>.json
# Each run has its own data directory /tmp/comp/<side>.data, whose cluster is stopped after the run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tag=$1; rounds=$2; shift 2
for i in $(seq 1 "$rounds"); do for side in "$@"; do
  tree=/tmp/comp/$side
  (
    cd "$tree" || exit 1
    export ILR_DATA_DIR=/tmp/comp/$side.data
    case $tag in
      c*) timeout 900 python manage.py bench --core --n 5000 --workers 2 --concurrency 16 > "/tmp/comp/${side}_${tag}$i.log" 2>&1
          cp results/runtime_bench_core.json "$here/${side}_${tag}$i.json" ;;
      e*|q*) timeout 900 python "$here/effect_serial.py" "$here/${side}_${tag}$i.json" > "/tmp/comp/${side}_${tag}$i.log" 2>&1 ;;
    esac
    python manage.py ilr_db stop > /dev/null 2>&1
  )
done; done
