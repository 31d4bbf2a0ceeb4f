#!/bin/sh
W=${W:-/tmp/pr}
# sl2.sh ROOT PORT BUILD EXTRA-KEYS-FILE
B=${3:-/work/main/build}
sed "s|ROOT|$1|; s|PORT|$2|" $W/seekless.tmpl > $W/sl2-$2.conf; [ -n "$4" ] && cat "$4" >> $W/sl2-$2.conf; exec $B/app/seekless -D -f $W/sl2-$2.conf
