/* Output queue: what a response still has to send, as memory and file chunks. */
#ifndef SL_CHUNK_H
#define SL_CHUNK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One piece of output. A memory chunk owns data[off..end); a file chunk (fd >= 0) refers to the
 * bytes [off, end) of a file it does not own (the request closes the file). */
typedef struct sl_chunk {
    struct sl_chunk *next;
    int fd;
    off_t off, end;
    size_t cap;
    char data[];
} sl_chunk;

/* A FIFO of chunks. */
typedef struct sl_chunkq {
    sl_chunk *head, *tail;
} sl_chunkq;

/* Append n bytes, copying them into the tail memory chunk when they fit. 0 or -ENOMEM. */
int sl_chunkq_append_mem(sl_chunkq *q, const void *p, size_t n);
/* Put n bytes in front of everything queued (a response head written after its body was
 * queued). 0 or -ENOMEM. */
int sl_chunkq_prepend_mem(sl_chunkq *q, const void *p, size_t n);
/* printf into the queue. 0 or -ENOMEM. */
int sl_chunkq_printf(sl_chunkq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a va_list (which it uses up, as vprintf does). */
int sl_chunkq_vprintf(sl_chunkq *q, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Append bytes [off, off+len) of fd. 0 or -ENOMEM. */
int sl_chunkq_append_file(sl_chunkq *q, int fd, off_t off, off_t len);
/* Bytes still queued. */
uint64_t sl_chunkq_length(const sl_chunkq *q);
/* Remove the head chunk. */
void sl_chunkq_pop(sl_chunkq *q);
/* Free every chunk. */
void sl_chunkq_clear(sl_chunkq *q);
/* Send queued bytes to a non-blocking socket: memory with sendmsg (MSG_MORE while more follows),
 * files with sendfile. Stops after about `budget` bytes so one fast client cannot starve the rest.
 * Returns 0 when the queue is empty, 1 when the socket would block or the budget is spent, or a
 * negative errno; -ENODATA means a file ended before its chunk did (truncated while sent).
 * *sent is incremented by the bytes written. */
int sl_chunkq_write(sl_chunkq *q, int sock, size_t budget, uint64_t *sent);

/* sendfile() up to max bytes of the file chunk at the head of the queue (popping it when done).
 * Returns 0 after a write (maybe short: call again), 1 when the socket would block, or a
 * negative errno;
 * -ENODATA when the file ended before the chunk (truncated while sent). *sent and *done are
 * incremented by the bytes written. */
int sl_chunkq_sendfile(sl_chunkq *q, int sock, size_t max, uint64_t *sent, size_t *done);

/* Send the memory chunks at the head of the queue with one sendmsg() per batch (MSG_MORE when
 * more follows), stopping at the first file chunk. Returns 0 when the queue is empty or a file
 * chunk is next, 1 when the socket would block or `budget` bytes went out (never more), or a negative
 * errno. *sent and *done are incremented by the bytes written. */
int sl_chunkq_write_mem(sl_chunkq *q, int sock, size_t budget, uint64_t *sent, size_t *done);

/* sl_chunkq_write_mem, and when the memory chunks end at a file chunk whose first bytes are in a
 * buffer already (tail, tail_len bytes: a block read for it), those bytes leave in the same
 * sendmsg(), so a head and a small body take one system call and one segment. more: bytes of the
 * response follow the tail. *tail_sent: the tail bytes that went (counted in *sent and *done);
 * the caller advances its file chunk by them. */
int sl_chunkq_write_mem_tail(sl_chunkq *q, int sock, size_t budget, uint64_t *sent, size_t *done,
                             const void *tail, size_t tail_len, bool more, size_t *tail_sent);

#endif
