#!/bin/sh
# The page cache's sequential limit for what a server does with cold 10 MiB files: 100 readers
# at once, each reading 10 of the pool's files one after another through the page cache
# (buffered, 512 KiB reads, as seekless's read threads and nginx's do), after drop_caches; beside
# it fio's own direct sequential row of bench/run (1 MiB, queue depth 32) for the same disk.
# usage: fio-streams.sh OUTDIR [BS]
set -e
out=$1; bs=${2:-512k}
root=/var/tmp/seekless-bench/pool-10m-1
mkdir -p "$out"
job="$out/streams-$bs.fio"
printf '[global]\nrw=read\nbs=%s\nioengine=psync\ndirect=0\nfile_service_type=sequential\n' "$bs" > "$job"
sed 's|http://127.0.0.1:18080/||' $root/urls.10m | shuf --random-source=/dev/zero | head -1000 |
    awk -v root=$root 'NR % 10 == 1 { if (NR > 1) printf "\n"; printf "[s%d]\nfilename=", int(NR / 10) }
        { gsub(":", "\\:"); printf "%s%s/%s", (NR % 10 == 1 ? "" : ":"), root, $0 }
        END { printf "\n" }' >> "$job"
sync; echo 3 > /proc/sys/vm/drop_caches
fio --output-format=json --output="$out/streams-$bs.json" "$job" > /dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=sum(x['read']['io_bytes'] for x in j['jobs']); t=max(x['read']['runtime'] for x in j['jobs'])/1000; print(f'buffered {sys.argv[2]} x100 streams: {b/t/1e6:.0f} MB/s ({b/1e9:.1f} GB in {t:.1f} s)')" "$out/streams-$bs.json" "$bs" | tee "$out/streams-$bs.txt"
fio --name=seqread --filename=/var/tmp/seekless-bench/fio-seqread.dat --size=4096M --rw=read --bs=1M --direct=1 --ioengine=libaio --iodepth=32 --runtime=10 --time_based --output-format=json --output="$out/direct.json" > /dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); r=j['jobs'][0]['read']; print(f'direct 1M qd32: {r[\"bw_bytes\"]/1e6:.0f} MB/s')" "$out/direct.json" | tee -a "$out/streams-$bs.txt"
