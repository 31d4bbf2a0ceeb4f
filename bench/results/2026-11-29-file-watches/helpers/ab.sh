#!/bin/bash
# interleaved old/new floorprof runs: ab.sh POOL ROUNDS
export PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin:$PATH
for r in $(seq 1 $2); do
  for b in old new; do
    if [ $b = old ]; then B=/var/tmp/old/build; else B=/work/main/build; fi
    echo "== $b r$r"; BUILD=$B timeout 120 python3 bench/results/2026-11-29-file-watches-pools/helpers/floorprof.py $1 seekless 2>&1 | tail -1
  done
done
