#!/bin/bash
# $1 = auto|disable ; cold 4k, 2 loops, wrk unpinned 5 s sequential
sed "s/^server.worker-cpu-affinity.*//" s2.conf > s5.conf; echo "server.worker-cpu-affinity = \"$1\"" >> s5.conf
sync; echo 3 > /proc/sys/vm/drop_caches
/work/main/build/app/seekless -f s5.conf -D > log5.txt 2>&1 & P=$!; sleep 0.5
WRK_JSON=/tmp/st/w.json wrk -t1 -c100 -d5s --timeout 30s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:8931 -- /var/tmp/seekless-bench/pool-4k-1/urls.4k sequential 1 > w.txt 2>&1
tot=0; for t in /proc/$P/task/*; do v=$(awk '{print $14+$15}' $t/stat); tot=$((tot+v)); done
rq=$(grep -m1 "Requests/sec" w.txt | awk '{print $2}'); n=$(grep -m1 "requests in" w.txt | awk '{print $1}')
echo "$1 wrk $rq req/s $(echo "scale=1; $tot*10000/$n" | bc) us/req"
kill $P; wait $P 2>/dev/null
