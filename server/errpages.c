/* Custom error pages: server.errorfile-prefix.
 *
 * lighttpd opens <prefix><status>.html through its stat cache for every error it answers. Here
 * the pages are read once, when the config is loaded (start-up, -t and the graceful restart on
 * SIGUSR1, which loads the config anew), and kept in memory: an error answer then never touches
 * the file system, so it cannot block the event loop whatever the cache holds, and a page is the
 * same size as the built-in one to send. The price is that an edited page shows after a reload,
 * not at once; error pages change rarely, and the files are few and small (capped).
 */
#include "errpages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_PAGES (SL_ERRPAGE_LAST - SL_ERRPAGE_FIRST + 1)

/* Reads one regular file of at most SL_ERRPAGE_MAX_BYTES whole. 0 with *body set, 1 when it does
 * not exist, or -errno. */
static int read_page(const char *path, char **body, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno == ENOENT ? 1 : -errno;
    struct stat st;
    int r = 0;
    char *b = NULL;
    if (fstat(fd, &st) < 0) {
        r = -errno;
    } else if (!S_ISREG(st.st_mode)) {
        r = -EISDIR;
    } else if (st.st_size > SL_ERRPAGE_MAX_BYTES) {
        r = -EFBIG;
    } else if (!(b = malloc((size_t)st.st_size + 1))) {
        r = -ENOMEM;
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                r = -errno;
                break;
            }
            if (n == 0) break; /* shrank while we read: send what is there */
            got += (size_t)n;
        }
        *len = got;
    }
    close(fd);
    if (r < 0) {
        free(b);
        return r;
    }
    *body = b;
    return 0;
}

int sl_errpages_load(const char *prefix, sl_errpages **out, char *err, size_t errlen)
{
    size_t pl = strlen(prefix);
    char *path = malloc(pl + 16);
    sl_errpages *e = calloc(1, sizeof *e);
    if (!path || !e) {
        free(path);
        free(e);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int r = 0;
    for (int st = SL_ERRPAGE_FIRST; st <= SL_ERRPAGE_LAST && r >= 0; st++) {
        snprintf(path, pl + 16, "%s%d.html", prefix, st);
        int i = st - SL_ERRPAGE_FIRST;
        r = read_page(path, &e->body[i], &e->len[i]);
        if (r < 0) {
            snprintf(err, errlen, "%s: %s%s", path, strerror(-r),
                     r == -EFBIG ? " (error pages are held in memory: 256 KiB at most)" : "");
        } else if (r == 0) {
            e->n++;
        } else if (errno == ENOENT && st == SL_ERRPAGE_FIRST) {
            /* A missing directory shows on the first try: say so rather than "no pages". */
            char *slash = strrchr(path, '/');
            if (slash && slash != path) {
                *slash = 0;
                struct stat sb;
                if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
                    snprintf(err, errlen, "%s is not a directory", path);
                    r = -ENOTDIR;
                }
            }
        }
    }
    if (r >= 0 && e->n == 0) {
        snprintf(err, errlen, "no file %sNNN.html exists (NNN a status from 400 to 599)", prefix);
        r = -ENOENT;
    }
    free(path);
    if (r < 0) {
        sl_errpages_free(e);
        return r;
    }
    *out = e;
    return 0;
}

const char *sl_errpages_get(const sl_errpages *e, int status, size_t *len)
{
    if (!e || status < SL_ERRPAGE_FIRST || status > SL_ERRPAGE_LAST) return NULL;
    *len = e->len[status - SL_ERRPAGE_FIRST];
    return e->body[status - SL_ERRPAGE_FIRST];
}

void sl_errpages_free(sl_errpages *e)
{
    if (!e) return;
    for (size_t i = 0; i < N_PAGES; i++) free(e->body[i]);
    free(e);
}
