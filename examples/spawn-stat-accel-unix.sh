#!/bin/sh
# Start fcgi-stat-accel on the unix socket /tmp/seekless-stat-accel.sock (mode 0660), 4 threads.
# Its PID goes to /tmp/seekless-stat-accel-unix.pid.
cd "$(dirname "$0")/.." || exit 1
exec spawn-fcgi -s /tmp/seekless-stat-accel.sock -M 0660 -C 4 -P /tmp/seekless-stat-accel-unix.pid -- \
  "$PWD/build/fcgi_stat_accel/fcgi-stat-accel"
