/* fcgi-stat-accel: the FastCGI process (libfcgi glue, options, threads, signals).
 *
 * The web server forwards a request here instead of stat()ing the file in its event loop; we do
 * the blocking lookup (and readahead) in one of N worker threads and answer X-Sendfile, so the
 * server's own open() later hits warm caches. The listening socket is fd 0 when started by
 * spawn-fcgi (which may fork several such processes with -F), or one we open with --listen. Each
 * worker owns an FCGX_Request and runs its own FCGX_Accept_r loop on the shared listening socket;
 * Linux needs no accept serialization, and a mutex would stall every worker behind one whose kept-
 * alive connection is idle. All path logic lives in accel.c. SIGTERM/SIGINT end the process at
 * once with status 0: nothing here holds state worth flushing, and a worker blocked in accept()
 * cannot be woken portably any other way. SIGPIPE is ignored so a client that goes away mid-
 * answer only fails that write.
 *
 * The workers run as SCHED_BATCH unless --sched normal says otherwise. The accelerator usually
 * shares its cores with the web server that asks it, and a worker woken by a request would
 * otherwise preempt that server's event loop at once (the scheduler favours a thread that has
 * slept): measured with seekless on one core, 1.5 involuntary switches of its loop per request.
 * A batch thread never preempts on wakeup; it runs when the loop has finished its round of events
 * and waits, or at the next tick, so the answers of a round come in one go (bench/results/
 * 2026-11-28-accel-sched-hot/NOTE.md).
 */
#include "accel.h"
#include "sl_version.h"

#include <errno.h>
#include <fcgiapp.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 1024

struct options {
    const char *root;          /* --root, or NULL to use each request's DOCUMENT_ROOT */
    char root_norm[SL_ACCEL_PATH_MAX];
    int rootfd;
    int threads;
    size_t readahead;
    bool lighttpd_header;
    bool sched_normal;         /* --sched normal: keep SCHED_OTHER instead of SCHED_BATCH */
    const char *listen;        /* --listen, or NULL for the spawn-fcgi socket on fd 0 */
};

static struct options opts = {.rootfd = -1, .readahead = SL_ACCEL_READAHEAD_DEFAULT};
static int listen_fd;
/* The unix socket path we created with --listen, removed on SIGTERM (unlink is signal-safe). */
static char unix_path[SL_ACCEL_PATH_MAX];

static void on_term(int sig)
{
    if (unix_path[0])
        unlink(unix_path);
    _exit(0);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fcgi-stat-accel [options]\n"
            "FastCGI responder that checks a file under the document root, prefetches it and\n"
            "answers X-Sendfile. Started by spawn-fcgi (socket on fd 0) or with --listen.\n"
            "  --listen ADDR       listen on HOST:PORT or unix:/path instead of fd 0\n"
            "  --root DIR          document root (default: each request's DOCUMENT_ROOT)\n"
            "  --threads N         worker threads (default: $PHP_FCGI_CHILDREN, else 16)\n"
            "  --readahead BYTES   bytes to prefetch per file, 0 = open+fstat only (default 1048576)\n"
            "  --lighttpd-header   also send X-LIGHTTPD-send-file\n"
            "  --sched POLICY      batch (default: a woken worker never preempts the web server\n"
            "                      on a shared core) or normal\n"
            "  --help, --version\n");
}

