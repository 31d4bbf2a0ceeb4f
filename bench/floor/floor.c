/* floor: the least an HTTP/1.1 server can do per request on this kernel (a calibration, not a
 * server).
 *
 * bench/run measures seekless against nginx; this program answers a different question: how
 * fast can any server serve the same hot workload here, with the same clients? It does only what
 * the workload needs and nothing a real server must: one thread, one epoll set, every connection
 * registered once (edge-triggered, for reading and writing, never modified), requests found by
 * their blank line and answered GET-only, the path opened and fstat()ed (or taken from a table
 * of open descriptors with --keep-open: files are never checked again, so nothing may change
 * under it), a fixed short head sent with MSG_MORE so that it leaves in the same segment as the
 * first bytes of sendfile(), and the descriptor closed. No validation beyond refusing "..", no
 * Date, no conditional requests, no logging, no limits. A row of it in bench/run is the ceiling
 * of a server whose user space cost nothing: the kernel's own share of each request, which
 * nginx and seekless pay too. It listens on 127.0.0.1 only.
 *
 * usage: floor PORT ROOT [--keep-open N]
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define REQ_MAX 8192

typedef struct conn {
    int fd;
    size_t have;          /* bytes of request data in buf */
    int file;             /* the file being sent, or -1 */
    int keep;             /* the file's descriptor belongs to the --keep-open table */
    off_t off, end;
    char head[128];
    size_t head_len, head_off;
    char buf[REQ_MAX];
} conn;

/* --keep-open: path -> (fd, size), open addressing; full means files open and close as usual. */
typedef struct slot {
    char *path;
    int fd;
    off_t size;
} slot;

static int rootfd;
static slot *keep;
static size_t keep_cap, keep_n, keep_max;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Opens path (relative to the root); -1 when it cannot be served. */
static int open_file(const char *path, off_t *size, int *kept)
{
    *kept = 0;
    size_t i = 0;
    if (keep) {
        for (i = fnv(path) & (keep_cap - 1); keep[i].path; i = (i + 1) & (keep_cap - 1))
            if (!strcmp(keep[i].path, path)) {
                *size = keep[i].size;
                *kept = 1;
                return keep[i].fd;
            }
    }
    int fd = openat(rootfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    *size = st.st_size;
    if (keep && keep_n < keep_max) {
        keep[i].path = strdup(path);
        if (keep[i].path) {
            keep[i].fd = fd;
            keep[i].size = st.st_size;
            keep_n++;
            *kept = 1;
        }
    }
    return fd;
}

static void conn_close(conn *c)
{
    if (c->file >= 0 && !c->keep) close(c->file);
    close(c->fd);
    free(c);
}

/* Sends what is pending; 1 when the answer is out, 0 when the socket is full, -1 on error. */
static int send_answer(conn *c)
{
    while (c->head_off < c->head_len) {
        ssize_t n = send(c->fd, c->head + c->head_off, c->head_len - c->head_off,
                         MSG_NOSIGNAL | (c->file >= 0 ? MSG_MORE : 0));
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->head_off += (size_t)n;
    }
    while (c->file >= 0 && c->off < c->end) {
        ssize_t n = sendfile(c->fd, c->file, &c->off, (size_t)(c->end - c->off));
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        if (n == 0) return -1; /* the file shrank: nothing honest left to send */
    }
    if (c->file >= 0 && !c->keep) close(c->file);
    c->file = -1;
    c->head_len = c->head_off = 0;
    return 1;
}

/* Starts the answer to the request in buf[0..len); 0, or -1 to close the connection. */
static int start_answer(conn *c, size_t len)
{
    char *sp = memchr(c->buf, ' ', len);
    if (!sp || sp - c->buf != 3 || memcmp(c->buf, "GET", 3)) return -1;
    char *p = sp + 1, *q = memchr(p, ' ', len - (size_t)(p - c->buf));
    if (!q || *p != '/') return -1;
    *q = '\0';
    char *query = strchr(p, '?');
    if (query) *query = '\0';
    const char *rel = p[1] ? p + 1 : ".";
    off_t size = 0;
    c->file = strstr(rel, "..") ? -1 : open_file(rel, &size, &c->keep);
    if (c->file < 0)
        c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                       "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    else
        c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                       "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream"
                                       "\r\nContent-Length: %lld\r\n\r\n", (long long)size);
    c->head_off = 0;
    c->off = 0;
    c->end = size;
    return 0;
}

/* Reads and answers until the socket has nothing more to give or take; -1 to close. */
static int serve(conn *c)
{
    for (;;) {
        if (c->head_len) {
            int r = send_answer(c);
            if (r <= 0) return r;
        }
        char *end = c->have >= 4 ? memmem(c->buf, c->have, "\r\n\r\n", 4) : NULL;
        if (end) {
            size_t len = (size_t)(end - c->buf) + 4;
            if (start_answer(c, len) < 0) return -1;
            memmove(c->buf, c->buf + len, c->have - len);
            c->have -= len;
            continue;
        }
        if (c->have == sizeof c->buf) return -1;
        ssize_t n = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
        if (n == 0) return -1;
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->have += (size_t)n;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 5 && !strcmp(argv[3], "--keep-open"))) {
        fprintf(stderr, "usage: floor PORT ROOT [--keep-open N]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    rootfd = open(argv[2], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (port <= 0 || port > 65535 || rootfd < 0) {
        fprintf(stderr, "floor: bad port or root\n");
        return 2;
    }
    if (argc == 5) {
        /* A number, and no more descriptors than any process may hold. */
        char *end;
        errno = 0;
        unsigned long n = strtoul(argv[4], &end, 10);
        if (argv[4][0] < '0' || argv[4][0] > '9' || *end || errno || n > (1ul << 24)) {
            fprintf(stderr, "floor: bad --keep-open '%s' (0..16777216)\n", argv[4]);
            return 2;
        }
        keep_max = (size_t)n;
        for (keep_cap = 1024; keep_cap < 2 * keep_max; keep_cap *= 2) {}
        keep = calloc(keep_cap, sizeof *keep);
        if (!keep) return 1;
    }
    /* As many descriptors as the hard limit allows, as nginx and seekless take. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 1024) < 0) {
        perror("floor: listen");
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    if (!c) {
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    c->file = -1;
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                              .data.ptr = c};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) < 0 || serve(c) < 0) conn_close(c);
                }
                continue;
            }
            if (serve(c) < 0) conn_close(c);
        }
    }
}
