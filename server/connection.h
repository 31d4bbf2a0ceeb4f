/* One client connection: reading request heads, running module hooks, writing responses.
 *
 * A connection belongs to one loop for its whole life and is only ever touched on that loop's
 * thread. Its socket is registered with the kernel once, for reading and writing, edge-triggered;
 * the connection remembers what the kernel said (rd_ready, wr_ready) until a read or write comes
 * back short, so a request costs no epoll_ctl. Timeouts are coarse: each state sets a deadline
 * in whole seconds and the loop's once-a-second sweep acts on those that passed: a limit of N
 * seconds closes a connection after more than N and at most N+1 (lighttpd's rule).
 */
#ifndef SL_CONNECTION_H
#define SL_CONNECTION_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "chunk.h"
#include "conf.h"
#include "http_parse.h"
#include "module.h"
#include "netback.h"

struct sl_h2;
struct sl_loop;
struct sl_tls_conn;

typedef enum {
    SL_CONN_READ_HEAD, /* waiting for (the rest of) a request head */
    SL_CONN_HANDLE,    /* a module is working on the request (maybe asynchronously) */
    SL_CONN_READ_BODY, /* a module reads the request body (on_body runs when it is readable) */
    SL_CONN_WRITE,     /* sending the response */
    SL_CONN_LINGER,    /* response sent, write side shut: draining input before close */
    SL_CONN_H2,        /* an HTTP/2 session (h2.h): its streams are connections of their own */
} sl_conn_state;

#define SL_TIMING_READS 16

/* Per-request timing trace (debug.log-timing): CLOCK_MONOTONIC nanoseconds, 0 = did not happen.
 * Recorded only when the trace is on. */
typedef struct sl_timing {
    uint64_t start;        /* accept (first request) or first byte of the request */
    double wall;           /* wall clock at start, seconds */
    uint64_t parsed, stat_queued, stat_started, stat_done, open;
    uint64_t backend_connect, backend_first_byte, backend_done;
    uint64_t first_byte, last_byte;
    unsigned n_reads;      /* block reads; only the first SL_TIMING_READS are kept */
    uint64_t reads[SL_TIMING_READS][3]; /* queued, started, done */
} sl_timing;

/* Header fields of the response kept inline; more go to the request's memory. */
#define SL_RESP_MAX_HEADERS 24

/* One response header field. name and value live until the response head is written (string
 * literals, the config, or the request's arena). */
typedef struct sl_resp_field {
    const char *name;
    const char *value;
    uint16_t name_len, value_len;
} sl_resp_field;

/* The response being built. The head is written into the output queue, in front of the body
 * chunks modules queued, when the request is handled (after the response_start hooks). */
typedef struct sl_resp {
    int status;
    uint64_t content_length;   /* UINT64_MAX: none (chunked, or ends with the connection) */
    bool head_done;            /* sl_resp_end_headers was called */
    bool head_sent;            /* the head is in the output queue */
    unsigned n_fields, cap_fields;
    sl_resp_field *fields;     /* inline, or a larger array in the request's memory */
    sl_resp_field inline_fields[SL_RESP_MAX_HEADERS];
} sl_resp;

/* Bytes of per-request memory kept inline in the connection (sl_conn_alloc). */
#define SL_ARENA_INLINE 1024

/* A client connection and the request it is serving (one at a time; pipelined requests wait in
 * the input buffer). */