static int parse_ulong(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static void log_refusal(FCGX_Request *req, const sl_accel_answer *a, const char *script,
                        const char *path_info)
{
    // Request values are attacker-controlled: escape them so one refusal stays one log line.
    char s[1024], p[1024];
    sl_accel_escape(script ? script : "(none)", s, sizeof s);
    sl_accel_escape(path_info ? path_info : "", p, sizeof p);
    FCGX_FPrintF(req->err, "fcgi-stat-accel: %d %s: SCRIPT_FILENAME=%s%s%s%s%s\n", a->status,
                 a->reason, s, p[0] ? " PATH_INFO=" : "", p, a->error ? " errno=" : "",
                 a->error ? strerror(-a->error) : "");
}

static void handle(FCGX_Request *req)
{
    sl_accel_answer ans;
    const char *script = FCGX_GetParam("SCRIPT_FILENAME", req->envp);
    const char *path_info = FCGX_GetParam("PATH_INFO", req->envp);
    char docroot[SL_ACCEL_PATH_MAX];
    int rootfd = opts.rootfd;
    const char *root = opts.root_norm;

    if (!opts.root) {
        const char *dr = FCGX_GetParam("DOCUMENT_ROOT", req->envp);
        rootfd = dr ? sl_accel_root_open(dr, docroot, sizeof docroot) : -EINVAL;
        root = docroot;
    }
    if (rootfd < 0) {
        // A missing or unusable document root is the web server's configuration, not the client's.
        ans.status = 500;
        ans.path[0] = '\0';
        ans.reason = "no usable DOCUMENT_ROOT";
        ans.error = rootfd;
    } else {
        sl_accel_resolve(rootfd, root, script, path_info, opts.readahead, &ans);
        if (!opts.root)
            close(rootfd);
    }

    char head[2 * SL_ACCEL_PATH_MAX + 256];
    int n = sl_accel_format(&ans, opts.lighttpd_header, head, sizeof head);
    if (n < 0) {
        ans.status = 500;
        ans.reason = "answer does not fit";
        n = sl_accel_format(&ans, false, head, sizeof head);
    }
    if (ans.status != 200)
        log_refusal(req, &ans, script, path_info);
    // A client gone mid-answer makes these fail (SIGPIPE is ignored); FCGX_Finish_r cleans up.
    FCGX_PutStr(head, n, req->out);
}

static void *worker_main(void *arg)
{
    FCGX_Request req;
    if (FCGX_InitRequest(&req, listen_fd, 0) != 0) {
        fprintf(stderr, "fcgi-stat-accel: FCGX_InitRequest failed\n");
        return NULL;
    }
    for (;;) {
        if (FCGX_Accept_r(&req) < 0) {
            // accept() failed (e.g. EMFILE): back off briefly instead of spinning, then retry.
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        handle(&req);
        FCGX_Finish_r(&req);
    }
    return NULL;
}

static int open_listener(const char *addr)
{
    const char *path = addr;
    if (strncmp(addr, "unix:", 5) == 0)
        path = addr + 5;
    if (path[0] == '/') {
        if (strlen(path) >= sizeof unix_path)
            return -ENAMETOOLONG;
        // Remove a stale socket from an earlier run; bind would fail with EADDRINUSE otherwise.
        unlink(path);
    } else if (!strchr(addr, ':')) {
        return -EINVAL;
    }
    int fd = FCGX_OpenSocket(path, 1024);
    if (fd < 0)
        return -EADDRNOTAVAIL;
    if (path[0] == '/')
        snprintf(unix_path, sizeof unix_path, "%s", path);
    return fd;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"root", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},
        {"readahead", required_argument, NULL, 'a'},
        {"lighttpd-header", no_argument, NULL, 'L'},
        {"sched", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    unsigned long long v;
    const char *children = getenv("PHP_FCGI_CHILDREN");
    opts.threads = 16;
    if (children && *children) {
        if (parse_ulong(children, MAX_THREADS, &v) < 0 || v == 0) {
            fprintf(stderr, "fcgi-stat-accel: bad PHP_FCGI_CHILDREN '%s' (1..%d)\n", children,
                    MAX_THREADS);
            return 2;
        }
        opts.threads = (int)v;
    }
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            opts.listen = optarg;
            break;
        case 'r':
            opts.root = optarg;
            break;
        case 't':
            if (parse_ulong(optarg, MAX_THREADS, &v) < 0 || v == 0) {
                fprintf(stderr, "fcgi-stat-accel: bad --threads '%s' (1..%d)\n", optarg, MAX_THREADS);
                return 2;
            }
            opts.threads = (int)v;
            break;
        case 'a':
            if (parse_ulong(optarg, (unsigned long long)1 << 40, &v) < 0) {
                fprintf(stderr, "fcgi-stat-accel: bad --readahead '%s'\n", optarg);
                return 2;
            }
            opts.readahead = (size_t)v;
            break;
        case 'L':
            opts.lighttpd_header = true;
            break;
        case 's':
            if (strcmp(optarg, "batch") && strcmp(optarg, "normal")) {
                fprintf(stderr, "fcgi-stat-accel: bad --sched '%s' (batch or normal)\n", optarg);
                return 2;
            }
            opts.sched_normal = !strcmp(optarg, "normal");
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("fcgi-stat-accel %s\n", SL_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fcgi-stat-accel: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (opts.root) {
        opts.rootfd = sl_accel_root_open(opts.root, opts.root_norm, sizeof opts.root_norm);
        if (opts.rootfd < 0) {
            fprintf(stderr, "fcgi-stat-accel: --root %s: %s\n", opts.root, strerror(-opts.rootfd));
            return 1;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (FCGX_Init() != 0) {
        fprintf(stderr, "fcgi-stat-accel: FCGX_Init failed\n");
        return 1;
    }
    if (opts.listen) {
        listen_fd = open_listener(opts.listen);
        if (listen_fd < 0) {
            fprintf(stderr, "fcgi-stat-accel: cannot listen on '%s': %s\n", opts.listen,
                    strerror(-listen_fd));
            return 1;
        }
    } else {
        int acc = 0;
        socklen_t len = sizeof acc;
        if (getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc) {
            fprintf(stderr, "fcgi-stat-accel: fd 0 is not a listening socket; "
                            "start under spawn-fcgi or use --listen\n");
            return 1;
        }
        listen_fd = 0;
    }

    if (!opts.sched_normal) {
        // Set before the workers start: threads inherit their creator's policy. Unprivileged
        // processes may always move from SCHED_OTHER to SCHED_BATCH; should it fail anyway (a
        // real-time policy set from outside, a seccomp filter), the workers still serve.
        struct sched_param sp = {.sched_priority = 0};
        if (sched_setscheduler(0, SCHED_BATCH, &sp) != 0)
            fprintf(stderr, "fcgi-stat-accel: SCHED_BATCH not set (%s); workers keep the "
                            "current policy\n", strerror(errno));
    }

    pthread_t tids[MAX_THREADS];
    int started = 0;
    for (int i = 0; i < opts.threads; i++) {
        int r = pthread_create(&tids[started], NULL, worker_main, NULL);
        if (r != 0) {
            fprintf(stderr, "fcgi-stat-accel: pthread_create: %s\n", strerror(r));
            break;
        }
        started++;
    }
    if (started == 0)
        return 1;
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    // Workers only return when FCGX_InitRequest failed: nothing is serving any more.
    return 1;
}
