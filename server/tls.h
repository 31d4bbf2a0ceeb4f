/* HTTPS: the TLS transport under a connection, and lighttpd's ssl.* keys.
 *
 * A listener whose conf block (the top level with its $SERVER["socket"] block applied) says
 * ssl.engine = "enable" speaks TLS: each connection accepted on it gets an OpenSSL SSL object on
 * its socket, and the connection reads and writes through the functions below instead of
 * recv()/send(). Plain connections never call into this file after accept (a branch on c->tls).
 * Everything here runs on the connection's loop thread, except sl_tls_setup/sl_tls_free (main
 * thread, start-up and end) and the status hook.
 */
#ifndef SL_TLS_H
#define SL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "module.h"

struct sl_conn;
struct sl_server;

/* The ssl.* keys, the status counters; always loaded (lighttpd's "mod_openssl" names it). */
extern sl_module sl_mod_tls;

/* Start-up (also for -t), after the listeners are final: make an SSL_CTX for every listener
 * whose block enables ssl.engine (from its ssl.pemfile, ssl.privkey, ssl.ca-file,
 * ssl.openssl.ssl-conf-cmd, ssl.stapling-file and the client certificate keys), and install the
 * SNI callback where host blocks name certificates of their own. 0, or -1 with a message in
 * err (also for ssl.verifyclient.activate without ssl.ca-file). */
int sl_tls_setup(struct sl_server *srv, char *err, size_t errlen);
/* Free what sl_tls_setup made (the SSL_CTXs). */
void sl_tls_free(struct sl_server *srv);

/* Does the listener speak TLS? */
bool sl_tls_listener(const struct sl_server *srv, unsigned listener);

/* A connection was accepted on a TLS listener: give it its SSL object (the handshake runs in the
 * first reads) and point its file sends at the TLS path. 0 or -ENOMEM. */
int sl_tls_conn_start(struct sl_conn *c);
/* Free the connection's SSL object (its socket is closed by the caller). */
void sl_tls_conn_free(struct sl_conn *c);

/* Whether a read (SSL_read) or a write (SSL_write) may make progress now: OpenSSL may need the
 * other direction first (a handshake message to send while reading, WANT_WRITE; or the
 * opposite), and then the other direction's readiness counts. */
bool sl_tls_can_read(const struct sl_conn *c);
bool sl_tls_can_write(const struct sl_conn *c);

/* SSL_read: bytes read (> 0), 0 at the end of input (close_notify or the peer's FIN), -EAGAIN
 * (the readiness it waits for is cleared: rd_ready, or wr_ready when OpenSSL must write first),
 * or another negative errno (garbage, a failed handshake, a reset: close the connection). */
ssize_t sl_tls_recv(struct sl_conn *c, void *buf, size_t len);
/* SSL_write: bytes taken (> 0), -EAGAIN (readiness cleared as for reads), or a negative errno.
 * After -EAGAIN the same bytes must be offered again. Staged bytes (sl_tls_stage) go first, in
 * one record with the start of these. */
ssize_t sl_tls_send(struct sl_conn *c, const void *buf, size_t len);
/* Keep len bytes to go out in one record with what follows (a response head before its body):
 * len when they were kept, 0 when they do not fit (send them), or a negative errno. Whoever
 * stages must see to sl_tls_flush when nothing follows. */
ssize_t sl_tls_stage(struct sl_conn *c, const void *buf, size_t len);
/* Send what is staged, and the records gathered for sending (tls_bio.h): 0 when nothing is
 * left, -EAGAIN (the socket is full; a writable edge follows), or a negative errno. Bytes that
 * sl_tls_send accepted may wait until this is called: whoever sends calls it before waiting for
 * anything but writability (conn_write does when the queue is empty or a file read is in flight). */
int sl_tls_flush(struct sl_conn *c);
/* sl_tls_flush for the last response of a connection that closes after it: close_notify is
 * written behind it, so response and close_notify leave in one send (sl_tls_close_notify then
 * does nothing). The same results as sl_tls_flush. */
int sl_tls_flush_last(struct sl_conn *c);

/* The client certificate's variables of a connection on a listener with
 * ssl.verifyclient.activate, made once after its handshake with lighttpd's names and values:
 * SSL_CLIENT_VERIFY (SUCCESS, NONE, or FAILED:reason), and for a verified certificate
 * SSL_CLIENT_S_DN, SSL_CLIENT_S_DN_<FIELD> (CN, O, OU, EMAILADDRESS ...: named as CGI variables,
 * upper case, as lighttpd sends them), SSL_CLIENT_M_SERIAL and with ssl.verifyclient.exportcert
 * SSL_CLIENT_CERT (PEM). They go to the back ends' CGI variables (FastCGI). NULL on other
 * connections (plain, or no client certificate asked for). */
const sl_kvlist *sl_tls_client_env(const struct sl_conn *c);

/* Did the handshake choose HTTP/2 (ALPN "h2")? */
bool sl_tls_alpn_h2(const struct sl_conn *c);

/* Send close_notify once, when the handshake completed and nothing failed (best effort: the
 * socket is non-blocking and the connection closes anyway). Before shutdown(SHUT_WR) and close. */
void sl_tls_close_notify(struct sl_conn *c);

/* How file bytes go out over TLS in this process: "ktls-sendfile" when the kernel offers TLS
 * (tcp_available_ulp lists tls) and OpenSSL was built with it, else "buffered-ssl-write". */
const char *sl_tls_file_path(void);
/* Lines for `seekless -V`: the OpenSSL version and the TLS file path with its reason. */
void sl_tls_print_features(void);

#endif
