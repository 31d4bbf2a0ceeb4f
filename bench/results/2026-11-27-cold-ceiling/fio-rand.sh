#!/bin/bash
# The disk's random-read ceiling: fio, O_DIRECT, libaio, random reads of 4 KiB and 100 KiB over
# an 8 GiB file of written data, at queue depths 1..100 (5 s each).
set -u
OUT=${1}; F=/var/tmp/seekless-bench/fio-rand.dat
for bs in 4k 100k; do
  for qd in 1 4 16 32 100; do
    fio --name=r --filename=$F --direct=1 --ioengine=libaio --rw=randread --bs=$bs --iodepth=$qd \
        --runtime=5 --time_based --output-format=json --output=$OUT/fio-rand-$bs-qd$qd.json > /dev/null 2>&1
    python3 -c "import json;j=json.load(open('$OUT/fio-rand-$bs-qd$qd.json'))['jobs'][0]['read'];print('fio randread $bs qd$qd:', round(j['iops']), 'IOPS', round(j['bw']/1024), 'MiB/s, mean latency', round(j['clat_ns']['mean']/1e6,2), 'ms')"
  done
done | tee $OUT/fio-rand-summary.txt
