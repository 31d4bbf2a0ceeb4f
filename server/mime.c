/* Content-Type lookup.
 *
 * A table is an open-addressing hash of lower-cased suffixes plus the sorted list of the distinct
 * suffix lengths it contains. The hash (FNV-1a) is computed from the last byte of a key backwards,
 * so a lookup walks backwards from the end of the path once, folding in one byte at a time, and
 * whenever the number of bytes folded equals one of the table's suffix lengths the running hash is
 * exactly the hash of that suffix and one probe decides whether it is in the table. Lengths are
 * visited shortest first, so the last hit is the longest match. A request costs at most
 * max-suffix-length byte steps and about ten probes for the default table, independent of how many
 * entries there are.
 *
 * A table built by sl_mime_table_new lives in one allocation (header, slots, length list, strings).
 * The default table uses static storage filled once under pthread_once, from string literals that
 * are already lower-case.
 */
#include "mime.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mime_slot {
    const char *key; /* lower-case, not NUL-terminated in the hash sense: key_len counts */
    size_t key_len;
    const char *type;
    uint32_t hash;
};

struct sl_mime_table {
    struct mime_slot *slots; /* key == NULL marks a free slot; at most half are used */
    size_t mask;
    size_t *lens; /* distinct non-zero key lengths, ascending */
    size_t nlens;
    const char *fallback; /* type of the "" entry, or NULL */
    /* The first bytes of the keys (lower-case), as bits: a suffix that starts with any other
     * byte is not looked up. Most keys start with '.', so a name without one costs no probe. */
    uint64_t first[4];
};

static const char octet_stream[] = "application/octet-stream";

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Hash of s[0..len) taken from the last byte to the first, as lookups see it. */
static uint32_t hash_backwards(const char *s, size_t len)
{
    uint32_t h = FNV_OFFSET;
    while (len > 0) h = (h ^ lower((unsigned char)s[--len])) * FNV_PRIME;
    return h;
}

/* Finds the slot for key (already lower-case): its current slot or the free one to take. */
static struct mime_slot *find_slot(const sl_mime_table *t, const char *key, size_t len, uint32_t h)
{
    size_t i = h & t->mask;
    for (;;) {
        struct mime_slot *s = &t->slots[i];
        if (!s->key || (s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0)) return s;
        i = (i + 1) & t->mask;
    }
}

static void table_put(sl_mime_table *t, const char *key, size_t len, const char *type)
{
    if (len == 0) {
        t->fallback = type;
        return;
    }
    uint32_t h = hash_backwards(key, len);
    unsigned char f = (unsigned char)key[0];
    t->first[f >> 6] |= 1ull << (f & 63);
    struct mime_slot *s = find_slot(t, key, len, h);
    s->key = key;
    s->key_len = len;
    s->type = type;
    s->hash = h;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Collects the distinct key lengths into t->lens (room for one per slot in use). */
static void table_index_lengths(sl_mime_table *t)
{
    size_t n = 0;
    for (size_t i = 0; i <= t->mask; i++)
        if (t->slots[i].key) t->lens[n++] = t->slots[i].key_len;
    qsort(t->lens, n, sizeof *t->lens, cmp_size);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || t->lens[w - 1] != t->lens[i]) t->lens[w++] = t->lens[i];
    t->nlens = w;
}

