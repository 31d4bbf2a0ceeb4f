/* libFuzzer target for the rewrite/redirect rules (modules/urlrules.c) and the target
 * normalization they match against (sl_target_normalize).
 *
 * The input is "pattern\ntemplate\ntarget": the pattern and template are compiled as one
 * `url.rewrite-once` pair (most inputs are refused: that path must free what it built), and
 * when they compile, the target is normalized and the rule applied to it, and to the raw target
 * too, into a small buffer so the overflow path runs as well. Every path must return normally
 * and free everything.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "path.h"
#include "urlrules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0; /* a head is at most 8 KiB; regex blow-ups are PCRE2's limits */
    char *in = malloc(size + 1);
    if (!in) return 0;
    memcpy(in, data, size);
    in[size] = 0;
    char *tmpl = strchr(in, '\n');
    char *target = tmpl ? strchr(tmpl + 1, '\n') : NULL;
    if (!target) {
        free(in);
        return 0;
    }
    *tmpl++ = 0;
    *target++ = 0;
    size_t tlen = size - (size_t)(target - in);

    sl_cval val = {.type = SL_CV_STRING, .str = tmpl};
    sl_cval_item item = {.key = in, .val = &val};
    sl_cval arr = {.type = SL_CV_ARRAY, .items = &item, .n_items = 1};
    sl_urlrules *rs = NULL;
    char err[256];
    if (sl_urlrules_compile(&rs, &arr, "url.rewrite-once", 2, err, sizeof err) == 0) {
        pcre2_match_data *md = sl_urlrules_match_data();
        static const sl_url_env env = {.scheme = "http", .authority = "h:8", .port = 8};
        char norm[8192], out[64];
        size_t len, idx;
        ssize_t n = sl_target_normalize(target, tlen, norm, sizeof norm);
        if (md && n >= 0) sl_urlrules_apply(rs, md, norm, (size_t)n, &env, out, sizeof out, &len, &idx);
        if (md) sl_urlrules_apply(rs, md, target, tlen, &env, out, sizeof out, &len, &idx);
        pcre2_match_data_free(md);
    }
    sl_urlrules_free(rs);
    free(in);
    return 0;
}
