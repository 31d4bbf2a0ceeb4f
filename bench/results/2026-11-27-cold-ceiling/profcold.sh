#!/bin/bash
W=${W:-/tmp/pr}; mkdir -p $W  # work files (configs, logs, perf data); helpers are expected in $W (cp helpers/* $W/)
# profcold.sh name pool fetches cmd
name=$1; pool=$2; n=$3; shift 3
root=/var/tmp/seekless-bench/pool-$pool-1
sed "s|127.0.0.1:18080|127.0.0.1:18090|" $root/urls.$pool | sed -n "50001,$((50000+n))p" > $W/urls-pc
sync; echo 3 > /proc/sys/vm/drop_caches
cmd=$(echo "$*" | sed "s|ROOT|$root|g; s|PORT|18090|g")
setsid taskset -c 0 sh -c "exec $cmd" 2>$W/$name.err & spid=$!
sleep 0.7
perf record -F 2999 -g -C 0 -o $W/perf-$name.data -- sleep 2.5 > /dev/null 2>&1 &
pp=$!
taskset -c 1 /work/main/build/bench/loadgen -keepalive -parallel 100 -sequential -fetches $n -json $W/lgpc.json $W/urls-pc > /dev/null 2>&1
wait $pp; kill -TERM -$spid; wait $spid 2>/dev/null
rps=$(python3 -c "import json;print(json.load(open('$W/lgpc.json'))['fetches_per_s'])")
echo "$name rps=$rps"
perf report -i $W/perf-$name.data --children --sort sym --stdio -g none 2>/dev/null | grep -E "^ +[0-9].*(__x64_sys_|do_softirq.part|entry_SYSCALL_64_after|asm_common_interrupt|asm_sysvec|worker_thread|ret_from_fork|schedule$|__schedule)" | awk -v r=$rps '{printf "%8.2f us  %s\n", $1*1e6/r/100, $NF}' | head -24
perf report -i $W/perf-$name.data --no-children --sort comm,dso --stdio 2>/dev/null | grep -E "^ +[0-9]" | awk -v r=$rps '{printf "%8.2f us  %s %s\n", $1*1e6/r/100, $2, $3}' | head -12