typedef struct sl_conn {
    struct sl_loop *loop;
    struct sl_conn *prev, *next;   /* the loop's connections */
    int fd;
    unsigned listener;             /* index of the listening socket it came in on */
    struct sockaddr_storage peer;
    struct event ev;               /* read|write|persist|edge-triggered, added once */
    bool rd_ready, wr_ready;       /* the kernel reported it and no short read/write since */
    bool rd_eof;                   /* the peer shut its side (EPOLLRDHUP): reads end in 0 */
    struct sl_tls_conn *tls;       /* TLS (tls.h) on this connection, or NULL: plain */
    struct sl_h2 *h2;              /* the HTTP/2 session this connection carries (h2_id 0) or
                                    * this stream belongs to (h2_id > 0); NULL: HTTP/1.x */
    int32_t h2_id;                 /* > 0: an HTTP/2 stream (fd -1), its stream id */
    bool h2_tls;                   /* a stream of a session over TLS */
    sl_conn_state state;
    time_t deadline;               /* the sweep acts after it (seconds, loop clock); 0: none */
    unsigned requests;             /* requests completed on this connection */
    uint64_t id;                   /* connection number (per loop), for the timing trace */

    char *in;                      /* input buffer: request heads, pipelined requests */
    size_t in_len, in_cap;

    /* The current request. Pointers in req point into in[]. */
    sl_http_request req;
    size_t head_len;
    const char *target;            /* the request-target, or what a hook rewrote it to (then in
                                    * request memory, and the hook answered SL_COMEBACK) */
    size_t target_len;
    unsigned phase, phase_mod;     /* where the hooks are (module.h phases, module index) */
    unsigned comebacks;            /* times a hook started the request over (SL_COMEBACK) */
    int eh_status;                 /* serving server.error-handler's URL for this error status
                                    * (> 0), server.error-handler-404's (-status), 0: neither */
    sl_method eh_method;           /* the method the request came with, while eh_status */
    const sl_conf *conf;           /* the conf block for this request (global or conf_buf) */
    const struct sl_dir *docroot;  /* its document root: the block's server.document-root, or
                                    * what a virtual hosting module chose (uri_clean) */
    sl_conf *conf_buf;             /* per-connection room for one, when conditions apply */
    sl_cond_capture *caps;         /* groups of the regex blocks %N uses (cs->n_captures; made
                                    * with conf_buf when the config has any), by capture slot */
    char *path;                    /* decoded, normalized path (request arena) */
    size_t path_len;
    char *query;                   /* raw query string, "" when absent (request arena) */
    /* Where the physical phase (mod_alias) put the file: beneath phys_root, at phys_path
     * (phys_len bytes, starting with '/'). NULL: the document root and path. */
    const struct sl_dir *phys_root;
    const char *phys_path;
    size_t phys_len;
    /* The module that will answer in the handle phase, when it said so earlier (lighttpd's
     * handler_module; proxy-core's routes, in uri_clean): physical-phase hooks that act only
     * on requests nobody claimed (url.rewrite-if-not-file) leave it alone. */
    const struct sl_module *handler;
    const sl_req_edits *edits;     /* fields and variables for back ends (NULL: none) */
    const char *remote_user;       /* who authenticated (mod_auth; request memory), NULL: nobody */
    const char *auth_type;         /* how: "Basic" or "Digest" (NULL with remote_user) */
    char host[256];                /* Host (or absolute-form authority), normalized
                                    * (sl_host_normalize) */
    char host_raw[64];             /* the value host was normalized from (set_host): a client
                                    * sends the same one on every request of a connection */
    unsigned char host_raw_len;    /* 0: none kept (c->host must be normalized again) */
    unsigned short host_raw_port;  /* the default port it was normalized with */
    const char *scheme;            /* "http": the listener's; or what a trusted proxy said it
                                    * was (mod_extforward, X-Forwarded-Proto) */
    bool keep_alive;
    bool has_body;                 /* the request carries a body we do not read: close after */
    int status;                    /* response status */
    int error;                     /* negative errno behind an error status, for the log */
    sl_resp resp;
    int file_fd;                   /* the file the response sends, closed when the request ends */
    struct sl_fdc_entry *file_ent; /* or the open-file cache's entry for it, given back then */
    uint64_t fdc_mark;             /* sl_fdc_mark before the file was opened (mod_static) */
    sl_chunkq out;
    uint64_t bytes_out;
    size_t hdr_bytes;              /* bytes of the response head (access log %b) */
    sl_xfer xfer;                  /* file bytes to the socket through the network backend */
    unsigned pending;              /* jobs in flight that point at this connection */
    bool closed;                   /* socket closed while jobs were in flight: freed when they return */
    bool nodelay;                  /* TCP_NODELAY is on (see sl_conn_nodelay) */
    struct sl_bwconn *bw;          /* bandwidth limit state (bwlimit.c); NULL: never limited */
    uint64_t req_start;            /* CLOCK_MONOTONIC ns when this request began (access log %D) */
    struct timespec req_wall;      /* the same, wall clock (%t) */
    sl_timing t;

    /* For modules that read bodies or produce responses over time (proxy-core). */
    void *mctx[SL_MAX_MODULES];    /* each module's per-request state; its request_done frees it */
    bool ka_after_body;            /* keep-alive the client asked for, if the body gets read */
    bool body_armed;               /* READ_BODY: on_body is wanted once when readable */
    bool streaming;                /* the module is still appending to out: empty is not the end */
    void (*on_drain)(struct sl_conn *c);            /* out became empty while streaming */
    void (*on_body)(struct sl_conn *c, short what); /* readable (or EV_TIMEOUT) in READ_BODY */

    /* Per-request memory (sl_conn_alloc): inline, then blocks freed at the request's end. */
    size_t arena_used;
    struct sl_arena_block *arena_more;
    char arena[SL_ARENA_INLINE];
} sl_conn;

