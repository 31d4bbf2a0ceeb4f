/* Directory listings (mod_dirlisting.c): what other code and the unit tests use of it. */
#ifndef SL_MOD_DIRLISTING_H
#define SL_MOD_DIRLISTING_H

#include <stddef.h>
#include <sys/types.h>

/* The size column's text, as lighttpd shows sizes: units of 1024 from K up with one decimal
 * (the tenths are the remainder's hundreds, at most 9), a value past 999 as 0.9 of the next
 * unit, a file of 1 to 99 bytes as 0.1K ("0.0K" only when empty). */
void sl_dirlist_size_text(char *out, size_t cap, off_t size);

#endif
