/* HTTP/2 on a client connection (libnghttp2), and its streams.
 *
 * A connection becomes an HTTP/2 session when TLS negotiated ALPN "h2", when a cleartext
 * connection's first bytes are the client preface ("PRI * HTTP/2.0..."), or when an HTTP/1.1
 * request asked to upgrade (Upgrade: h2c) and was answered 101. From then on its input goes to
 * nghttp2 and its output queue carries nghttp2's frames. Each request stream is an sl_conn of its
 * own without a socket (fd -1, c->h2 the session, c->h2_id its stream id) that runs through the
 * same pipeline as an HTTP/1.1 request. Everything here runs on the connection's loop thread.
 */
#ifndef SL_H2_H
#define SL_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "module.h"

struct sl_conn;
struct sl_h2;

/* The HTTP/2 status counters; always loaded (lighttpd's mod_h2 is part of its core). */
extern sl_module sl_mod_h2;

/* The client preface every HTTP/2 connection starts with, and its length. */
#define SL_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SL_H2_PREFACE_LEN 24

/* Do the n bytes at p start with the client preface: 1 yes (all of it is there), 0 they are a
 * beginning of it (wait for more), -1 no. */
int sl_h2_preface(const char *p, size_t n);

/* The connection speaks HTTP/2 from now on (ALPN h2, or the preface on cleartext): the bytes it
 * read so far (c->in, the preface first) go to the session. 0, or -ENOMEM (the caller closes). */
int sl_h2_start(struct sl_conn *c);

/* The HTTP/1.1 request in c->in (c->req parsed, head_len bytes) asked for Upgrade: h2c with
 * HTTP2-Settings: answer 101 and go on in HTTP/2 with that request as stream 1. Returns 1 when
 * the connection switched, 0 when the request does not qualify (answer it in HTTP/1.1), or -1
 * when the 101 could not be sent whole or no session made (nothing more can be said on the
 * connection: the caller ends it). */
int sl_h2_upgrade(struct sl_conn *c);

/* Turn of a session's connection (state SL_CONN_H2): read and process input, write output,
 * finish streams whose last bytes went out. Closes the connection when the session ends. */
void sl_h2_run(struct sl_conn *c);
/* The session's connection is being freed: free every stream (those whose jobs are in flight
 * are freed when their jobs return) and the session. */
void sl_h2_free(struct sl_conn *c);
/* Graceful stop: GOAWAY (streams already opened finish), then close. */
void sl_h2_shutdown(struct sl_conn *c);
/* The loop's sweep found the session's connection past its deadline. */
void sl_h2_timeout(struct sl_conn *c);

/* A stream's response head is complete (the response_start hooks ran): hand it to the session.
 * 0 or -ENOMEM. */
int sl_h2_stream_head(struct sl_conn *s);
/* A stream's output queue grew, or its module stopped streaming: send on. */
void sl_h2_stream_write(struct sl_conn *s);
/* sl_conn_close on a stream: reset it (unless it ended) and free it once the bytes it queued on
 * the connection went out. */
void sl_h2_stream_close(struct sl_conn *s);
/* The stream's memory is being freed (sl_conn's own part is the caller's). */
void sl_h2_stream_freed(struct sl_conn *s);
/* sl_conn_recv on a stream: request body bytes (HTTP/1.1 chunked coding when the client gave no
 * content-length), 0 at the end of the body, -EAGAIN (rd_ready cleared; on_body follows). */
ssize_t sl_h2_stream_recv(struct sl_conn *s, void *buf, size_t len);

/* The stream of session connection c whose response sends the file open as fd (the fd of a file
 * chunk on c's queue), or NULL. */
struct sl_conn *sl_h2_stream_of_file(struct sl_conn *c, int fd);

/* Line for `seekless -V`. */
void sl_h2_print_features(void);

#endif
