#!/bin/bash
# $1 = auto|disable ; hot popular set, 2 loops, wrk unpinned 6 s random
sed "s/^server.worker-cpu-affinity.*//" s2.conf > s6.conf; echo "server.worker-cpu-affinity = \"$1\"" >> s6.conf
cat $(cat popf.txt) > /dev/null
/work/main/build/app/seekless -f s6.conf -D > log6.txt 2>&1 & P=$!; sleep 0.5
WRK_JSON=/tmp/st/w6.json wrk -t1 -c100 -d6s --timeout 30s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:8931 -- /tmp/st/popurls.txt random 1 > w6.txt 2>&1
tot=0; for t in /proc/$P/task/*; do v=$(awk '{print $14+$15}' $t/stat 2>/dev/null); tot=$((tot+${v:-0})); done
rq=$(grep -m1 "Requests/sec" w6.txt | awk '{print $2}'); n=$(grep -m1 "requests in" w6.txt | awk '{print $1}')
echo "$1 wrk-hot $rq req/s $(echo "scale=1; $tot*10000/$n" | bc) us/req"
kill $P; wait $P 2>/dev/null
