#!/bin/bash
export W=/tmp/pr PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin
cd /tmp/pr
python3 cold.py 100k 20000 5 "nginx-aio=/tmp/pr/ngaio.sh ROOT PORT" "sl4=/tmp/pr/sl.sh ROOT PORT" "sl16=/tmp/pr/sl2.sh ROOT PORT /work/main/build /tmp/pr/st16.keys" "sl32=/tmp/pr/sl2.sh ROOT PORT /work/main/build /tmp/pr/st32.keys" > /tmp/pr/cold1.txt 2>&1
echo done >> /tmp/pr/cold1.txt
