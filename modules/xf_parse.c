/* Forwarding headers (see xf_parse.h). Both lists are read from the right, the end a trusted
 * proxy appended last, and the first address that is not a trusted proxy's is the client: what a
 * client wrote to the left of it cannot be told from the truth, what a trusted proxy wrote can.
 * An element that is no numeric address ends the walk with no answer rather than skipping it:
 * past an "unknown" node nothing further left can be trusted. Forwarded's values may be quoted
 * strings with escapes; they are unquoted into fixed buffers and cut at 127 bytes, which no
 * address reaches.
 */
#include "xf_parse.h"

#include <string.h>
#include <strings.h>

#include "addr.h"

int sl_xf_node_addr(const char *v, size_t n, struct sockaddr_storage *out)
{
    if (n && v[0] == '[') {
        const char *close = memchr(v, ']', n);
        if (!close) return -1;
        return sl_addr_parse(v + 1, (size_t)(close - v - 1), out);
    }
    if (memchr(v, '.', n)) {
        const char *colon = memchr(v, ':', n);
        if (colon) n = (size_t)(colon - v);
    }
    return sl_addr_parse(v, n, out);
}

int sl_xf_client(const char *v, size_t len, sl_xf_trusted trusted, const void *arg,
                 struct sockaddr_storage *out)
{
    size_t end = len;
    while (end > 0) {
        size_t start = end;
        while (start > 0 && v[start - 1] != ',') start--;
        size_t a = start, b = end;
        while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
        end = start ? start - 1 : 0;
        if (a == b) continue; /* an empty element */
        if (sl_xf_node_addr(v + a, b - a, out) < 0) return -1;
        if (!trusted(arg, (const struct sockaddr *)out)) return 0;
    }
    return -1;
}

int sl_xf_forwarded_client(const char *v, size_t len, sl_xf_trusted trusted, const void *arg,
                           struct sockaddr_storage *out, const char **scheme)
{
    size_t starts[64], n = 0;
    bool q = false;
    starts[n++] = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\\' && q && i + 1 < len) {
            i++;
        } else if (v[i] == '"') {
            q = !q;
        } else if (v[i] == ',' && !q) {
            /* A longer list is no proxy chain; and merged into one element, the elements past
             * the 64th would hide the proxies' own among them. */
            if (n == 64) return -1;
            starts[n++] = i + 1;
        }
    }
    /* A quoted string a client left open would swallow the elements the proxies appended
     * after it ("for=192.0.2.1;x=\"" + ", for=<the real client>"): believe none of it. */
    if (q) return -1;
    for (size_t e = n; e-- > 0;) {
        size_t end = e + 1 < n ? starts[e + 1] - 1 : len;
        char node[128] = "", proto[8] = "";
        /* name=value pairs split by ';', values tokens or quoted strings */
        for (size_t i = starts[e]; i < end;) {
            while (i < end && (v[i] == ' ' || v[i] == '\t' || v[i] == ';')) i++;
            size_t ns = i;
            while (i < end && v[i] != '=' && v[i] != ';') i++;
            size_t nl = i - ns;
            if (i >= end || v[i] != '=') continue;
            i++;
            char val[128];
            size_t vl = 0;
            if (i < end && v[i] == '"') {
                for (i++; i < end && v[i] != '"'; i++) {
                    if (v[i] == '\\' && i + 1 < end) i++;
                    if (vl + 1 < sizeof val) val[vl++] = v[i];
                }
                i++;
            } else {
                for (; i < end && v[i] != ';' && v[i] != ' ' && v[i] != '\t'; i++)
                    if (vl + 1 < sizeof val) val[vl++] = v[i];
            }
            val[vl] = 0;
            if (nl == 3 && !strncasecmp(v + ns, "for", 3)) memcpy(node, val, vl + 1);
            else if (nl == 5 && !strncasecmp(v + ns, "proto", 5) && vl < sizeof proto)
                memcpy(proto, val, vl + 1);
        }
        if (!node[0] || sl_xf_node_addr(node, strlen(node), out) < 0) return -1;
        if (trusted(arg, (const struct sockaddr *)out)) continue;
        if (!strcasecmp(proto, "https")) *scheme = "https";
        else if (!strcasecmp(proto, "http")) *scheme = "http";
        return 0;
    }
    return -1;
}
