#!/bin/bash
export W=/tmp/pr PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
cd /tmp/pr
python3 cold.py 4k 30000 5 "nginx-aio=/tmp/pr/ngaio.sh ROOT PORT" "sl4=/tmp/pr/sl.sh ROOT PORT" "sl8=/tmp/pr/sl2.sh ROOT PORT /work/main/build /tmp/pr/st8.keys" "sl16=/tmp/pr/sl2.sh ROOT PORT /work/main/build /tmp/pr/st16.keys" > /tmp/pr/cold4k.txt 2>&1
echo done >> /tmp/pr/cold4k.txt
