#!/bin/bash
# manual perf profile of seekless via the accelerator (unix), hot 4k-popular
export PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
B=${1:-/work/main/build}; OUT=${2:-/tmp/pa/perf.data}; SECS=${3:-10}
rm -f /tmp/pa/accel.sock
taskset -c 0 $CHRT spawn-fcgi -n -s /tmp/pa/accel.sock -- $B/fcgi_stat_accel/fcgi-stat-accel --threads 16 --readahead 1048576 --root /var/tmp/seekless-bench/pool-4k-1 --sched ${SCHED:-batch} > /tmp/pa/accel.log 2>&1 &
APID=$!
sleep 0.5
if [ -n "$LIGHTTPD" ]; then taskset -c 0 lighttpd -D -f /tmp/pa/lconf > /tmp/pa/srv.log 2>&1 & else taskset -c 0 $B/app/seekless -D -f /tmp/pa/conf > /tmp/pa/srv.log 2>&1 & fi
SPID=$!
sleep 0.5
# warm
sed 's|^http://127.0.0.1:18080|/var/tmp/seekless-bench/pool-4k-1|' /tmp/pa/urls | xargs cat > /dev/null 2>&1
taskset -c 1 wrk -t1 -c100 -d3s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:18080/ -- /tmp/pa/urls > /dev/null 2>&1
cs() { for p in $SPID $(pgrep -x lighttpd) $(pgrep -f "fcgi-stat-accel --threads"); do for t in /proc/$p/task/*; do echo "$p $(basename $t) $(cat $t/comm) $(grep -E '^(voluntary|nonvoluntary)_ctxt' $t/status | awk '{print $2}' | tr '\n' ' ')"; done; done; }
cs > /tmp/pa/cs-before.txt
if [ "$OUT" = none ]; then
  taskset -c 1 wrk -t1 -c100 -d${SECS}s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:18080/ -- /tmp/pa/urls > /tmp/pa/wrk.txt 2>&1
else
  perf record -C 0 -g -o $OUT -- taskset -c 1 wrk -t1 -c100 -d${SECS}s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:18080/ -- /tmp/pa/urls > /tmp/pa/wrk.txt 2>&1
fi
cs > /tmp/pa/cs-after.txt; for t in $(pgrep -f "fcgi-stat-accel --threads"); do for x in /proc/$t/task/*; do awk "{print \$41}" $x/stat; done; done | sort | uniq -c > /tmp/pa/policy.txt
kill $SPID; kill $APID; wait
grep -E "Requests/sec|Non-2xx|Socket errors" /tmp/pa/wrk.txt
