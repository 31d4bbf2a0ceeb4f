#!/bin/bash
export W=/tmp/pr PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
cd /tmp/pr
for pool in 100k:20000 4k:30000; do
python3 cold.py ${pool%%:*} ${pool##*:} 7 "nginx-aio=/tmp/pr/ngaio.sh ROOT PORT" "sl4=/tmp/pr/sl.sh ROOT PORT" "sl16=/tmp/pr/sl2.sh ROOT PORT /work/main/build /tmp/pr/st16.keys" > /tmp/pr/coldab-${pool%%:*}.txt 2>&1
done
echo done >> /tmp/pr/coldab-4k.txt
