#!/bin/sh
W=${W:-/tmp/pr}
sed "s|ROOT|$1|; s|PORT|$2|; s|tcp_nopush on;|tcp_nopush on; aio threads;|" $W/nginx.tmpl > $W/nga-$2.conf; exec nginx -c $W/nga-$2.conf
