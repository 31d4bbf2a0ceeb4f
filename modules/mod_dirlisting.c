/* mod_dirlisting: an HTML index of a directory whose URL ends in '/' and that has no index file
 * (lighttpd's mod_dirlisting and its dir-listing.* keys).
 *
 * A directory can hold 100,000 entries, and reading it (getdents, a stat per entry) may wait
 * for the disk, so the whole listing is made by a job on a stat thread: open the directory
 * beneath the document root (openat2, so no path leaves it), look for an index file first (then
 * the static module answers as usual), read and filter the entries, stat each, sort, and write
 * the page into memory. The loop only starts the job and, when it is done, queues the page. At
 * most half the stat threads list at once (a page of 100,000 entries takes a while), so plain
 * file lookups always find a thread; further listings wait their turn in a bounded FIFO, and
 * beyond it the answer is 503 with Retry-After (lighttpd limits listings in progress too).
 *
 * The page keeps lighttpd's structure and class names (a table in div.list with td.n, td.m,
 * td.s, td.t, rows of directories tr.d, div.foot), so stylesheets written for lighttpd's
 * listings (dir-listing.external-css) style it; its own built-in style and the sorting are
 * written here: the rows come sorted by the server (directories first, then by name; ?C=N|M|S
 * and ?O=A|D pick another column and order, as Apache's index links do), no script needed.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pcre2.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chunk.h"
#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "loop.h"
#include "mime.h"
#include "mod_dirlisting.h"
#include "mod_static.h"
#include "module.h"
#include "openat.h"
#include "server.h"
#include "sl_version.h"
#include "status.h"
#include "threadpool.h"

/* dir-listing.exclude: compiled once. */
typedef struct dl_regexes {
    size_t n;
    pcre2_code *re[];
} dl_regexes;

typedef struct dl_conf {
    bool activate;              /* dir-listing.activate, server.dir-listing */
    bool hide_dotfiles;         /* dir-listing.hide-dotfiles */
    const char *external_css;   /* dir-listing.external-css */
    const char *external_js;    /* dir-listing.external-js */
    const char *encoding;       /* dir-listing.encoding: the charset named in Content-Type */
    const char *footer;         /* dir-listing.set-footer */
    const dl_regexes *exclude;  /* dir-listing.exclude */
    const char *readme;         /* dir-listing.show-readme: the file shown below (NULL: none) */
    const char *header;         /* dir-listing.show-header: the file shown above */
    bool hide_readme, hide_header;     /* dir-listing.hide-readme-file / -header-file */
    bool encode_readme, encode_header; /* dir-listing.encode-readme / -header */
    bool auto_layout;           /* dir-listing.auto-layout: a whole HTML page with its style */
} dl_conf;

#define SL_KEY_CONF dl_conf

sl_module sl_mod_dirlisting;

#define DCONF(c) SL_MODCONF((c)->conf, sl_mod_dirlisting, dl_conf)

/* Listings in the process: at most half the stat threads hold one at once, so plain lookups
 * always find a thread; the rest wait in the limiter, oldest first, any loop's, and a listing
 * that finishes starts the next. Beyond 256 waiting the answer is 503 with Retry-After. */
static sl_tlimit listings = SL_TLIMIT_INIT(256);
static _Atomic uint64_t n_listed; /* for the status page */

/* ---- keys ---- */

static void regexes_release(void *p)
{
    dl_regexes *r = p;
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) pcre2_code_free(r->re[i]);
    free(r);
}

static int prep_exclude(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!sl_cval_strings(v, false))
        return sl_key_fail(ctx, "dir-listing.exclude must be a list of regular expressions");
    dl_regexes *r = calloc(1, sizeof *r + v->n_items * sizeof r->re[0]);
    if (!r) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        int code;
        PCRE2_SIZE at;
        const char *pat = v->items[i].val->str;
        r->re[r->n] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &code, &at, NULL);
        if (!r->re[r->n]) {
            char msg[160];
            pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
            snprintf(ctx->err, ctx->errlen, "dir-listing.exclude \"%s\": %s at offset %zu", pat, msg,
                     (size_t)at);
            regexes_release(r);
            return -1;
        }
        r->n++;
    }
    *out = r;
    return 0;
}

/* show-readme / show-header: "enable" names the usual file, "disable" (or "") none, anything
 * else is the file's name (relative to the directory listed, or absolute). */