/* Smallest power of two holding n keys at a load factor of at most one half. */
static size_t slot_count(size_t n)
{
    size_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* ---- the default table ---- */

#define TEXT(t) t "; charset=utf-8"

static const struct {
    const char *suffix, *type;
} default_pairs[] = {
    /* web */
    {".html", TEXT("text/html")},
    {".htm", TEXT("text/html")},
    {".xhtml", "application/xhtml+xml"},
    {".css", TEXT("text/css")},
    {".js", TEXT("text/javascript")},
    {".mjs", TEXT("text/javascript")},
    {".json", "application/json"},
    {".map", "application/json"},
    {".jsonld", "application/ld+json"},
    {".webmanifest", "application/manifest+json"},
    {".xml", "application/xml"},
    {".xsl", "application/xslt+xml"},
    {".rss", "application/rss+xml"},
    {".atom", "application/atom+xml"},
    {".wasm", "application/wasm"},
    /* text */
    {".txt", TEXT("text/plain")},
    {".text", TEXT("text/plain")},
    {".log", TEXT("text/plain")},
    {".asc", TEXT("text/plain")},
    {".csv", TEXT("text/csv")},
    {".tsv", TEXT("text/tab-separated-values")},
    {".md", TEXT("text/markdown")},
    {".markdown", TEXT("text/markdown")},
    {".ics", TEXT("text/calendar")},
    {".vtt", TEXT("text/vtt")},
    /* images */
    {".png", "image/png"},
    {".apng", "image/apng"},
    {".jpg", "image/jpeg"},
    {".jpeg", "image/jpeg"},
    {".jpe", "image/jpeg"},
    {".gif", "image/gif"},
    {".webp", "image/webp"},
    {".avif", "image/avif"},
    {".jxl", "image/jxl"},
    {".heic", "image/heic"},
    {".heif", "image/heif"},
    {".svg", "image/svg+xml"},
    {".ico", "image/x-icon"},
    {".bmp", "image/bmp"},
    {".tif", "image/tiff"},
    {".tiff", "image/tiff"},
    /* fonts */
    {".woff", "font/woff"},
    {".woff2", "font/woff2"},
    {".ttf", "font/ttf"},
    {".otf", "font/otf"},
    {".eot", "application/vnd.ms-fontobject"},
    /* audio */
    {".mp3", "audio/mpeg"},
    {".ogg", "audio/ogg"},
    {".oga", "audio/ogg"},
    {".opus", "audio/ogg"},
    {".wav", "audio/wav"},
    {".flac", "audio/flac"},
    {".m4a", "audio/mp4"},
    {".aac", "audio/aac"},
    {".weba", "audio/webm"},
    {".mid", "audio/midi"},
    {".midi", "audio/midi"},
    /* video and streaming */
    {".mp4", "video/mp4"},
    {".m4v", "video/mp4"},
    {".webm", "video/webm"},
    {".mkv", "video/x-matroska"},
    {".mov", "video/quicktime"},
    {".avi", "video/x-msvideo"},
    {".flv", "video/x-flv"},
    {".wmv", "video/x-ms-wmv"},
    {".ogv", "video/ogg"},
    {".mpeg", "video/mpeg"},
    {".mpg", "video/mpeg"},
    {".3gp", "video/3gpp"},
    {".ts", "video/mp2t"},
    {".m3u8", "application/vnd.apple.mpegurl"},
    {".mpd", "application/dash+xml"},
    /* archives and disk images */
    {".zip", "application/zip"},
    {".gz", "application/gzip"},
    {".tgz", "application/x-gtar"},
    {".tar.gz", "application/x-gtar"},
    {".tar", "application/x-tar"},
    {".bz2", "application/x-bzip2"},
    {".tbz2", "application/x-gtar"},
    {".tar.bz2", "application/x-gtar"},
    {".xz", "application/x-xz"},
    {".txz", "application/x-gtar"},
    {".tar.xz", "application/x-gtar"},
    {".zst", "application/zstd"},
    {".tar.zst", "application/x-gtar"},
    {".7z", "application/x-7z-compressed"},
    {".rar", "application/vnd.rar"},
    {".iso", "application/x-iso9660-image"},
    {".dmg", "application/x-apple-diskimage"},
    {".deb", "application/vnd.debian.binary-package"},
    {".rpm", "application/x-rpm"},
    {".jar", "application/java-archive"},
    {".apk", "application/vnd.android.package-archive"},
    /* documents */
    {".pdf", "application/pdf"},
    {".epub", "application/epub+zip"},
    {".rtf", "application/rtf"},
    {".doc", "application/msword"},
    {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {".xls", "application/vnd.ms-excel"},
    {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {".ppt", "application/vnd.ms-powerpoint"},
    {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
    {".odt", "application/vnd.oasis.opendocument.text"},
    {".ods", "application/vnd.oasis.opendocument.spreadsheet"},
    {".odp", "application/vnd.oasis.opendocument.presentation"},
    /* misc */
    {".torrent", "application/x-bittorrent"},
};

#define N_DEFAULT (sizeof default_pairs / sizeof *default_pairs)

static struct mime_slot default_slots[256];
static size_t default_lens[N_DEFAULT];
static sl_mime_table default_table = {default_slots, 255, default_lens, 0, NULL, {0}};
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

_Static_assert(2 * N_DEFAULT <= sizeof default_slots / sizeof *default_slots, "default table too full");

static void default_build(void)
{
    /* The literals are lower-case already, so they are used in place. */
    for (size_t i = 0; i < N_DEFAULT; i++)
        table_put(&default_table, default_pairs[i].suffix, strlen(default_pairs[i].suffix), default_pairs[i].type);
    table_index_lengths(&default_table);
}

const sl_mime_table *sl_mime_default(void)
{
    pthread_once(&default_once, default_build);
    return &default_table;
}

/* ---- user tables ---- */

/* Rounds an offset up to the alignment of everything placed after the header. */
static size_t align_up(size_t x)
{
    const size_t a = _Alignof(max_align_t);
    return (x + a - 1) & ~(a - 1);
}

sl_mime_table *sl_mime_table_new(const char *const *suffixes, const char *const *types, size_t n)
{
    size_t nkeys = 0, strbytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!suffixes[i] || !types[i]) return NULL;
        size_t kl = strlen(suffixes[i]), tl = strlen(types[i]);
        if (kl > 0) nkeys++;
        /* Overflow here would need more memory than exists; checked anyway. */
        if (strbytes + kl + tl + 2 < strbytes) return NULL;
        strbytes += kl + tl + 2;
    }
    size_t cap = slot_count(nkeys);
    size_t off_slots = align_up(sizeof(sl_mime_table));
    size_t off_lens = align_up(off_slots + cap * sizeof(struct mime_slot));
    size_t off_str = off_lens + (nkeys ? nkeys : 1) * sizeof(size_t);
    char *mem = calloc(1, off_str + strbytes);
    if (!mem) return NULL;

    sl_mime_table *t = (sl_mime_table *)mem;
    t->slots = (struct mime_slot *)(mem + off_slots);
    t->mask = cap - 1;
    t->lens = (size_t *)(mem + off_lens);
    char *str = mem + off_str;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(suffixes[i]), tl = strlen(types[i]);
        char *key = str, *type = str + kl + 1;
        for (size_t k = 0; k < kl; k++) key[k] = (char)lower((unsigned char)suffixes[i][k]);
        key[kl] = '\0';
        memcpy(type, types[i], tl + 1);
        str += kl + tl + 2;
        table_put(t, key, kl, type);
    }
    table_index_lengths(t);
    return t;
}

void sl_mime_table_free(sl_mime_table *t)
{
    if (t == &default_table) return;
    free(t);
}

const char *sl_mime_lookup(const sl_mime_table *t, const char *path, size_t len)
{
    if (!t) t = sl_mime_default();
    const char *best = NULL;
    uint32_t h = FNV_OFFSET;
    size_t folded = 0;
    for (size_t j = 0; j < t->nlens && t->lens[j] <= len; j++) {
        size_t want = t->lens[j];
        while (folded < want) {
            h = (h ^ lower((unsigned char)path[len - 1 - folded])) * FNV_PRIME;
            folded++;
        }
        const char *tail = path + len - want;
        unsigned char f = lower((unsigned char)tail[0]);
        if (!(t->first[f >> 6] >> (f & 63) & 1)) continue;
        for (size_t i = h & t->mask; t->slots[i].key; i = (i + 1) & t->mask) {
            const struct mime_slot *s = &t->slots[i];
            if (s->hash != h || s->key_len != want) continue;
            size_t k = 0;
            while (k < want && lower((unsigned char)tail[k]) == (unsigned char)s->key[k]) k++;
            if (k == want) {
                best = s->type;
                break;
            }
        }
    }
    if (best) return best;
    return t->fallback ? t->fallback : octet_stream;
}
