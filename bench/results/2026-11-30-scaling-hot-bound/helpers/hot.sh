#!/bin/bash
# $1 = auto|disable ; hot popular set, 2 loops, loadgen unpinned 6 s
sed "s/^server.worker-cpu-affinity.*//" s2.conf > s4.conf; echo "server.worker-cpu-affinity = \"$1\"" >> s4.conf
cat $(cat popf.txt) > /dev/null
/work/main/build/app/seekless -f s4.conf -D > log4.txt 2>&1 & P=$!; sleep 0.5
/work/main/build/bench/loadgen -parallel 100 -keepalive -seconds 6 pop.txt > lg4.txt 2>&1
tot=0; for t in /proc/$P/task/*; do v=$(awk '{print $14+$15}' $t/stat); tot=$((tot+v)); done
n=$(head -1 lg4.txt | awk '{print $1}')
echo "$1 $(sed -n 3p lg4.txt | awk '{print $1}') req/s  $(echo "scale=1; $tot*10000/$n" | bc) us/req"
kill $P; wait $P 2>/dev/null
