/* Access log formats: Apache/lighttpd format strings, compiled once, rendered per request. */
#ifndef SL_ACCESSLOG_H
#define SL_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* lighttpd's default format. */
#define SL_ACCESSLOG_DEFAULT "%h %V %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\""

/* A compiled format. */
typedef struct sl_accesslog_fmt sl_accesslog_fmt;

/* What one request contributes to its line. Strings need not be NUL-terminated where a length
 * is given; NULL means absent ("-"). */
typedef struct sl_accesslog_rec {
    const char *remote_addr;          /* %h %a */
    const char *method;               /* %m */
    size_t method_len;
    const char *target;               /* the raw request-target, for %r */
    size_t target_len;
    const char *path;                 /* %U: decoded path */
    const char *query;                /* %q: without '?', "" when none */
    const char *protocol;             /* %H: "HTTP/1.1" */
    const char *host;                 /* %V: Host */
    const char *server_name;          /* %v */
    int port;                         /* %p: local port */
    const char *filename;             /* %f */
    int status;                       /* %s %>s */
    uint64_t body_bytes;              /* %b %B */
    uint64_t total_bytes;             /* %O */
    uint64_t duration_us;             /* %D %T */
    unsigned keepalive_requests;      /* %k */
    struct timespec when;             /* %t: request start, wall clock */
    /* %{Name}i: the request header's value, or NULL. */
    const char *(*header)(void *ud, const char *name, size_t *len);
    void *ud;
} sl_accesslog_rec;

/* Compile fmt. Returns 0, or -EINVAL with "what is wrong" in err (an unknown directive, an
 * unterminated %{...}), or -ENOMEM. Free with sl_accesslog_fmt_free. */
int sl_accesslog_compile(const char *fmt, sl_accesslog_fmt **out, char *err, size_t errlen);

/* Free a compiled format (NULL is fine). */
void sl_accesslog_fmt_free(sl_accesslog_fmt *f);

/* Render one line, ending in '\n', into buf (cap > 0 bytes); truncated lines still end in '\n'.
 * Bytes a client controls (%r %U %q %i %u %V) are escaped like Apache does: '"', '\\' and bytes
 * below 0x20 or above 0x7e become \" \\ or \xhh, so no one can forge a line. Returns the length. */
size_t sl_accesslog_render(const sl_accesslog_fmt *f, const sl_accesslog_rec *r, char *buf,
                           size_t cap);

#endif