/* Take over an accepted, non-blocking socket on loop and read the request at once: a client
 * usually sends it with its handshake, so most connections are answered (or handed to a module)
 * before this returns, without a turn of the event loop. Returns 0, or -ENOMEM (the socket is
 * then closed). The connection may be gone when this returns. */
int sl_conn_new(struct sl_loop *loop, int fd, const struct sockaddr *sa, int salen,
                unsigned listener);
/* Close now, whatever the state. With jobs in flight the socket is shut down at once and the
 * memory waits for them (see sl_conn_release). */
void sl_conn_close(sl_conn *c);
/* A job of a closed connection returned: free it once nothing is in flight any more. */
void sl_conn_release(sl_conn *c);
/* An asynchronous module finished the request it answered SL_WAIT for: r is what its hook would
 * have returned (SL_FINISHED or SL_ERROR). Runs the connection on. */
void sl_conn_handled(sl_conn *c, sl_hresult r);
/* Continue writing after a streaming module appended to the output queue. */
void sl_conn_resume(sl_conn *c);
/* Record "now" into a timing field when the trace is on (cheap test otherwise). */
void sl_conn_mark(sl_conn *c, uint64_t *field);
/* Is the timing trace on? */
bool sl_conn_timing(const sl_conn *c);

/* Turn Nagle off for the rest of the connection (once; later calls cost nothing). */
void sl_conn_nodelay(sl_conn *c);
/* READ_BODY: have on_body called once, when the socket is readable (at once if it is now), or
 * with EV_TIMEOUT after secs seconds without input. Call it again for the next call. */
void sl_conn_want_body(sl_conn *c, long secs);
/* READ_BODY: do not call on_body (back-pressure, or the body is complete). */
void sl_conn_pause_body(sl_conn *c);
/* recv() from the client that keeps the readiness the connection tracks: bytes read, 0 at the
 * end of input, or a negative errno (-EAGAIN: nothing now; on_body follows when there is). */
ssize_t sl_conn_recv(sl_conn *c, void *buf, size_t len);
/* Send bytes now, outside the output queue (an interim 100 Continue): through TLS on a TLS
 * connection. Bytes sent, or a negative errno (-EAGAIN: the socket is full). */
ssize_t sl_conn_send_now(sl_conn *c, const void *buf, size_t len);
/* The scheme requests on this connection have: "https" on a TLS listener, else "http". */
static inline const char *sl_conn_scheme(const sl_conn *c)
{
    return c->tls || c->h2_tls ? "https" : "http";
}
/* Server is stopping: close the connection if it is idle, otherwise let it finish its response. */
void sl_conn_shutdown(sl_conn *c);
/* The 1-second sweep found c past its deadline. */
void sl_conn_timeout(sl_conn *c);

