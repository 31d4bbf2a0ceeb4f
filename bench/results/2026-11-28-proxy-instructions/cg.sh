#!/bin/bash
# User-space instructions per request of seekless's loop, counted by callgrind (deterministic,
# unlike CPU time on this shared machine): cg.sh BUILD OUT [accel|static] [N]
#   accel:  proxy-core -> fcgi-stat-accel over a unix socket, X-Sendfile (the accelerator runs
#           outside valgrind); static: the same files served directly.
# 2,000 files of the 4 KiB pool's list (bench/mkpool, /var/tmp/seekless-bench/pool-4k-1), 20
# keep-alive connections, a warm-up pass of 4,000 requests, then N (5,000) counted.
# Under valgrind cachestat() is unknown, so the hybrid backend reads the 4 KiB with preadv2
# instead (a buffer per request): both builds take that same path.
set -e
export PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
B=$1; OUT=$2; MODE=${3:-accel}; N=${4:-5000}
POOL=${POOL:-/var/tmp/seekless-bench/pool-4k-1}
T=$(mktemp -d)
cat > $T/conf <<EOC
server.document-root = "$POOL"
server.bind = "127.0.0.1"
server.port = 18080
server.errorlog = "$T/error.log"
server.max-keep-alive-requests = 1000000
EOC
if [ $MODE = accel ]; then
  cat >> $T/conf <<EOC
proxy-core.protocol = "fastcgi"
proxy-core.backends = ( "unix:$T/accel.sock" )
proxy-core.allow-x-sendfile = "enable"
proxy-core.max-pool-size = 20
EOC
  spawn-fcgi -n -s $T/accel.sock -- $B/fcgi_stat_accel/fcgi-stat-accel --threads 16 --readahead 1048576 --root $POOL > $T/accel.log 2>&1 &
  APID=$!
  sleep 0.5
fi
valgrind --tool=callgrind --callgrind-out-file=$OUT $B/app/seekless -D -f $T/conf > $T/srv.log 2>&1 &
SPID=$!
for i in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:18080/ && break; sleep 0.2; done
head -2000 $POOL/urls.4k > $T/urls
LG=$(dirname $(readlink -f $0))/../../../build/bench/loadgen
$LG -parallel 20 -keepalive -seq -fetches 4000 $T/urls > /dev/null 2>&1
callgrind_control -z $SPID > /dev/null
$LG -parallel 20 -keepalive -seq -fetches $N $T/urls > $T/lg.txt 2>&1
callgrind_control -d $SPID > /dev/null
sleep 1
kill $SPID; [ -n "$APID" ] && kill $APID; wait || true
grep -E 'code 200' $T/lg.txt
rm -rf $T
