/* One client connection: reading request heads, running modules, writing responses. */
#ifndef SL_CONNECTION_H
#define SL_CONNECTION_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "chunk.h"
#include "http_parse.h"
#include "module.h"
#include "netback.h"
#include "settings.h"

struct sl_server;

typedef enum {
    SL_CONN_READ_HEAD, /* waiting for (the rest of) a request head */
    SL_CONN_HANDLE,    /* a module is working on the request (maybe asynchronously) */
    SL_CONN_READ_BODY, /* a module reads the request body (on_body runs on socket events) */
    SL_CONN_WRITE,     /* sending the response */
    SL_CONN_LINGER,    /* response sent, write side shut: draining input before close */
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

/* A client connection and the request it is serving (one at a time; pipelined requests wait in
 * the input buffer). */
typedef struct sl_conn {
    struct sl_server *srv;
    struct sl_conn *prev, *next;
    int fd;
    const sl_listen_spec *listen;
    struct sockaddr_storage peer;
    struct event ev;
    sl_conn_state state;
    time_t deadline;       /* read deadline for the current request head */
    unsigned requests;     /* requests completed on this connection */

    char *in;              /* input buffer: request heads, pipelined requests */
    size_t in_len, in_cap;

    /* The current request. Pointers in req point into in[]. */
    sl_http_request req;
    size_t head_len;
    sl_settings conf;      /* global settings with matching conditions applied */
    char *path;            /* decoded, normalized path */
    size_t path_len;
    char *query;           /* raw query string (NUL-terminated copy), "" when absent */
    char host[256];        /* Host (or absolute-form authority), normalized (sl_host_normalize) */
    bool keep_alive;
    bool has_body;         /* the request carries a body we do not read: close after answering */
    int status;            /* response status */
    int error;             /* negative errno behind an error status, for the log */
    int file_fd;           /* the file a static response sends, closed at request end */
    sl_chunkq out;
    uint64_t bytes_out;
    sl_fileread rd;        /* the block read of a file chunk (asynchronous backends) */
    unsigned pending;      /* jobs in flight that point at this connection */
    bool closed;           /* socket closed while jobs were in flight: freed when they return */
    bool nodelay;          /* TCP_NODELAY is on (see sl_conn_nodelay) */
    uint64_t id;           /* connection number, for the timing trace */
    uint64_t req_start;    /* CLOCK_MONOTONIC ns when this request began (access log %D) */
    struct timespec req_wall; /* the same, wall clock (%t) */
    size_t hdr_bytes;      /* bytes of the response head (access log %b) */
    sl_timing t;

    /* For modules that read bodies or produce responses over time (proxy_core). */
    void *mod_ctx;         /* the module's per-request state; its request_done frees it */
    bool ka_after_body;    /* keep-alive the client asked for, if the body gets read */
    bool streaming;        /* the module is still appending to out: an empty queue is not the end */
    void (*on_drain)(struct sl_conn *c);           /* out became empty while streaming */
    void (*on_body)(struct sl_conn *c, short what);  /* socket event in SL_CONN_READ_BODY */
} sl_conn;

/* Take over an accepted, non-blocking socket and read the request at once: a client usually
 * sends it with its handshake, so most connections are answered (or handed to a module) before
 * this returns, without a turn of the event loop. Returns 0, or -ENOMEM (the socket is then
 * closed). The connection may be gone when this returns. */
int sl_conn_new(struct sl_server *srv, int fd, const struct sockaddr *sa, int salen,
                const sl_listen_spec *ls);
/* Close now, whatever the state. With jobs in flight the socket closes at once and the memory
 * waits for them (see sl_conn_release). */
void sl_conn_close(sl_conn *c);
/* A job of a closed connection returned: free it once nothing is in flight any more. */
void sl_conn_release(sl_conn *c);
/* An asynchronous module finished the request it answered SL_WAIT for: r is what its hook would
 * have returned (SL_FINISHED or SL_ERROR). Runs the connection on. */
void sl_conn_handled(sl_conn *c, sl_hresult r);
/* Continue writing after an asynchronous read completed or a read slot freed, or after a
 * streaming module appended to the output queue. */
void sl_conn_resume(sl_conn *c);
/* Record "now" into a timing field when the trace is on (cheap test otherwise). */
void sl_conn_mark(sl_conn *c, uint64_t *field);

/* Turn Nagle off for the rest of the connection (once; later calls cost nothing). Called when a
 * connection outlives its first response and when a module starts streaming, where a small write
 * must not wait for the ACK of the one before. */
void sl_conn_nodelay(sl_conn *c);
/* Wait for `what` (EV_READ / EV_WRITE) on the client socket for at most secs seconds. */
void sl_conn_arm(sl_conn *c, short what, long secs);
/* Server is stopping: close the connection if it is idle, otherwise let it finish its response. */
void sl_conn_shutdown(sl_conn *c);

/* Response building, used by modules. */
/* Start the response: the status line, always HTTP/1.1 (RFC 9110 §2.5), whatever the request's
 * version; what a 1.0 client may receive is the callers' business (no chunked, keep-alive only
 * when asked). */
void sl_resp_begin(sl_conn *c, int status);
/* Add a header line. */
void sl_resp_header(sl_conn *c, const char *name, const char *value);
/* Add the core headers (Date, Server, Content-Length, Connection) and the blank line. */
void sl_resp_end_headers(sl_conn *c, uint64_t content_length);
/* A complete error response with a short HTML body (no body for HEAD); closes after it when the
 * status demands it (400, 408, 413, 414, 431, 505...). */
void sl_resp_error(sl_conn *c, int status);
/* The reason phrase for a status code. */
const char *sl_status_reason(int status);
/* Map a negative errno from a system call to an HTTP status: the only such mapping. ENOENT,
 * ENOTDIR, ENAMETOOLONG -> 404; EACCES, EPERM, ELOOP, EXDEV -> 403; EINVAL -> 400; EMFILE,
 * ENFILE, ENOMEM -> 503; 0 -> 200; anything else 500. */
int sl_errno_to_status(int err);

#endif
