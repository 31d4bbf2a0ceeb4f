/* loadgen URL list.
 *
 * Every URL is parsed once at startup and turned into the exact bytes of its GET request, so a
 * fetch costs one write(2) of a prebuilt buffer and no formatting. Host names are never looked up:
 * the only names accepted are "localhost" and names under ".localhost", which RFC 6761 reserves for
 * loopback and which we map to 127.0.0.1 ourselves. Everything else must be a loopback address
 * literal. That makes the loopback-only rule airtight (a resolver might consult DNS, i.e. the
 * network, or map a name to a routable address) and makes "resolve once" trivial. URLs that share
 * an address and port share a target, which is what keep-alive reuse is keyed on.
 */
#include "url.h"

#include "sl_version.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static bool name_is_localhost(const char *h, size_t n)
{
    if (n && h[n - 1] == '.') n--; /* fully qualified form "localhost." */
    if (n == 9 && strncasecmp(h, "localhost", 9) == 0) return true;
    return n > 10 && strncasecmp(h + n - 10, ".localhost", 10) == 0;
}

static int resolve_loopback(struct sl_lg_url_parts *out, char *err, size_t errlen)
{
    const char *h = out->host;
    size_t n = strlen(h);
    if (h[0] == '[') {
        char inner[INET6_ADDRSTRLEN + 1];
        if (n < 3 || h[n - 1] != ']' || n - 2 >= sizeof inner)
            return fail(err, errlen, -EINVAL, "bad IPv6 host '%s'", h);
        memcpy(inner, h + 1, n - 2);
        inner[n - 2] = '\0';
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&out->addr;
        if (inet_pton(AF_INET6, inner, &a6->sin6_addr) != 1)
            return fail(err, errlen, -EINVAL, "bad IPv6 host '%s'", h);
        const uint8_t *b = a6->sin6_addr.s6_addr;
        bool loop = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr) ||
                    (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) && b[12] == 127);
        if (!loop)
            return fail(err, errlen, -EPERM,
                        "refusing non-loopback host %s (loadgen only talks to 127.0.0.0/8, [::1], "
                        "localhost)",
                        h);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(out->port);
        out->addr_len = sizeof *a6;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)&out->addr;
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127)
            return fail(err, errlen, -EPERM,
                        "refusing non-loopback host %s (loadgen only talks to 127.0.0.0/8, [::1], "
                        "localhost)",
                        h);
    } else {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)h[i];
            if (!isalnum(c) && c != '-' && c != '.' && c != '_')
                return fail(err, errlen, -EINVAL, "bad host name '%s'", h);
        }
        if (!name_is_localhost(h, n))
            return fail(err, errlen, -EPERM,
                        "refusing host '%s': not a loopback address and not localhost (loadgen "
                        "never resolves names, so it cannot reach the network)",
                        h);
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    a4->sin_family = AF_INET;
    a4->sin_port = htons(out->port);
    out->addr_len = sizeof *a4;
    return 0;
}

int sl_lg_url_parse(const char *url, struct sl_lg_url_parts *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (strlen(url) >= SL_LG_URL_MAX) return fail(err, errlen, -EINVAL, "URL too long");
    if (strncasecmp(url, "https://", 8) == 0)
        return fail(err, errlen, -EINVAL, "%s: https is not supported (plain http only)", url);
    if (strncasecmp(url, "http://", 7) != 0)
        return fail(err, errlen, -EINVAL, "%s: not an http:// URL", url);

    const char *p = url + 7;
    const char *auth_end = p + strcspn(p, "/?#");
    if (memchr(p, '@', (size_t)(auth_end - p)))
        return fail(err, errlen, -EINVAL, "%s: user info in URLs is not supported", url);

    const char *host_end, *port_s = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(auth_end - p));
        if (!rb) return fail(err, errlen, -EINVAL, "%s: unterminated [IPv6] host", url);
        host_end = rb + 1;
        if (host_end < auth_end) {
            if (*host_end != ':') return fail(err, errlen, -EINVAL, "%s: junk after ]", url);
            port_s = host_end + 1;
        }
    } else {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        host_end = colon ? colon : auth_end;
        if (colon) port_s = colon + 1;
    }
    size_t host_len = (size_t)(host_end - p);
    if (host_len == 0) return fail(err, errlen, -EINVAL, "%s: empty host", url);
    if (host_len >= sizeof out->host) return fail(err, errlen, -EINVAL, "%s: host too long", url);
    memcpy(out->host, p, host_len);
    out->host[host_len] = '\0';

    out->port = 80;
    if (port_s) {
        size_t plen = (size_t)(auth_end - port_s);
        unsigned long port = 0;
        if (plen == 0 || plen > 5) return fail(err, errlen, -EINVAL, "%s: bad port", url);
        for (size_t i = 0; i < plen; i++) {
            if (port_s[i] < '0' || port_s[i] > '9')
                return fail(err, errlen, -EINVAL, "%s: bad port", url);
            port = port * 10 + (unsigned long)(port_s[i] - '0');
        }
        if (port == 0 || port > 65535) return fail(err, errlen, -EINVAL, "%s: bad port", url);
        out->port = (uint16_t)port;
        out->explicit_port = true;
    }

    /* The request-target: everything up to a fragment, which never goes on the wire. */
    const char *path = auth_end;
    size_t path_len = strcspn(path, "#");
    size_t o = 0;
    if (path[0] != '/') out->path[o++] = '/';
    for (size_t i = 0; i < path_len; i++) {
        unsigned char c = (unsigned char)path[i];
        /* Raw spaces, controls or non-ASCII bytes would corrupt or smuggle inside the request
         * line; URLs must arrive percent-encoded. */
        if (c <= 0x20 || c >= 0x7f)
            return fail(err, errlen, -EINVAL,
                        "%s: path contains a space, control or non-ASCII byte (percent-encode it)",
                        url);
        out->path[o++] = (char)c;
    }
    out->path[o] = '\0';
    return resolve_loopback(out, err, errlen);
}

