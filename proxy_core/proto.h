/* The protocols proxy-core speaks to its backends, behind one small table.
 *
 * mod_proxy.c moves bytes (connects, streams the request body, reads the answer with
 * back-pressure, retries, serves X-Sendfile) and knows no protocol; a protocol (fastcgi.c,
 * http.c) says how a request is encoded (its head, then body pieces, then the end of the body),
 * how the backend's byte stream decodes into response-head-and-body bytes, log lines and the end
 * of the answer, how the response head is parsed and how its body is framed, and whether the
 * connection may be kept. lighttpd calls the same split gw_backend and its protocol modules.
 */
#ifndef SL_PROXY_PROTO_H
#define SL_PROXY_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "fcgi_proto.h"
#include "http_parse.h"
#include "http_resp.h"
#include "module.h"

/* What a protocol needs to know of the request to encode it (all strings NUL-terminated unless
 * a length is given; nothing is owned). */
typedef struct sl_proxy_msg {
    const sl_http_request *rq;   /* the client's parsed request head */
    const char *docroot;         /* the document root, no trailing slash */
    const char *path;            /* the normalized, decoded path ("/a/b.php") */
    const char *query;           /* the query string without '?' ("" when none) */
    const char *host;            /* the request's host ("" when none), port included */
    const char *server_name;     /* SERVER_NAME: server.name, else host */
    int redirect_status;         /* REDIRECT_STATUS: the error an error handler serves, or 200 */
    const char *remote_addr;     /* the client's address and port */
    const char *scheme;          /* "http" or "https" (REQUEST_SCHEME, X-Forwarded-Proto) */
    unsigned forwarded;          /* HTTP: SL_FWD_* parameters of an RFC 7239 Forwarded element
                                  * (proxy.forwarded); 0: no Forwarded field is made */
    const char *remote_user;     /* the authenticated user (mod_auth): FastCGI REMOTE_USER,
                                  * Forwarded's remote_user; or NULL */
    int remote_port;
    const char *server_addr;     /* the address and port the request came in on (NULL: unknown) */
    const char *server_port;
    /* CGI: SCRIPT_NAME / PATH_INFO / SCRIPT_FILENAME; NULL: path, "", docroot + path. A
     * PATH_INFO given (lighttpd's routes) also gives PATH_TRANSLATED, and is left out when
     * empty, as lighttpd does. */
    const char *script_name;
    const char *path_info;
    const char *script_filename;
    const char *request_uri;     /* NULL: the request target as the client sent it */
    /* The target after the rewrites of mod_rewrite (NULL: none): HTTP sends it instead of the
     * client's, FastCGI adds it as REDIRECT_URI (REQUEST_URI stays the client's), as lighttpd. */
    const char *target;
    size_t target_len;
    const sl_req_edits *edits;   /* fields and variables the config adds or sets (NULL: none) */
    const char *auth_type;       /* with remote_user: "Basic", "Digest" or "SSL_CLIENT_VERIFY"
                                  * (FastCGI AUTH_TYPE) */
    const sl_kvlist *tls_env;    /* FastCGI: the client certificate's SSL_CLIENT_* (tls.h), or
                                  * NULL */
    const char *host_header;     /* HTTP: the Host value for the backend; NULL: the client's */
    long long body_length;       /* CONTENT_LENGTH / Content-Length; -1: the request has none */
    bool body_chunked;           /* the body goes on chunked (HTTP only: see collect_chunked) */
    bool keep;                   /* ask the backend to keep the connection */
} sl_proxy_msg;

/* proxy.forwarded's parameters (lighttpd 1.4's names). */
enum { SL_FWD_FOR = 1, SL_FWD_BY = 2, SL_FWD_PROTO = 4, SL_FWD_HOST = 8, SL_FWD_REMOTE_USER = 16 };

/* One piece of the backend's byte stream, decoded. */
typedef enum {
    SL_PP_NEED = 0, /* every byte given was used: more input is needed */
    SL_PP_DATA,     /* data/len: response bytes (the head, then the body) */
    SL_PP_LOG,      /* data/len: a message for the error log (FastCGI's stderr) */
    SL_PP_END,      /* the answer is complete (a FastCGI END_REQUEST) */
} sl_proxy_piece_type;

typedef struct sl_proxy_piece {
    const char *data;
    size_t len;
} sl_proxy_piece;

/* A protocol. */
typedef struct sl_proxy_proto {
    const char *name; /* "fastcgi", "http": proxy-core.protocol */
    /* The application ties a worker to each open connection (libfcgi programs): the gateway
     * then stops keeping connections beyond the workers it saw (sl_gw_connect). */
    bool holds_worker;
    /* A chunked request body is collected before the request goes out (CGI applications need
     * CONTENT_LENGTH); otherwise it goes on chunked as it arrives. */
    bool collect_chunked;
    /* The end of the response body (by its framing) ends the answer (HTTP). Otherwise the
     * protocol says so itself (SL_PP_END) and the answer has no framing of its own past
     * Content-Length: its body runs until the end. */
    bool ends_with_body;
    size_t state_size; /* per-request decoder state, at most SL_PROXY_STATE_MAX bytes */

    /* Append the request head (and, for FastCGI, everything before the body) to b.
     * 0, -ENOMEM, -EOVERFLOW. */
    int (*encode_head)(const sl_proxy_msg *m, sl_buf *b);
    /* Append n body bytes (n may be 0: nothing). 0 or a negative errno. */
    int (*encode_body)(const sl_proxy_msg *m, sl_buf *b, const char *p, size_t n);
    /* Append the end of the body (also for a request without one). 0 or a negative errno. */
    int (*encode_end)(const sl_proxy_msg *m, sl_buf *b);

    /* Decoder: init before the first byte of an answer; decode the bytes d[0..n) that follow
     * earlier ones: returns the piece type (SL_PP_*) with *used set to the bytes consumed, or a
     * negative errno for a malformed stream. */
    void (*decode_init)(void *st);
    int (*decode)(void *st, const char *d, size_t n, size_t *used, sl_proxy_piece *p);

    /* Parse the response head at buf[0..*len): > 0 the head's length, 0 incomplete, < 0 bad.
     * May drop leading bytes that are no part of it (HTTP's interim 1xx heads), adjusting *len. */
    int (*parse_head)(char *buf, size_t *len, const sl_upstream_limits *lim, sl_upstream_head *h);
    /* How the body after head h is framed; *keep cleared when the connection must close. */
    sl_body_framing (*framing)(const sl_upstream_head *h, bool head_request, bool *keep);
    /* A field of the head that is not passed on to the client (hop-by-hop). */
    bool (*hop)(const sl_upstream_head *h, const sl_upstream_field *f);
} sl_proxy_proto;

#define SL_PROXY_STATE_MAX 128

/* The protocols. */
extern const sl_proxy_proto sl_proxy_fastcgi;
extern const sl_proxy_proto sl_proxy_http;

/* The protocol named name ("fastcgi", "http"), or NULL. */
const sl_proxy_proto *sl_proxy_proto_find(const char *name);

#endif
