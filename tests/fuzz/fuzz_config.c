/* libFuzzer target for the config parser.
 *
 * The input bytes are parsed as one config string with includes disabled (no base directory, so
 * the fuzzer never touches the file system). When the parse succeeds, the tree is also walked and
 * evaluated against a fixed request so that the else-chain and pattern-matching code runs on
 * whatever shapes the fuzzer builds. Every path must return normally and free everything.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    char err[512];
    sl_config_tree *t =
        sl_config_parse_string((const char *)data, size, "fuzz.conf", NULL, err, sizeof err);
    if (!t) {
        /* Every failure must leave a "file:line: message" behind. */
        if (strncmp(err, "fuzz.conf:", 10) != 0) __builtin_trap();
        return 0;
    }
    size_t n = 0;
    sl_config_walk(t, count_assign, count_block, &n);
    sl_cond_input in = {":80", "/seek-bound/a.html", "example.org", "q=1"};
    sl_config_eval(t, &in, apply, &n);
    sl_cond_input empty = {NULL, NULL, NULL, NULL};
    sl_config_eval(t, &empty, apply, &n);
    sl_config_tree_free(t);
    return 0;
}
