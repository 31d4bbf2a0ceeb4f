#!/bin/bash
W=${W:-/tmp/pr}; mkdir -p $W  # work files (configs, logs, perf data); helpers are expected in $W (cp helpers/* $W/)
# cold1.sh name fetches cmd : one cold run with iostat
name=$1; n=$2; shift 2
root=/var/tmp/seekless-bench/pool-100k-1
sed "s|127.0.0.1:18080|127.0.0.1:18090|" $root/urls.100k | sed -n "30001,$((30000+n))p" > $W/urls-c1
sync; echo 3 > /proc/sys/vm/drop_caches
cmd=$(echo "$*" | sed "s|ROOT|$root|g; s|PORT|18090|g")
setsid taskset -c 0 sh -c "exec $cmd" 2>$W/$name.err & spid=$!
sleep 0.7
iostat -dxk 1 > $W/iostat-$name.txt & ip=$!
taskset -c 1 /work/main/build/bench/loadgen -keepalive -parallel 100 -sequential -fetches $n -json $W/lgc1.json $W/urls-c1 > /dev/null 2>&1
kill $ip; kill -TERM -$spid; wait $spid 2>/dev/null
python3 -c "import json;d=json.load(open('$W/lgc1.json'));print('$name', round(d['fetches_per_s']), 'req/s p99', d['fetch_ms']['p99'])"
awk '/^vd|^sd|^nvme/ && $2>100 {print}' $W/iostat-$name.txt | head -8
