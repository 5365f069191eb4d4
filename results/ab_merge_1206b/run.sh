#!/bin/bash
# usage: run.sh TAG ROUNDS tree...  (alternating; each run: bench --core --n 5000 --workers 2 --concurrency 16)
tag=$1; rounds=$2; shift 2
for i in $(seq 1 $rounds); do for side in "$@"; do
  (cd /tmp/ab/$side && ILR_DATA_DIR=/tmp/ab/$side.data timeout 900 python manage.py bench --core --n 5000 --workers 2 --concurrency 16 > /tmp/ab/${side}_${tag}$i.log 2>&1; cp results/runtime_bench_core.json /tmp/ab/${side}_${tag}$i.json; ILR_DATA_DIR=/tmp/ab/$side.data python manage.py ilr_db stop >/dev/null 2>&1)
done; done
python - "$tag" "$rounds" "$@" <<'PY'
import json,statistics as st,sys
tag,rounds,sides=sys.argv[1],int(sys.argv[2]),sys.argv[3:]
for side in sides:
    xs=[json.load(open(f"/tmp/ab/{side}_{tag}{i}.json")) for i in range(1,rounds+1)]
    print(side,[x["workflows_per_s"] for x in xs],"median",st.median(x["workflows_per_s"] for x in xs),"commits",st.median(x["commits_per_workflow"] for x in xs))
PY
