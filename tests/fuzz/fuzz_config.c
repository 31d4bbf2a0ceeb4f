/* libFuzzer target for the config parser.
 *
 * The input bytes are parsed as one config string with includes disabled (no base directory, so
 * the fuzzer never touches the file system), collecting every error: the parser recovers after
 * each one, so the recovery code (skipping to the next statement, placeholder blocks for broken
 * conditions) runs on whatever the fuzzer builds. The tree, partial or not, is then walked and
 * evaluated against a fixed request so that the else-chain and pattern-matching code runs on
 * every shape. Every path must return normally and free everything.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config_parse.h"

static void count_assign(const sl_cblock *b, const sl_cassign *a, void *ud)
{
    size_t *n = ud;
    /* Touch the value so a dangling pointer in the tree shows up under ASan. */
    *n += a->val->type == SL_CV_STRING ? strlen(a->val->str) : a->val->n_items;
    *n += b->line > 0;
}

static void count_block(const sl_cblock *b, void *ud)
{
    size_t *n = ud;
    *n += b->pattern ? strlen(b->pattern) : 0;
}

static void apply(const sl_cassign *a, void *ud)
{
    size_t *n = ud;
    *n += strlen(a->key) + strlen(a->file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_config_errors errs = {0};
    sl_config_tree *t =
        sl_config_parse_string_all((const char *)data, size, "fuzz.conf", NULL, &errs);
    /* Every error names the file; a failure (no tree) or a partial tree leaves at least one. */
    for (size_t i = 0; i < errs.n; i++)
        if (strncmp(errs.msg[i], "fuzz.conf", 9) != 0) __builtin_trap();
    if ((!t || t->partial) != sl_config_errors_any(&errs)) __builtin_trap();
    if (errs.n > SL_CONFIG_MAX_ERRORS + 1) __builtin_trap();
    sl_config_errors_free(&errs);
    if (!t) return 0;
    size_t n = 0;
    sl_config_walk(t, count_assign, count_block, &n);
    sl_cond_input in = {":80", "/seek-bound/a.html", "example.org", "q=1"};
    sl_config_eval(t, &in, apply, &n);
    sl_cond_input empty = {NULL, NULL, NULL, NULL};
    sl_config_eval(t, &empty, apply, &n);
    sl_config_tree_free(t);
    return 0;
}
