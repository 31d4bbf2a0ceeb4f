/* Socket addresses and networks as configs spell them.
 *
 * Start-up code: names are resolved with getaddrinfo here and nowhere else, so a request never
 * waits for a resolver. Canonical forms ("127.0.0.1:80", "[::1]:80") let two spellings of one
 * socket be recognised as the same listener.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int sl_cidr_parse(const char *s, unsigned char net[16], int *family, int *bits)
{
    char ip[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n >= sizeof ip) return -EINVAL;
    memcpy(ip, s, n);
    ip[n] = 0;
    memset(net, 0, 16);
    if (inet_pton(AF_INET, ip, net) == 1)
        *family = AF_INET;
    else if (inet_pton(AF_INET6, ip, net) == 1)
        *family = AF_INET6;
    else
        return -EINVAL;
    int max = *family == AF_INET ? 32 : 128;
    *bits = max;
    if (slash) {
        char *end;
        long b = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || b < 0 || b > max) return -EINVAL;
        *bits = (int)b;
    }
    return 0;
}

bool sl_net_match(const sl_net *net, const struct sockaddr *sa)
{
    unsigned char addr[16];
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (net->family == AF_INET && IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(addr, a6->s6_addr + 12, 4);
        } else {
            if (net->family != AF_INET6) return false;
            memcpy(addr, a6->s6_addr, 16);
        }
    } else if (sa->sa_family == AF_INET) {
        if (net->family != AF_INET) return false;
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else {
        return false;
    }
    for (int i = 0; i < net->bits; i++) {
        int byte = i / 8, bit = 7 - i % 8;
        if (((addr[byte] >> bit) & 1) != ((net->addr[byte] >> bit) & 1)) return false;
    }
    return true;
}

bool sl_cidr_match(const char *cidr, const struct sockaddr *sa)
{
    sl_net net;
    return sl_cidr_parse(cidr, net.addr, &net.family, &net.bits) == 0 && sl_net_match(&net, sa);
}

int sl_addr_parse(const char *s, size_t len, struct sockaddr_storage *out)
{
    char ip[INET6_ADDRSTRLEN];
    if (!len || len >= sizeof ip) return -EINVAL;
    memcpy(ip, s, len);
    ip[len] = 0;
    memset(out, 0, sizeof *out);
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        return 0;
    }
    return -EINVAL;
}

int sl_split_host_port(const char *spec, char host[256], const char **port, long *pn)
{
    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');
        if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= 256) return -EINVAL;
        memcpy(host, spec + 1, (size_t)(end - spec - 1));
        host[end - spec - 1] = 0;
        *port = end + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= 256) return -EINVAL;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = 0;
        if (strchr(host, ':')) return -EINVAL; /* IPv6 without brackets */
        *port = colon + 1;
    }
    char *endp;
    *pn = strtol(*port, &endp, 10);
    if (!**port || *endp || *pn < 1 || *pn > 65535) return -EINVAL;
    return 0;
}

int sl_socket_canonical(const char *spec, char *out, size_t outlen)
{
    char host[256];
    const char *port;
    long pn;
    if (sl_split_host_port(spec, host, &port, &pn) < 0) return -EINVAL;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &res) != 0) return -EHOSTUNREACH;
    /* A passive look-up of "" yields both wildcards; lighttpd's ":port" means IPv4 any. */
    struct addrinfo *ai = res;
    if (!host[0])
        for (struct addrinfo *i = res; i; i = i->ai_next)
            if (i->ai_family == AF_INET) ai = i;
    char ip[INET6_ADDRSTRLEN];
    int r = 0;
    if (ai->ai_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
        r = snprintf(out, outlen, "%s:%ld", ip, pn);
    } else {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
        r = snprintf(out, outlen, "[%s]:%ld", ip, pn);
    }
    freeaddrinfo(res);
    return r < 0 || (size_t)r >= outlen ? -ENAMETOOLONG : 0;
}

/* Dotted quad of a (network order) into buf (16 bytes); inet_ntop prints it with sprintf, ten
 * times the instructions, and this runs for every proxied request and access log line. */
static void ipv4_str(const struct in_addr *a, char *buf)
{
    const unsigned char *b = (const unsigned char *)&a->s_addr;
    char *p = buf;
    for (int i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (v >= 100) *p++ = (char)('0' + v / 100);
        if (v >= 10) *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
        *p++ = i < 3 ? '.' : '\0';
    }
}

void sl_addr_str(const struct sockaddr *sa, char *buf, size_t buflen, int *port)
{
    if (port) *port = 0;
    if (buflen >= 2) memcpy(buf, "-", 2);
    else if (buflen) buf[0] = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        if (buflen >= INET_ADDRSTRLEN)
            ipv4_str(&s4->sin_addr, buf);
        else
            inet_ntop(AF_INET, &s4->sin_addr, buf, (socklen_t)buflen);
        if (port) *port = ntohs(s4->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, buf, (socklen_t)buflen);
        if (port) *port = ntohs(s6->sin6_port);
    }
}
