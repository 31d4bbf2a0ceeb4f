#!/bin/sh
# Start fcgi-stat-accel on 127.0.0.1:1029 with 4 worker threads, as in the article
# (spawn-fcgi -p 1029 -C ...). Its PID goes to /tmp/seekless-stat-accel-tcp.pid.
#   examples/spawn-stat-accel-tcp.sh        (from the repository root, after building)
cd "$(dirname "$0")/.." || exit 1
exec spawn-fcgi -a 127.0.0.1 -p 1029 -C 4 -P /tmp/seekless-stat-accel-tcp.pid -- \
  "$PWD/build/fcgi_stat_accel/fcgi-stat-accel"
