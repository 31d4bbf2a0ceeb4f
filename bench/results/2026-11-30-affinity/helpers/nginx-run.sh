sync; echo 3 > /proc/sys/vm/drop_caches
nginx -c /tmp/ng/$1.conf & P=$!; sleep 0.7
/work/main/build/bench/loadgen -parallel 100 -keepalive -sequential -fetches 150000 u.txt > lg.txt 2>&1
echo "nginx $1 $(sed -n 3p lg.txt | awk '{print $1}') req/s"
kill $P; wait $P 2>/dev/null; sleep 0.5
