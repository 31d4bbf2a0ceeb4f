#!/bin/bash
# $1 = pin|free ; cold 4k, 2 loops, loadgen unpinned, 150000 distinct files
sync; echo 3 > /proc/sys/vm/drop_caches
/work/main/build/app/seekless -f s2.conf -D > log2.txt 2>&1 & P=$!; sleep 0.5
if [ "$1" = pin ]; then
  for t in /proc/$P/task/*; do n=$(cat $t/comm); case $n in sl-loop-0) taskset -p -c 0 $(basename $t) >/dev/null;; sl-loop-1) taskset -p -c 1 $(basename $t) >/dev/null;; esac; done
fi
/work/main/build/bench/loadgen -parallel 100 -keepalive -sequential -fetches 150000 -json lg.json u2.txt > lg2.txt 2>&1
tot=0; for t in /proc/$P/task/*; do v=$(awk '{print $14+$15}' $t/stat); tot=$((tot+v)); done
echo "$1 $(sed -n 3p lg2.txt | awk '{print $1}') req/s  $(echo "scale=1; $tot*10000/150000" | bc) us/req"
kill $P; wait $P 2>/dev/null
