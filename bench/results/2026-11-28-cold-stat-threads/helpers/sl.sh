#!/bin/sh
W=${W:-/tmp/pr}
B=${3:-/work/main/build}
sed "s|ROOT|$1|; s|PORT|$2|" $W/seekless.tmpl > $W/sl-$2.conf; exec $B/app/seekless -D -f $W/sl-$2.conf