int sl_lg_url_request(const struct sl_lg_url_parts *parts, bool keepalive, char *buf, size_t size)
{
    char port[8] = "";
    if (parts->explicit_port) snprintf(port, sizeof port, ":%u", (unsigned)parts->port);
    int n =
        snprintf(buf, size,
                 "GET %s HTTP/1.1\r\nHost: %s%s\r\nUser-Agent: seekless-loadgen/%s\r\n"
                 "Connection: %s\r\n\r\n",
                 parts->path, parts->host, port, SL_VERSION, keepalive ? "keep-alive" : "close");
    if (n < 0 || (size_t)n >= size) return -ENOSPC;
    return n;
}

static int add_target(struct sl_lg_urls *u, const struct sl_lg_url_parts *parts, unsigned *idx)
{
    for (size_t i = 0; i < u->ntargets; i++) {
        if (u->targets[i].addr_len == parts->addr_len &&
            memcmp(&u->targets[i].addr, &parts->addr, parts->addr_len) == 0) {
            *idx = (unsigned)i;
            return 0;
        }
    }
    struct sl_lg_target *t = realloc(u->targets, (u->ntargets + 1) * sizeof *t);
    if (!t) return -ENOMEM;
    u->targets = t;
    memset(&t[u->ntargets], 0, sizeof t[0]);
    memcpy(&t[u->ntargets].addr, &parts->addr, parts->addr_len);
    t[u->ntargets].addr_len = parts->addr_len;
    *idx = (unsigned)u->ntargets++;
    return 0;
}

void sl_lg_urls_free(struct sl_lg_urls *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->v[i].text);
        free(u->v[i].request);
    }
    free(u->v);
    free(u->targets);
    memset(u, 0, sizeof *u);
}

int sl_lg_urls_load(struct sl_lg_urls *u, const char *path, bool keepalive, char *err,
                    size_t errlen)
{
    memset(u, 0, sizeof *u);
    FILE *f = fopen(path, "re");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        return rc;
    }
    struct sl_lg_url_parts *parts = malloc(sizeof *parts);
    size_t req_size = SL_LG_URL_MAX + 512;
    char *req = malloc(req_size);
    char *line = NULL;
    size_t cap = 0, lineno = 0, vcap = 0;
    ssize_t len;
    int rc = 0;
    if (!parts || !req) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) {
            rc = -EINVAL;
            snprintf(err, errlen, "%s:%zu: NUL byte in line", path, lineno);
            goto out;
        }
        char *s = line, *e = line + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        *e = '\0';
        if (s == e || *s == '#') continue;
        char msg[SL_LG_URL_MAX + 256];
        rc = sl_lg_url_parse(s, parts, msg, sizeof msg);
        if (rc < 0) {
            snprintf(err, errlen, "%s:%zu: %s", path, lineno, msg);
            goto out;
        }
        if (u->n == vcap) {
            size_t ncap = vcap ? vcap * 2 : 1024;
            struct sl_lg_url *nv = realloc(u->v, ncap * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            u->v = nv;
            vcap = ncap;
        }
        struct sl_lg_url *url = &u->v[u->n];
        int rlen = sl_lg_url_request(parts, keepalive, req, req_size);
        if (rlen < 0) {
            rc = -EINVAL;
            snprintf(err, errlen, "%s:%zu: URL too long", path, lineno);
            goto out;
        }
        url->text = strdup(s);
        url->request = malloc((size_t)rlen + 1);
        if (!url->text || !url->request || add_target(u, parts, &url->target) < 0) {
            free(url->text);
            free(url->request);
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        memcpy(url->request, req, (size_t)rlen + 1);
        url->request_len = (size_t)rlen;
        u->n++;
    }
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "%s: read error", path);
        goto out;
    }
    if (u->n == 0) {
        rc = -ENODATA;
        snprintf(err, errlen, "%s: no URLs in file", path);
    }
out:
    free(line);
    free(parts);
    free(req);
    fclose(f);
    if (rc < 0) sl_lg_urls_free(u);
    return rc;
}
