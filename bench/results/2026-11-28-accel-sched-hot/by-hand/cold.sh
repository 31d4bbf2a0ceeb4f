#!/bin/bash
# cold A/B of the accelerator's scheduling policy: seekless -> accel (unix), 100 KiB pool
export PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
B=/work/main/build; R=/var/tmp/seekless-bench/pool-100k-1
sed "s#pool-4k-1#pool-100k-1#" /tmp/pa/conf > /tmp/pa/conf100
off=-15999
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for i in 1 2 3; do
 for s in normal batch; do
  off=$((off+16000))
  tail -n +$off $R/urls.100k | head -16000 > /tmp/pa/curls
  rm -f /tmp/pa/accel.sock
  sync; echo 3 > /proc/sys/vm/drop_caches
  taskset -c 0 spawn-fcgi -n -s /tmp/pa/accel.sock -- $B/fcgi_stat_accel/fcgi-stat-accel --threads 16 --readahead 1048576 --root $R --sched $s > /tmp/pa/accel.log 2>&1 &
  APID=$!; sleep 0.5
  taskset -c 0 $B/app/seekless -D -f /tmp/pa/conf100 > /tmp/pa/srv.log 2>&1 &
  SPID=$!; sleep 0.5
  a0=$(cpu $APID); s0=$(cpu $SPID)
  taskset -c 1 wrk -t1 -c100 -d6s --timeout 30s -s /work/main/bench/wrk-urls.lua http://127.0.0.1:18080/ -- /tmp/pa/curls sequential > /tmp/pa/wrk.txt 2>&1
  a1=$(cpu $APID); s1=$(cpu $SPID)
  n=$(grep -o "[0-9]* requests in" /tmp/pa/wrk.txt | cut -d' ' -f1)
  echo "$s $(grep Requests/sec /tmp/pa/wrk.txt | awk '{print $2}') req/s accel $(( (a1-a0)*10000/n )) us/req seekless $(( (s1-s0)*10000/n )) us/req non2xx $(grep -c Non-2xx /tmp/pa/wrk.txt)"
  kill $SPID $APID; wait
 done
done