static int prep_shown(const sl_cval *v, const sl_key_ctx *ctx, void **out, const char *usual)
{
    const char *s = v->type == SL_CV_STRING ? v->str : NULL;
    if (v->type == SL_CV_INT && (v->num == 0 || v->num == 1)) s = v->num ? "enable" : "disable";
    if (!s)
        return sl_key_fail(ctx, "%s must be \"enable\", \"disable\" or a file name",
                           ctx->assign->key);
    if (!strcmp(s, "enable") || !strcmp(s, "true") || !strcmp(s, "on"))
        *out = strdup(usual);
    else if (!s[0] || !strcmp(s, "disable") || !strcmp(s, "false") || !strcmp(s, "off"))
        *out = NULL;
    else
        *out = strdup(s);
    if (s[0] && strcmp(s, "disable") && strcmp(s, "false") && strcmp(s, "off") && !*out)
        return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    return 0;
}

static int prep_readme(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep_shown(v, ctx, out, "README.txt");
}

static int prep_header(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep_shown(v, ctx, out, "HEADER.txt");
}

static int prep_cache(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    snprintf(ctx->err, ctx->errlen, "dir-listing.cache is not implemented: seekless lists a "
             "directory anew for each request, on a stat thread");
    return -1;
}

/* ---- the page ---- */

/* A growing buffer; on no memory it stops growing and says so at the end. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 16384;
        while (nc < b->len + n) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* Text in HTML (element content or a quoted attribute). */
static void sb_html(sbuf *b, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = s[i] == '&'    ? "&amp;"
                        : s[i] == '<'  ? "&lt;"
                        : s[i] == '>'  ? "&gt;"
                        : s[i] == '"'  ? "&quot;"
                        : s[i] == '\'' ? "&#39;"
                                       : NULL;
        if (!e) continue;
        sb_put(b, s + from, i - from);
        sb_str(b, e);
        from = i + 1;
    }
    sb_put(b, s + from, n - from);
}

/* Markup around a string: open and close as they are, text escaped (sb_html) between them. */
static void sb_wrap(sbuf *b, const char *open, const char *text, const char *close)
{
    sb_str(b, open);
    sb_html(b, text, strlen(text));
    sb_str(b, close);
}

/* A name as a relative URL: every byte but the unreserved ones %-encoded, so no name can end
 * the attribute, start a scheme ("a:b") or a query. */
static void sb_href(sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            sb_put(b, s + i, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            sb_put(b, e, 3);
        }
    }
}

void sl_dirlist_size_text(char *out, size_t cap, off_t size)
{
    uint64_t v = size > 0 ? (uint64_t)size : 0;
    if (v > 0 && v < 100) v += 99;
    unsigned unit = 0, rem;
    for (;;) {
        rem = (unsigned)(v & 1023);
        v >>= 10;
        if (v < 1024) break;
        unit++;
    }
    rem = rem / 100 > 9 ? 9 : rem / 100;
    if (v > 999) {
        v = 0;
        rem = 9;
        unit++;
    }
    snprintf(out, cap, "%llu.%u%c", (unsigned long long)v, rem, "KMGTPE"[unit]);
}

static void time_text(char *out, size_t cap, time_t t)
{
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(out, cap, "%Y-%b-%d %H:%M:%S", &tm))
        snprintf(out, cap, "-");
}

/* One entry. Names live in the listing's name buffer (at off). */
typedef struct dl_ent {
    size_t off, len;
    bool dir;
    off_t size;
    time_t mtime;
} dl_ent;

/* How the rows are ordered (?C= and ?O=). */
typedef struct dl_order {
    char column; /* 'N', 'M', 'S' */
    bool desc;
} dl_order;

/* qsort has no context argument: the sort runs on a thread, so the names go in a thread-local. */
static _Thread_local const char *sort_names;
static _Thread_local dl_order sort_order;

static int by_column(const void *pa, const void *pb)
{
    const dl_ent *a = pa, *b = pb;
    if (a->dir != b->dir) return a->dir ? -1 : 1; /* directories first, either order */
    int r = 0;
    if (sort_order.column == 'M')
        r = (a->mtime > b->mtime) - (a->mtime < b->mtime);
    else if (sort_order.column == 'S')
        r = (a->size > b->size) - (a->size < b->size);
    if (r == 0) r = strcmp(sort_names + a->off, sort_names + b->off);
    return sort_order.desc ? -r : r;
}

