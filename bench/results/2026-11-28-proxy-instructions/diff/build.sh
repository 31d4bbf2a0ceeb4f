#!/bin/bash
# Differential fuzzer: the head parsers of commit OLD (default 1cbc341, before the run scans)
# against the working tree's, on the same bytes, prefixes and limits (diff_fuzz.c). Needs clang.
#   (from any directory; it builds there) ./build.sh [OLD] && ./diff_fuzz -max_total_time=360 -max_len=2048 CORPUS_DIR SEEDS_DIR
set -e
OLD=${1:-1cbc341}
M=$(git -C "$(dirname "$(readlink -f "$0")")" rev-parse --show-toplevel)
D=$(mktemp -d)
git -C $M show $OLD:server/http_parse.c > $D/old_http_parse.c
git -C $M show $OLD:proxy_core/http_resp.c > $D/old_http_resp.c
CF="-O1 -g -fsanitize=fuzzer,address,undefined -I$M/server -I$M/proxy_core -I$M/io -I$M/build"
clang $CF -c $D/old_http_parse.c -o $D/old_http_parse.o
clang $CF -c $D/old_http_resp.c -o $D/old_http_resp.o
for o in $D/old_http_parse.o $D/old_http_resp.o; do
  args=""
  for s in $(nm --defined-only -g $o | awk '{print $3}' | grep '^sl_'); do args="$args --redefine-sym $s=old_$s"; done
  objcopy $args $o
done
clang $CF $(dirname $(readlink -f $0))/diff_fuzz.c $M/server/http_parse.c $M/proxy_core/http_resp.c $M/server/path.c \
  $D/old_http_parse.o $D/old_http_resp.o -o diff_fuzz
rm -rf $D
# Seeds: the two parsers' corpora behind a 4-byte prefix (byte 0: 1 request, 0 HTTP head, 2 CGI
# head; bytes 1-3: the limits).
mkdir -p seeds
for f in $M/tests/fuzz/corpus/http_request/*; do b=$(basename $f)
  (printf '\x01\x00\x00\x00'; cat $f) > seeds/r-$b; (printf '\x01\x05\x40\x05'; cat $f) > seeds/rl-$b; done
for f in $M/tests/fuzz/corpus/http_resp/*; do b=$(basename $f)
  (printf '\x00\x00\x00\x10'; cat $f) > seeds/h-$b; (printf '\x02\x00\x00\x10'; cat $f) > seeds/c-$b
  (printf '\x00\x31\x00\x03'; cat $f) > seeds/hl-$b; done
