/* A write BIO for TLS connections without kernel TLS: records gathered, sent in few syscalls.
 *
 * OpenSSL writes each TLS record (at most 16 KiB of plaintext) to its write BIO as soon as it is
 * sealed; over a socket BIO that is one send() and, on the wire and on the receiving side, one
 * packet per record. This BIO keeps the records of a response in a buffer of the connection and
 * sends them with one sendmsg() when the buffer is full or when the connection sends them (its
 * output queue is empty, a read of file data is in flight, it waits for the client's next bytes
 * or closes): a 100 KiB file leaves in two sends instead of seven, and a new connection's
 * session tickets leave with its first response. The buffer
 * is allocated when the first record arrives and freed as soon as it is empty, so idle
 * connections keep none.
 */
#ifndef SL_TLS_BIO_H
#define SL_TLS_BIO_H

#include <openssl/bio.h>

/* Bytes gathered before they are sent (records are ~16 KiB: three, and the fourth goes with
 * them in the same sendmsg). */
#define SL_TLS_GATHER_CAP 65536

/* A new gathering write BIO on the non-blocking socket fd (not closed by the BIO). Writes are
 * accepted into the buffer while it has room; a write that does not fit sends the buffer and the
 * new bytes together, keeps what the socket did not take (up to the buffer's size) and reports
 * the rest as a retryable failure (BIO_should_write). BIO_flush (OpenSSL calls it at the end of
 * each handshake flight, ticket and alert) sends nothing and returns 1: the owner sends with
 * sl_tls_gather_send before it waits for the peer. BIO_wpending says how many bytes wait. NULL
 * when out of memory. */
BIO *sl_tls_gather_bio(int fd);

/* Send everything b (a BIO of sl_tls_gather_bio) gathered: 1 when it is all out, else -1 with
 * BIO_should_retry set (the socket is full) or not (errno says why). */
int sl_tls_gather_send(BIO *b);

#endif
