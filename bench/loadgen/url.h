/* loadgen URL list: parsing, the loopback-only rule, and prebuilt requests. */
#ifndef SL_LG_URL_H
#define SL_LG_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest accepted URL line (after trimming). */
#define SL_LG_URL_MAX 8192

/* One parsed URL: http://HOST[:PORT]/path. Strings point into caller-owned storage. */
struct sl_lg_url_parts {
    char host[256];           /* host as written, brackets kept for IPv6 (Host header value part) */
    bool explicit_port;       /* the URL named a port */
    uint16_t port;            /* 80 when not named */
    char path[SL_LG_URL_MAX]; /* request-target: "/" when the URL had none, fragment removed */
    struct sockaddr_storage addr; /* the loopback address to connect to */
    socklen_t addr_len;
};

/* Parse one URL. Only the http scheme is accepted, and only hosts that are loopback without asking
 * any resolver: IPv4 literals in 127.0.0.0/8, [::1], [::ffff:127.x.y.z], and "localhost" or names
 * under ".localhost" (mapped to 127.0.0.1, RFC 6761). Any other host is refused, so loadgen can
 * never send traffic (not even a DNS query) to the network. Returns 0, or -EINVAL with a message
 * in err (errlen bytes) for a malformed URL, or -EPERM for a non-loopback host. */
int sl_lg_url_parse(const char *url, struct sl_lg_url_parts *out, char *err, size_t errlen);

/* A distinct address loadgen connects to; URLs sharing host address and port share a target. */
struct sl_lg_target {
    struct sockaddr_storage addr;
    socklen_t addr_len;
};

/* One entry of the URL list. */
struct sl_lg_url {
    char *text;    /* the URL as written, for messages */
    char *request; /* the complete GET request, ready to write */
    size_t request_len;
    unsigned target; /* index into sl_lg_urls.targets */
};

/* The whole URL list. */
struct sl_lg_urls {
    struct sl_lg_url *v;
    size_t n;
    struct sl_lg_target *targets;
    size_t ntargets;
};

/* Build the request for parts into buf (size bytes): "GET path HTTP/1.1", Host, User-Agent and
 * "Connection: keep-alive" or "Connection: close". Returns its length, or -ENOSPC. */
int sl_lg_url_request(const struct sl_lg_url_parts *parts, bool keepalive, char *buf, size_t size);

/* Load a URL file: one URL per line; blank lines and lines starting with '#' are skipped, leading
 * and trailing whitespace is ignored. Every URL is parsed and its request prebuilt (keep-alive or
 * close). Returns 0; -ENOENT-style negative errno when the file cannot be read; -EINVAL or -EPERM
 * for a bad line; -ENODATA when the file holds no URL; -ENOMEM. On failure err holds a message
 * naming the file and line, and u is left empty. */
int sl_lg_urls_load(struct sl_lg_urls *u, const char *path, bool keepalive, char *err,
                    size_t errlen);

/* Free everything sl_lg_urls_load allocated; u becomes empty. */
void sl_lg_urls_free(struct sl_lg_urls *u);

#endif