/* Where the physical phase mapped the request (an alias.url target, else the document root):
 * returns that directory's fd and sets *rel to the path beneath it, without a leading '/'
 * ("." for the directory itself). */
int sl_conn_mapped(const sl_conn *c, const char **rel);

/* The port of the listening socket the connection came in on. */
unsigned sl_conn_local_port(const sl_conn *c);

/* Per-request memory, freed when the request ends; NULL when out of memory. */
void *sl_conn_alloc(sl_conn *c, size_t n);
/* A NUL-terminated copy of s[0..n) in the request's memory; NULL when out of memory. */
char *sl_conn_strdup(sl_conn *c, const char *s, size_t n);

/* The module's per-request state slot. */
#define SL_CTX(c, mod) ((c)->mctx[(mod).index])

/* Response building, used by modules. */
/* Start the response: its status (the status line is always HTTP/1.1, RFC 9110 §2.5, whatever
 * the request's version; what a 1.0 client may receive is the callers' business: no chunked,
 * keep-alive only when asked). Clears fields added before. */
void sl_resp_begin(sl_conn *c, int status);
/* Add a header field; value (NUL-terminated) is copied into the request's memory. */
void sl_resp_header(sl_conn *c, const char *name, const char *value);
/* Add a header field whose name and value outlive the request head (literals, config). */
void sl_resp_header_static(sl_conn *c, const char *name, size_t name_len, const char *value,
                           size_t value_len);
/* Find a header field added so far (case-insensitive); NULL when absent. */
sl_resp_field *sl_resp_find(sl_conn *c, const char *name);
/* Remove every field called name. */
void sl_resp_remove(sl_conn *c, const char *name);
/* The head is complete: the core adds Content-Length (content_length != UINT64_MAX), Date,
 * Server and Connection when it writes it. */
void sl_resp_end_headers(sl_conn *c, uint64_t content_length);
/* A complete error response with a short HTML body (no body for HEAD); closes after it when the
 * status demands it (400, 408, 413, 414, 431, 501, 505...). */
void sl_resp_error(sl_conn *c, int status);
/* The reason phrase for a status code. */
const char *sl_status_reason(int status);
/* Map a negative errno from a system call to an HTTP status: the only such mapping. ENOENT,
 * ENOTDIR, ENAMETOOLONG -> 404; EACCES, EPERM, ELOOP, EXDEV -> 403; EINVAL -> 400; EMFILE,
 * ENFILE, ENOMEM -> 503; 0 -> 200; anything else 500. */
int sl_errno_to_status(int err);

/* Send bytes [off, off+len) of fd as (part of) the response body, through the loop's network
 * backend; fd stays the caller's (closed by it when the request ends). 0 or -ENOMEM. */
int sl_conn_send_file(sl_conn *c, int fd, off_t off, off_t len);
/* The file fd of this response is the one st describes (from the handler's fstat): the network
 * backend may use it to remember what it learnt of the file (the hybrid backend's residency
 * memo). Forgotten when the request ends. */
void sl_conn_file_is(sl_conn *c, int fd, const struct stat *st);

/* For HTTP/2 (h2.c). */
/* Make s (zeroed) a stream of the session h2 on connection parent, with stream id id: the
 * parent's loop, listener, peer and conf; no socket. */
void sl_conn_stream_init(sl_conn *s, sl_conn *parent, struct sl_h2 *h2, int32_t id);
/* The stream's request head is in s->in (in_len bytes): parse it and run the request, or
 * answer status at once when it is not 0 (a head that could not be made: 400, 431). */
void sl_conn_stream_begin(sl_conn *s, int status);
/* The stream is over: closed now, freed when no job points at it (sl_conn_release). */
void sl_conn_stream_release(sl_conn *s);
/* Write the connection's output queue for this turn (bandwidth limits, TLS, the network
 * backend). 0: the queue is empty; 1: the socket is full (an event resumes); 2: a file read is
 * in flight (its completion resumes); 3: the turn's budget is spent (resumed in a later turn);
 * -1: the connection was closed. */
int sl_conn_write_out(sl_conn *c);

#endif