/* ?C=M;O=D (or with '&'): Apache's and lighttpd's column links. */
static dl_order order_of(const char *q)
{
    dl_order o = {'N', false};
    for (const char *p = q; p && *p;) {
        if (p[0] == 'C' && p[1] == '=' && (p[2] == 'N' || p[2] == 'M' || p[2] == 'S'))
            o.column = p[2];
        if (p[0] == 'O' && p[1] == '=' && (p[2] == 'A' || p[2] == 'D')) o.desc = p[2] == 'D';
        p += strcspn(p, ";&");
        if (*p) p++;
    }
    return o;
}

/* What a listing job needs from the request, copied so the thread touches no connection. */
typedef struct dl_job {
    sl_job job;
    sl_conn *c;
    const dl_conf *dc;             /* the request's conf (kept while the job is out) */
    const sl_strlist *index_files; /* index-file.names */
    const sl_mime_table *mime;
    int rootfd;
    bool follow;
    dl_order order;
    char *rel;                     /* the directory beneath rootfd ("." for the root) */
    char *url;                     /* the decoded URL path, for the title */
    /* results */
    int status;                    /* 0: the page is in page; else an error status */
    int err;                       /* negative errno behind it */
    bool has_index;                /* an index file is there: the static module answers */
    sbuf page;
} dl_job;

static bool excluded(const dl_regexes *ex, pcre2_match_data *md, const char *name, size_t len)
{
    for (size_t i = 0; ex && md && i < ex->n; i++)
        if (pcre2_match(ex->re[i], (PCRE2_SPTR)name, len, 0, 0, md, NULL) >= 0) return true;
    return false;
}

/* A README or HEADER file in the page: HTML-escaped in <pre> unless told otherwise. */
static void include_file(sbuf *b, int dfd, const char *name, bool encode, const char *cls,
                         bool follow)
{
    int fd = name[0] == '/' ? open(name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
                            : sl_open_beneath(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK, follow);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        if (encode) {
            sb_str(b, "<pre class=\"");
            sb_str(b, cls);
            sb_str(b, "\">");
        }
        char buf[8192];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
            if (encode)
                sb_html(b, buf, (size_t)n);
            else
                sb_put(b, buf, (size_t)n);
        }
        if (encode) sb_str(b, "</pre>\n");
    }
    close(fd);
}

static const char style[] =
    "<style>\n"
    "body{font-family:sans-serif;margin:1em 2em;background:#fafafa;color:#222}\n"
    "h2{font-weight:normal;margin-bottom:.6em}\n"
    "div.list{background:#fff;border-top:1px solid #999;border-bottom:1px solid #999;"
    "padding:.5em 0}\n"
    "table{border-collapse:collapse;margin-left:1em}\n"
    "th,td{font:90% monospace;text-align:left;padding:.1em 1.2em .1em 0}\n"
    "th a{color:inherit}\n"
    "td.s,th.s{text-align:right}\n"
    "a{color:#0645ad;text-decoration:none}a:hover{text-decoration:underline}\n"
    "div.foot{font:90% monospace;color:#777;padding-top:.4em}\n"
    "</style>\n";

/* The column heading: a link that sorts by it (the other way when it sorts now). */
static void heading(sbuf *b, const dl_order *o, char column, const char *cls, const char *title)
{
    sb_str(b, "<th class=\"");
    sb_str(b, cls);
    sb_str(b, "\"><a href=\"?C=");
    sb_put(b, &column, 1);
    sb_str(b, o->column == column && !o->desc ? ";O=D\">" : ";O=A\">");
    sb_str(b, title);
    sb_str(b, "</a></th>");
}

