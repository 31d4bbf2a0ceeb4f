/* Custom error pages (server.errorfile-prefix): the files <prefix><status>.html, read at start-up. */
#ifndef SL_ERRPAGES_H
#define SL_ERRPAGES_H

#include <stddef.h>

/* Statuses an error page may exist for: 400..599. */
#define SL_ERRPAGE_FIRST 400
#define SL_ERRPAGE_LAST 599
/* Largest error page file accepted; a larger one is a start-up error (pages are held in memory). */
#define SL_ERRPAGE_MAX_BYTES (256 * 1024)

/* The error pages found for one prefix. */
typedef struct sl_errpages {
    char *body[SL_ERRPAGE_LAST - SL_ERRPAGE_FIRST + 1]; /* NULL: no file for that status */
    size_t len[SL_ERRPAGE_LAST - SL_ERRPAGE_FIRST + 1];
    unsigned n;                                         /* files found */
} sl_errpages;

/* Read every <prefix>NNN.html (NNN 400..599) that exists into a new set (*out). A prefix whose
 * directory does not exist, a file that cannot be read or is larger than SL_ERRPAGE_MAX_BYTES,
 * and a prefix for which no file exists at all are errors (-errno, message in err): lighttpd
 * silently sends its built-in page then, which hides a typo. Blocking: start-up only. */
int sl_errpages_load(const char *prefix, sl_errpages **out, char *err, size_t errlen);

/* The page for status, or NULL (then the built-in page is sent); its length in *len. */
const char *sl_errpages_get(const sl_errpages *e, int status, size_t *len);

/* Frees a set from sl_errpages_load (NULL is fine). */
void sl_errpages_free(sl_errpages *e);

#endif
