#!/bin/bash
# per run: us/req and the inotify-related kernel entries (sysdiff of a run with itself: us/req under each entry)
for f in "$@"; do
  grep -E "^== |^seekless" $f | while read -r l; do
    case "$l" in "== "*) lab=${l#== };; *)
      d=$(echo "$l" | grep -o "/var/tmp/floorprof-seekless-[^ ]*"); u=$(echo "$l" | grep -o "cpu [0-9.]*" | cut -d' ' -f2); pool=$(echo "$l" | cut -d' ' -f2); rs=$(echo "$l" | cut -d' ' -f3)
      x=$(python3 bench/results/2026-11-29-floor/helpers/sysdiff.py $d $u $d $u 2>/dev/null | awk '$1=="__fsnotify_parent"{p=$2} $1=="__x64_sys_inotify_add_watch"{a=$2} $1=="__x64_sys_inotify_rm_watch"{r=$2} END{printf "%s | %s | %s", p?p:"0.00", a?a:"0.00", r?r:"0.00"}')
      echo "| $pool | $lab | $rs | $u | $x |";;
    esac
  done
done