/* Read, filter, stat and sort the entries of dfd. 0 or a negative errno. */
static int read_entries(dl_job *j, int dfd, dl_ent **out, size_t *n_out, sbuf *names)
{
    const dl_conf *dc = j->dc;
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0); /* closedir closes its own */
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        int e = -errno;
        if (dup >= 0) close(dup);
        return e;
    }
    pcre2_match_data *md = dc->exclude ? pcre2_match_data_create(1, NULL) : NULL;
    dl_ent *ents = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t len = strlen(name);
        if (name[0] == '.' && (dc->hide_dotfiles || len == 1 || (len == 2 && name[1] == '.')))
            continue;
        if (dc->hide_readme && dc->readme && !strcmp(name, dc->readme)) continue;
        if (dc->hide_header && dc->header && !strcmp(name, dc->header)) continue;
        if (excluded(dc->exclude, md, name, len)) continue;
        struct stat st;
        /* Following symlinks, as lighttpd's listing does (fstatat without NOFOLLOW). */
        if (fstatat(dfd, name, &st, 0) != 0) continue; /* gone meanwhile, or a dangling link */
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            dl_ent *ne = realloc(ents, nc * sizeof *ne);
            if (!ne) {
                r = -ENOMEM;
                break;
            }
            ents = ne;
            cap = nc;
        }
        ents[n++] = (dl_ent){.off = names->len, .len = len, .dir = S_ISDIR(st.st_mode),
                             .size = st.st_size, .mtime = st.st_mtime};
        sb_put(names, name, len + 1);
    }
    closedir(d);
    pcre2_match_data_free(md);
    if (names->oom) r = -ENOMEM;
    if (r < 0) {
        free(ents);
        return r;
    }
    sort_names = names->p;
    sort_order = j->order;
    if (n) qsort(ents, n, sizeof *ents, by_column);
    *out = ents;
    *n_out = n;
    return 0;
}

