/* Content-Type from a file name: a table of (suffix, type) pairs with longest-suffix lookup. Pure. */
#ifndef SL_MIME_H
#define SL_MIME_H

#include <stddef.h>

/* An immutable suffix -> type table; safe to share between threads once built. */
typedef struct sl_mime_table sl_mime_table;

/* The built-in table: common web, text, image, font, audio/video, archive and document types;
 * every text/... type carries "; charset=utf-8". Static, never freed; built on first call
 * (thread-safe). */
const sl_mime_table *sl_mime_default(void);

/* Build a table from n (suffix, type) pairs as in `mimetype.assign`. A suffix is matched against
 * the end of the looked-up string, so ".html" matches "/a/index.html", "README" matches
 * "/a/README" (and "/a/NOTREADME"; write "/README" to require the whole name), and "" is the
 * fallback for everything else. Suffixes are case-insensitive (ASCII); for duplicates (compared
 * case-insensitively) the last pair wins. The strings are copied. NULL on ENOMEM or when a
 * suffix or type is NULL. */
sl_mime_table *sl_mime_table_new(const char *const *suffixes, const char *const *types, size_t n);

/* Free a table from sl_mime_table_new. NULL and the default table are accepted and ignored. */
void sl_mime_table_free(sl_mime_table *t);

/* Content-Type for path[0..len): the type of the longest suffix in t that path ends with
 * (case-insensitively), so ".tar.gz" beats ".gz"; else the "" entry if any; else
 * "application/octet-stream". t NULL means the default table. Costs one backwards pass over at
 * most as many bytes as the longest suffix plus one hash probe per distinct suffix length. */
const char *sl_mime_lookup(const sl_mime_table *t, const char *path, size_t len);

#endif
