/* Access log formats: Apache/lighttpd format strings, compiled once, rendered per request.
 * Pure formatting: no I/O, no event loop; the caller writes the rendered line. */
#ifndef SL_ACCESSLOG_H
#define SL_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* lighttpd's default format. */
#define SL_ACCESSLOG_DEFAULT "%h %V %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\""

/* The longest {argument} of a %{...}t, %{...}i or %{...}o directive (longer is -EINVAL). */
#define SL_ACCESSLOG_ARG_MAX 128

/* A compiled format (opaque). */
typedef struct sl_accesslog_fmt sl_accesslog_fmt;

/* Header lookup: the value of the header `name` (matched case-insensitively by the callee),
 * with its length in *len, or NULL when the request/response has no such header. The value
 * need not be NUL-terminated. */
typedef const char *(*sl_accesslog_header_fn)(void *ud, const char *name, size_t *len);

/* What one request contributes to its line. Strings given with a length need not be
 * NUL-terminated; the others must be. NULL means absent and renders as "-" unless the
 * directive says otherwise. Fields left zero by a designated initializer are absent. */
typedef struct sl_accesslog_rec {
    const char *remote_addr;          /* %h %a: client address */
    const char *remote_user;          /* %u: authenticated user, NULL = "-" */
    const char *method;               /* %m, %r */
    size_t method_len;
    const char *target;               /* %r: the raw request-target */
    size_t target_len;
    const char *path;                 /* %U: decoded path */
    const char *query;                /* %q: without '?'; NULL or "" renders nothing */
    const char *protocol;             /* %H, %r: "HTTP/1.1" */
    size_t protocol_len;              /* 0: protocol is NUL-terminated */
    const char *host;                 /* %V: the Host header (falls back to server_name) */
    const char *server_name;          /* %v: the configured server name */
    int port;                         /* %p: local port */
    const char *filename;             /* %f: the file served, NULL = "-" */
    int status;                       /* %s %>s %<s */
    uint64_t body_bytes;              /* %b ("-" when 0) %B */
    uint64_t total_bytes;             /* %O: headers and body */
    uint64_t duration_us;             /* %D; %T is this in whole seconds */
    unsigned keepalive_requests;      /* %k: requests served on the connection before this one */
    struct timespec when;             /* %t: request start, wall clock (CLOCK_REALTIME) */
    sl_accesslog_header_fn header;    /* %{Name}i: request headers, called with ud */
    void *ud;
    sl_accesslog_header_fn resp_header; /* %{Name}o: response headers, called with resp_ud */
    void *resp_ud;
} sl_accesslog_rec;

/* Compile fmt (NUL-terminated). Directives: %% %h %a %l %u %t %{strftime}t %{sec}t %{msec}t
 * %{usec}t %{msec_frac}t %{usec_frac}t %r %m %U %q %H %s %>s %<s %b %B %O %D %T %{Name}i
 * %{Name}o %v %V %p %f %k. Returns 0 and stores the format in *out, or -EINVAL with a message
 * naming the offending directive in err (an unknown letter, an argument on a letter that takes
 * none, a missing argument, an unterminated or too long %{...}, a lone '%'), or -ENOMEM.
 * err (errlen bytes, may be 0) is always NUL-terminated when errlen > 0; *out is untouched on
 * failure. Free with sl_accesslog_fmt_free. */
int sl_accesslog_compile(const char *fmt, sl_accesslog_fmt **out, char *err, size_t errlen);

/* Free a compiled format (NULL is fine). */
void sl_accesslog_fmt_free(sl_accesslog_fmt *f);

/* Render one line into buf (cap bytes) and return its length. The line always ends in '\n'
 * when cap > 0: a line that does not fit is cut at cap - 1 bytes (never inside an escape
 * sequence) and the '\n' takes the last byte, so the result is at most cap. buf is not
 * NUL-terminated. cap == 0 writes nothing and returns 0.
 * Everything a client controls (%h %a %u %r %m %U %q %H %V %v %f %{}i %{}o) is escaped like
 * Apache does: '"' and '\\' become \" and \\, bytes below 0x20 or above 0x7e become \xhh, so a
 * request can neither start a new line nor close a quoted field. */
size_t sl_accesslog_render(const sl_accesslog_fmt *f, const sl_accesslog_rec *r, char *buf,
                           size_t cap);

#endif