static void write_page(dl_job *j, int dfd, const dl_ent *ents, size_t n, const char *names)
{
    const dl_conf *dc = j->dc;
    sbuf *b = &j->page;
    size_t ul = strlen(j->url);
    if (dc->auto_layout) {
        sb_str(b, "<!DOCTYPE html>\n<html>\n<head>\n");
        if (dc->encoding) {
            sb_wrap(b, "<meta charset=\"", dc->encoding, "\">\n");
        }
        sb_str(b, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        sb_str(b, "<title>Index of ");
        sb_html(b, j->url, ul);
        sb_str(b, "</title>\n");
        if (dc->external_css) {
            sb_wrap(b, "<link rel=\"stylesheet\" type=\"text/css\" href=\"", dc->external_css,
                    "\">\n");
        } else {
            sb_str(b, style);
        }
        sb_str(b, "</head>\n<body>\n");
    }
    if (dc->header) include_file(b, dfd, dc->header, dc->encode_header, "header", j->follow);
    sb_str(b, "<h2>Index of ");
    sb_html(b, j->url, ul);
    sb_str(b, "</h2>\n<div class=\"list\">\n<table>\n<thead><tr>");
    heading(b, &j->order, 'N', "n", "Name");
    heading(b, &j->order, 'M', "m", "Last Modified");
    heading(b, &j->order, 'S', "s", "Size");
    sb_str(b, "<th class=\"t\">Type</th></tr></thead>\n<tbody>\n");
    if (strcmp(j->url, "/"))
        sb_str(b, "<tr class=\"d\"><td class=\"n\"><a href=\"../\">..</a>/</td>"
                  "<td class=\"m\">&nbsp;</td><td class=\"s\">- &nbsp;</td>"
                  "<td class=\"t\">Directory</td></tr>\n");
    for (size_t i = 0; i < n && !b->oom; i++) {
        const dl_ent *e = &ents[i];
        const char *name = names + e->off;
        char when[64], size[32];
        time_text(when, sizeof when, e->mtime);
        sb_str(b, e->dir ? "<tr class=\"d\"><td class=\"n\"><a href=\"" : "<tr><td class=\"n\"><a href=\"");
        sb_href(b, name, e->len);
        sb_str(b, e->dir ? "/\">" : "\">");
        sb_html(b, name, e->len);
        sb_str(b, e->dir ? "</a>/</td><td class=\"m\">" : "</a></td><td class=\"m\">");
        sb_str(b, when);
        if (e->dir) {
            sb_str(b, "</td><td class=\"s\">- &nbsp;</td><td class=\"t\">Directory</td></tr>\n");
            continue;
        }
        sl_dirlist_size_text(size, sizeof size, e->size);
        const char *type = sl_mime_lookup(j->mime, name, e->len);
        sb_str(b, "</td><td class=\"s\">");
        sb_str(b, size);
        sb_wrap(b, "</td><td class=\"t\">", type ? type : "application/octet-stream",
                "</td></tr>\n");
    }
    sb_str(b, "</tbody>\n</table>\n</div>\n");
    if (dc->readme) include_file(b, dfd, dc->readme, dc->encode_readme, "readme", j->follow);
    if (dc->auto_layout) {
        const char *foot = dc->footer ? dc->footer : "seekless/" SL_VERSION;
        sb_wrap(b, "<div class=\"foot\">", foot, "</div>\n");
        if (dc->external_js) {
            sb_wrap(b, "<script type=\"text/javascript\" src=\"", dc->external_js,
                    "\"></script>\n");
        }
        sb_str(b, "</body>\n</html>\n");
    }
}

/* The synchronous core: the whole listing, on whatever thread runs it. */
static void list_dir(dl_job *j)
{
    int dfd = sl_open_beneath(j->rootfd, j->rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, j->follow);
    if (dfd < 0) {
        j->err = dfd;
        j->status = dfd == -ENOENT || dfd == -ENOTDIR ? 404 : sl_errno_to_status(dfd);
        return;
    }
    /* An index file is answered by the static module, as with listings off. */
    for (size_t i = 0; j->index_files && i < j->index_files->n; i++) {
        struct stat st;
        const char *ix = j->index_files->v[i];
        if (!strchr(ix, '/') && fstatat(dfd, ix, &st, 0) == 0 && S_ISREG(st.st_mode)) {
            j->has_index = true;
            close(dfd);
            return;
        }
    }
    dl_ent *ents = NULL;
    size_t n = 0;
    sbuf names = {0};
    int r = read_entries(j, dfd, &ents, &n, &names);
    if (r < 0) {
        j->err = r;
        j->status = r == -EACCES ? 403 : sl_errno_to_status(r);
    } else {
        write_page(j, dfd, ents, n, names.p);
        if (j->page.oom) {
            j->err = -ENOMEM;
            j->status = 503;
        }
    }
    free(ents);
    free(names.p);
    close(dfd);
}

static void job_free(dl_job *j)
{
    free(j->rel);
    free(j->url);
    free(j->page.p);
    free(j);
}

/* Answer from a finished job. */
static sl_hresult respond(sl_conn *c, dl_job *j)
{
    if (j->has_index) return SL_GO_ON;
    if (j->status) {
        c->status = j->status;
        c->error = j->err;
        if (j->status >= 500) sl_log("dir-listing %s: %s", c->path, strerror(-j->err));
        return SL_ERROR;
    }
    const dl_conf *dc = DCONF(c);
    char ct[96];
    snprintf(ct, sizeof ct, "text/html%s%s", dc->encoding ? ";charset=" : "",
             dc->encoding ? dc->encoding : "");
    sl_resp_begin(c, 200);
    sl_resp_header(c, "Content-Type", ct);
    sl_resp_end_headers(c, j->page.len);
    if (c->req.method != SL_METHOD_HEAD && sl_chunkq_append_mem(&c->out, j->page.p, j->page.len) < 0) {
        c->status = 503;
        return SL_ERROR;
    }
    return SL_FINISHED;
}

static void job_work(sl_job *job)
{
    list_dir((dl_job *)job);
}

static void job_done(sl_job *job)
{
    dl_job *j = (dl_job *)job;
    sl_conn *c = j->c;
    if (sl_tlimit_done(&listings, job)) {
        atomic_fetch_add_explicit(&n_listed, 1, memory_order_relaxed);
    } else { /* its turn came to a full pool */
        j->status = 503;
        j->err = -EAGAIN;
    }
    c->pending--;
    if (c->closed) {
        job_free(j);
        sl_conn_release(c); /* the client left while we listed */
        return;
    }
    sl_hresult r = respond(c, j);
    job_free(j);
    sl_conn_handled(c, r);
}

static sl_hresult dirlisting_handle(sl_conn *c)
{
    const dl_conf *dc = DCONF(c);
    if (!dc->activate || c->handler || !c->path_len || c->path[c->path_len - 1] != '/' ||
        (c->req.method != SL_METHOD_GET && c->req.method != SL_METHOD_HEAD))
        return SL_GO_ON;
    sl_server *srv = c->loop->srv;
    const char *rel;
    int rootfd = sl_conn_mapped(c, &rel);
    dl_job *j = calloc(1, sizeof *j);
    if (!j) {
        c->status = 503;
        return SL_ERROR;
    }
    *j = (dl_job){.job = {.work = job_work, .done = job_done}, .c = c, .dc = dc,
                  .index_files = &SL_MODCONF(c->conf, sl_mod_static, sl_static_conf)->index_files,
                  .mime = sl_core(c->conf)->mime,
                  .rootfd = rootfd,
                  .follow = sl_core(c->conf)->follow_symlink, .order = order_of(c->query),
                  .rel = strdup(rel), .url = strdup(c->path)};
    if (!j->rel || !j->url) {
        job_free(j);
        c->status = 503;
        return SL_ERROR;
    }
    if (!srv->stat_pool) {
        /* No stat threads configured: everything is on the loop by choice, this too. */
        list_dir(j);
        sl_hresult r = respond(c, j);
        job_free(j);
        return r;
    }
    if (sl_tlimit_submit(&listings, srv->stat_pool, c->loop->port, &j->job) < 0) {
        job_free(j);
        /* Too many listings: the client may come back shortly (lighttpd answers the same). */
        c->status = 503;
        sl_resp_error(c, 503);
        sl_resp_header(c, "Retry-After", "2");
        return SL_FINISHED;
    }
    c->pending++;
    return SL_WAIT;
}

/* Listings now and since start (any loop's thread: the counters are atomic or locked). */
static void dirlisting_status(sl_server *srv, sl_status_out *o)
{
    (void)srv;
    unsigned running, waiting;
    uint64_t refused, listed = atomic_load_explicit(&n_listed, memory_order_relaxed);
    sl_tlimit_get(&listings, &running, &waiting, &refused);
    sl_status_list(o, "dirlisting", "what");
    sl_status_item(o, "listings");
    sl_status_num(o, "running", running, false);
    sl_status_num(o, "waiting", waiting, false);
    sl_status_num(o, "done", listed, true);
    sl_status_num(o, "refused", refused, true);
    sl_status_item_end(o);
    sl_status_list_end(o);
}

static void dirlisting_defaults(void *p)
{
    dl_conf *dc = p;
    dc->hide_dotfiles = true;
    dc->encode_readme = dc->encode_header = true;
    dc->auto_layout = true;
}

/* lighttpd always loads mod_dirlisting (its listing is off until dir-listing.activate). */
sl_module sl_mod_dirlisting = {
    SL_MODULE_HEAD("dirlisting", dl_conf, "mod_dirlisting"),
    .keys = SL_KEYS(
        SL_KEY_AT("dir-listing.activate", SL_KEY_BOOL, activate),
        SL_KEY_AT("server.dir-listing", SL_KEY_BOOL, activate),
        SL_KEY_AT("dir-listing.hide-dotfiles", SL_KEY_BOOL, hide_dotfiles),
        SL_KEY_AT("dir-listing.external-css", SL_KEY_STRING, external_css),
        SL_KEY_AT("dir-listing.external-js", SL_KEY_STRING, external_js),
        SL_KEY_AT("dir-listing.encoding", SL_KEY_STRING, encoding),
        SL_KEY_AT("dir-listing.set-footer", SL_KEY_STRING, footer),
        SL_KEY_PREP("dir-listing.exclude", SL_KEY_VALUE, exclude, prep_exclude, regexes_release),
        SL_KEY_PREP("dir-listing.show-readme", SL_KEY_VALUE, readme, prep_readme, free),
        SL_KEY_PREP("dir-listing.show-header", SL_KEY_VALUE, header, prep_header, free),
        SL_KEY_AT("dir-listing.hide-readme-file", SL_KEY_BOOL, hide_readme),
        SL_KEY_AT("dir-listing.hide-header-file", SL_KEY_BOOL, hide_header),
        SL_KEY_AT("dir-listing.encode-readme", SL_KEY_BOOL, encode_readme),
        SL_KEY_AT("dir-listing.encode-header", SL_KEY_BOOL, encode_header),
        SL_KEY_AT("dir-listing.auto-layout", SL_KEY_BOOL, auto_layout),
        {"dir-listing.cache", SL_KEY_VALUE, 0, 0, prep_cache, NULL}),
    .always = true,
    .defaults = dirlisting_defaults,
    .handle = dirlisting_handle,
    .status = dirlisting_status,
};
