/* Unit tests for config_parse.c: the lighttpd-syntax config parser.
 *
 * Each test parses a small config (from a string, or from files in a temporary directory for
 * includes) and checks the tree, the values, what sl_config_eval applies for given requests, or the
 * exact "file:line: message" of an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_parse.h"

/* The list of fields that follows an unsupported $HTTP[...] condition. */
#define KNOWN_FIELDS " (known: url, host, querystring, remoteip, scheme, request-method, useragent, referer, cookie, language; any header with $REQUEST_HEADER[\"Name\"])"

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                  */

static char errbuf[1024];

static sl_config_tree *parse_ok(const char *text)
{
    errbuf[0] = 0;
    sl_config_tree *t = sl_config_parse_string(text, strlen(text), "test.conf", NULL, errbuf,
                                               sizeof errbuf);
    if (!t) fail_msg("unexpected parse error: %s", errbuf);
    return t;
}

/* Parse must fail with exactly this message. */
static void parse_err(const char *text, const char *want)
{
    errbuf[0] = 0;
    sl_config_tree *t = sl_config_parse_string(text, strlen(text), "test.conf", NULL, errbuf,
                                               sizeof errbuf);
    if (t) {
        sl_config_tree_free(t);
        fail_msg("parse succeeded; expected error: %s", want);
    }
    if (strcmp(errbuf, want)) fail_msg("error \"%s\" for:\n%s\nwant \"%s\"", errbuf, text, want);
}

/* Parse must fail with a message starting with prefix. */
static void parse_err_prefix(const char *text, const char *prefix)
{
    errbuf[0] = 0;
    sl_config_tree *t = sl_config_parse_string(text, strlen(text), "test.conf", NULL, errbuf,
                                               sizeof errbuf);
    if (t) {
        sl_config_tree_free(t);
        fail_msg("parse succeeded; expected error: %s...", prefix);
    }
    if (strncmp(errbuf, prefix, strlen(prefix)) != 0)
        fail_msg("error \"%s\" does not start with \"%s\"", errbuf, prefix);
}

static const sl_cassign *find(const sl_cblock *b, const char *key)
{
    for (size_t i = 0; i < b->n_assigns; i++)
        if (!strcmp(b->assigns[i].key, key)) return &b->assigns[i];
    return NULL;
}

static const sl_cval *val(const sl_cblock *b, const char *key)
{
    const sl_cassign *a = find(b, key);
    if (!a) fail_msg("key %s not found", key);
    return a->val;
}

static void assert_str_val(const sl_cval *v, const char *s)
{
    assert_non_null(v);
    assert_int_equal(v->type, SL_CV_STRING);
    assert_string_equal(v->str, s);
}

static void assert_int_val(const sl_cval *v, long long n)
{
    assert_non_null(v);
    assert_int_equal(v->type, SL_CV_INT);
    assert_true(v->num == n);
}

/* Array of unkeyed strings equal to the NULL-terminated list. */
static void assert_strlist(const sl_cval *v, ...)
{
    assert_non_null(v);
    assert_int_equal(v->type, SL_CV_ARRAY);
    va_list ap;
    va_start(ap, v);
    size_t i = 0;
    for (const char *s; (s = va_arg(ap, const char *)); i++) {
        assert_true(i < v->n_items);
        assert_null(v->items[i].key);
        assert_str_val(v->items[i].val, s);
    }
    va_end(ap);
    assert_int_equal(v->n_items, i);
}

/* What sl_config_eval applied: the last value per key, in a small table. */
typedef struct applied {
    const char *key[64];
    const sl_cval *val[64];
    int line[64];
    size_t n;
    size_t calls;
} applied;

static void apply_cb(const sl_cassign *a, void *ud)
{
    applied *ap = ud;
    ap->calls++;
    for (size_t i = 0; i < ap->n; i++) {
        if (!strcmp(ap->key[i], a->key)) {
            ap->val[i] = a->val;
            ap->line[i] = a->line;
            return;
        }
    }
    assert_true(ap->n < 64);
    ap->key[ap->n] = a->key;
    ap->val[ap->n] = a->val;
    ap->line[ap->n] = a->line;
    ap->n++;
}

static const sl_cval *applied_val(const applied *ap, const char *key)
{
    for (size_t i = 0; i < ap->n; i++)
        if (!strcmp(ap->key[i], key)) return ap->val[i];
    return NULL;
}

static applied eval(const sl_config_tree *t, const char *socket, const char *url, const char *host,
                    const char *query)
{
    applied ap = {.n = 0};
    sl_cond_input in = {.socket = socket, .url = url, .host = host, .query = query};
    sl_config_eval(t, &in, apply_cb, &ap);
    return ap;
}

/* A temporary directory for include tests, removed with everything in it. */
static char tmpdir[256];

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/sl_cfg_XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
    assert_int_equal(tu_rmtree(tmpdir), 0);
}

static sl_config_tree *parse_file_in_tmp(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    errbuf[0] = 0;
    return sl_config_parse_file(path, errbuf, sizeof errbuf);
}

/* ---------------------------------------------------------------------------------------- */
/* The article's config                                                                     */

static const char article_conf[] =
    "server.document-root = \"/home/jan/wwwroot/servers/grisu.home.kneschke.de/pages/\"\n"
    "server.port = 1025\n"
    "server.network-backend = \"linux-aio-sendfile\"\n"
    "server.use-noatime = \"enable\"\n"
    "server.max-stat-threads = 2\n"
    "$SERVER[\"socket\"] == \":1025\" { $HTTP[\"url\"] =~ \"^/seek-bound/\" { "
    "proxy-core.protocol = \"fastcgi\" proxy-core.backends = ( \"127.0.0.1:1029\" ) "
    "proxy-core.allow-x-sendfile = \"enable\" proxy-core.max-pool-size = 20 } }\n";

/* Configs that do not parse, and the whole message each gives. */
static const struct tu_strs parse_errors[] = {
    /* Invalid key names. */
    {"a..b = 1\n", "test.conf:1: invalid name 'a..b'"},
    {"\n a. = 1\n", "test.conf:2: invalid name 'a.'"},
    {"var. = 1\n", "test.conf:1: invalid name 'var.'"},
    {".a = 1\n", "test.conf:1: unexpected character '.'"},
    {"é = 1\n", "test.conf:1: unexpected byte 0xc3"},
    /* Semicolon refused. */
    {"a = 1;\n",
     "test.conf:1: unexpected ';': statements are separated by whitespace or newlines, not ';'"},
    {"a = 1\n;b = 2\n",
     "test.conf:2: unexpected ';': statements are separated by whitespace or newlines, not ';'"},
    /* String spanning lines. */
    {"a = \"one\ntwo\"\nb = \n", "test.conf:4: expected a value, got end of file"},
    /* Unterminated string. */
    {"a = 1\nb = \"abc\nc = 2\n", "test.conf:2: unterminated string"},
    {"a = \"abc\\\"", "test.conf:1: unterminated string"},
    {"a = \"abc\\", "test.conf:1: unterminated string"},
    {"a = \"", "test.conf:1: unterminated string"},
    /* Integer overflow. */
    {"a = 1\nb = 9223372036854775808\n", "test.conf:2: integer out of range: 9223372036854775808"},
    {"b = -9223372036854775809\n", "test.conf:1: integer out of range: -9223372036854775809"},
    {"b = 99999999999999999999999999999999999999999999999999\n",
     "test.conf:1: integer out of range: 9999999999999999999999999999999999999999..."},
    {"a = 9223372036854775807 + 1\n", "test.conf:1: integer overflow: 9223372036854775807 + 1"},
    {"a = -9223372036854775807 + -2\n", "test.conf:1: integer overflow: -9223372036854775807 + -2"},
    /* Invalid integers. */
    {"a = 12abc\n", "test.conf:1: invalid integer '12abc'"},
    {"a = 1.5\n", "test.conf:1: invalid integer '1.5'"},
    {"a = -\n", "test.conf:1: unexpected character '-'"},
    {"a = +1\n", "test.conf:1: expected a value, got '+'"},
    /* Array errors. */
    {"a = ( \"x\" => 1,\n \"x\" => 2 )\n", "test.conf:2: duplicate array key \"x\""},
    {"a = ( 1 => 2 )\n", "test.conf:1: array key must be a string, not integer"},
    {"a = ( \"a\" \"b\" )\n", "test.conf:1: expected ',' or ')' in array, got string \"b\""},
    {"a = ( \"a\",\n\n", "test.conf:3: expected a value, got end of file"},
    {"a = ( \"a\"\n\n", "test.conf:3: unterminated array (opened on line 1)"},
    {"a = ( , )\n", "test.conf:1: expected a value, got ','"},
    {"a = ( \"k\" => )\n", "test.conf:1: expected a value, got ')'"},
    {"a = )\n", "test.conf:1: expected a value, got ')'"},
    /* Plus type mismatch. */
    {"b = ( \"a\" ) + \"x\"\n", "test.conf:1: type mismatch: array + string"},
    {"b = \"x\" + ()\n", "test.conf:1: type mismatch: string + array"},
    {"b = ( \"k\" => 1 ) + ( \"k\" => 2 )\n",
     "test.conf:1: duplicate array key \"k\" when joining arrays"},
    {"b = \"a\" +\n", "test.conf:2: expected a value, got end of file"},
    /* Duplicate key. */
    {"a = 1\nb = 2\n\na = 3\n", "test.conf:4: duplicate config key 'a'; use := to override"},
    {"$HTTP[\"url\"] == \"/\" {\n a = 1\n a = 2\n}\n",
     "test.conf:3: duplicate config key 'a'; use := to override"},
    {"a = 1\na += 1\na = 3\n", "test.conf:3: duplicate config key 'a'; use := to override"},
    /* Append type mismatch. */
    {"a = \"s\"\na += ( \"x\" )\n", "test.conf:2: type mismatch: string += array"},
    {"a = ( \"x\" )\na += 1\n", "test.conf:2: type mismatch: array += integer"},
    {"a = ( \"k\" => 1 )\na += ( \"k\" => 1 )\n",
     "test.conf:2: duplicate array key \"k\" when joining arrays"},
    /* Variable errors. */
    {"a = var.nope\n", "test.conf:1: unknown variable 'var.nope'"},
    {"x = var.v\nvar.v = 1\n", "test.conf:1: unknown variable 'var.v'"},
    {"var.v = 1\nvar.v = 2\n", "test.conf:2: duplicate variable 'var.v'; use := to override"},
    /* Key references. */
    {"a = b\n",
     "test.conf:1: unknown variable or key 'b' (a key must be set before it is used)"},
    {"$HTTP[\"url\"] == \"/\" { a = 1 }\nb = a\n",
     "test.conf:2: unknown variable or key 'a' (a key must be set before it is used)"},
    {"$HTTP[\"url\"] == \"/\" { a = 1 } else { b = a }\n",
     "test.conf:1: unknown variable or key 'a' (a key must be set before it is used)"},
    /* Env. */
    {"a = 1\nb = env.SL_TEST_CFG_UNSET\n",
     "test.conf:2: environment variable 'SL_TEST_CFG_UNSET' is not set"},
    {"env.SL_TEST_CFG_ENV = \"x\"\n",
     "test.conf:1: cannot assign to environment variable 'env.SL_TEST_CFG_ENV'"},
    /* Condition value expression. */
    {"$HTTP[\"host\"] == 5 { }\n",
     "test.conf:1: condition value must be a string, not integer"},
    {"$HTTP[\"host\"] ==\n ( \"a\" ) { }\n",
     "test.conf:2: condition value must be a string, not array"},
    /* Unsupported condition. */
    {"$PHYSICAL[\"path\"] =~ \"x\" { }\n",
     "test.conf:1: unsupported condition $PHYSICAL[\"path\"]"},
    {"$SERVER[\"url\"] == \"x\" { }\n", "test.conf:1: unsupported condition $SERVER[\"url\"]"},
    {"$REQUEST_HEADER[\"Bad Name\"] == \"x\" { }\n",
     "test.conf:1: $REQUEST_HEADER[\"Bad Name\"]: not a header field name"},
    {"$REQUEST_HEADER[\"\"] == \"x\" { }\n",
     "test.conf:1: $REQUEST_HEADER[\"\"]: not a header field name"},
    {"$SERVER[\"socket\"] =^ \":8\" { }\n",
     "test.conf:1: $SERVER[\"socket\"] only supports == and !="},
    {"$HTTP[\"host\"] =$ \".Example.org\" { }\n",
     "test.conf:1: $HTTP[\"host\"] =$ \".Example.org\" can never match: hosts are "
     "compared in lower case"},
    /* Socket regex refused. */
    {"\n$SERVER[\"socket\"] =~ \":80\" { }\n",
     "test.conf:2: $SERVER[\"socket\"] only supports == and !="},
    {"$SERVER[\"socket\"] !~ \":80\" { }\n",
     "test.conf:1: $SERVER[\"socket\"] only supports == and !="},
    /* Condition syntax errors. */
    {"$HTTP \"url\"\n", "test.conf:1: expected '[' after '$HTTP', got string \"url\""},
    {"$HTTP[url] == \"/\" { }\n", "test.conf:1: expected a quoted name in $HTTP[...], got 'url'"},
    {"$HTTP[\"url\" == \"/\" { }\n", "test.conf:1: expected ']', got '=='"},
    {"$HTTP[\"url\"] = \"/\" { }\n",
     "test.conf:1: expected '==', '!=', '=~', '!~', '=^' or '=$' in condition, got '='"},
    {"$HTTP[\"url\"] == \"/\"\na = 1\n", "test.conf:2: expected '{' after condition, got 'a'"},
    {"$ HTTP\n", "test.conf:1: expected a name after '$'"},
    {"$HTTP[\"url\"] == \"/\" ",
     "test.conf:1: expected '{' after condition, got end of file"},
    /* Missing brace. */
    {"a = 1\n$HTTP[\"url\"] == \"/\" {\n  b = 2\n\n",
     "test.conf:2: missing '}': this block is still open at end of file"},
    {"$HTTP[\"url\"] == \"/\" {\n $HTTP[\"host\"] == \"h\" {\n }\n",
     "test.conf:1: missing '}': this block is still open at end of file"},
    {"$HTTP[\"url\"] == \"/\" { } else {\n\n",
     "test.conf:1: missing '}': this block is still open at end of file"},
    /* Unexpected brace. */
    {"a = 1\n}\n", "test.conf:2: unexpected '}' (no block is open)"},
    {"$HTTP[\"url\"] == \"/\" { }\n}\n", "test.conf:2: unexpected '}' (no block is open)"},
    {"{ a = 1 }\n", "test.conf:1: unexpected '{'; expected a key, a condition, 'include' or '}'"},
    /* Stray tokens. */
    {"server.port = 80 80\n",
     "test.conf:1: unexpected integer 80; expected a key, a condition, 'include' or '}'"},
    {"a = 1\n\"x\"\n",
     "test.conf:2: unexpected string \"x\"; expected a key, a condition, 'include' or '}'"},
    {"a = 1 )\n", "test.conf:1: unexpected ')'; expected a key, a condition, 'include' or '}'"},
    {"a = 1 b\n", "test.conf:1: expected '=', '+=' or ':=' after 'b', got end of file"},
    {"a b = 1\n", "test.conf:1: expected '=', '+=' or ':=' after 'a', got 'b'"},
    {"= 1\n", "test.conf:1: unexpected '='; expected a key, a condition, 'include' or '}'"},
    {"a = = 1\n", "test.conf:1: expected a value, got '='"},
    {"a == 1\n", "test.conf:1: expected '=', '+=' or ':=' after 'a', got '=='"},
    {"a = 1 => 2\n", "test.conf:1: unexpected '=>'; expected a key, a condition, 'include' or '}'"},
    {"a = 1 :\n", "test.conf:1: unexpected character ':'"},
    {"a = 1 !\n", "test.conf:1: unexpected character '!'"},
    {"a = 1 @\n", "test.conf:1: unexpected character '@'"},
    /* Else errors. */
    {"else { }\n", "test.conf:1: 'else' without a condition block right before it"},
    {"$HTTP[\"url\"] == \"/\" { }\na = 1\nelse { }\n",
     "test.conf:3: 'else' without a condition block right before it"},
    {"$HTTP[\"url\"] == \"/\" { } else { } else { }\n",
     "test.conf:1: 'else' cannot follow a plain 'else { }' block"},
    {"$HTTP[\"url\"] == \"/\" { } else a = 1\n",
     "test.conf:1: expected '{' or a condition after 'else', got 'a'"},
    {"$HTTP[\"url\"] == \"/\" {\n else { }\n}\n",
     "test.conf:2: 'else' without a condition block right before it"},
    /* Include shell not in a string. */
    /* A config given as text (tests, the fuzzer) runs nothing. */
    {"a = 1\ninclude_shell \"cat /etc/passwd\"\n",
     "test.conf:2: include_shell is not allowed here (only in a config file)"},
    {"include_shell 5\n", "test.conf:1: include_shell needs a string, not integer"},
    /* Include without basedir. */
    {"\ninclude \"x.conf\"\n",
     "test.conf:2: include is not allowed here (no base directory to resolve it against)"},
    {"include \"/etc/x.conf\"\n",
     "test.conf:1: include is not allowed here (no base directory to resolve it against)"},
    {"include 5\n", "test.conf:1: include needs a string, not integer"},
};

static void test_parse_errors(void **state)
{
    TU_EACH(c, parse_errors) parse_err(c->in, c->want);
}

static void test_article_config(void **state)
{
    sl_config_tree *t = parse_ok(article_conf);
    const sl_cblock *r = t->root;
    assert_int_equal(r->field, SL_COND_NONE);
    assert_int_equal(r->n_assigns, 5);
    assert_str_val(val(r, "server.document-root"),
                   "/home/jan/wwwroot/servers/grisu.home.kneschke.de/pages/");
    assert_int_val(val(r, "server.port"), 1025);
    assert_str_val(val(r, "server.network-backend"), "linux-aio-sendfile");
    assert_str_val(val(r, "server.use-noatime"), "enable");
    assert_int_val(val(r, "server.max-stat-threads"), 2);
    assert_string_equal(r->assigns[0].key, "server.document-root");
    assert_string_equal(r->assigns[4].key, "server.max-stat-threads");
    assert_int_equal(r->assigns[4].line, 5);
    assert_string_equal(r->assigns[4].file, "test.conf");

    assert_int_equal(r->n_children, 1);
    const sl_cblock *s = r->children[0];
    assert_int_equal(s->field, SL_COND_SOCKET);
    assert_int_equal(s->op, SL_COND_EQ);
    assert_string_equal(s->pattern, ":1025");
    assert_null(s->re);
    assert_ptr_equal(s->parent, r);
    assert_int_equal(s->line, 6);
    assert_int_equal(s->n_assigns, 0);
    assert_int_equal(s->n_children, 1);
    const sl_cblock *u = s->children[0];
    assert_int_equal(u->field, SL_COND_URL);
    assert_int_equal(u->op, SL_COND_MATCH);
    assert_string_equal(u->pattern, "^/seek-bound/");
    assert_non_null(u->re);
    assert_int_equal(u->n_assigns, 4);
    assert_str_val(val(u, "proxy-core.protocol"), "fastcgi");
    assert_strlist(val(u, "proxy-core.backends"), "127.0.0.1:1029", NULL);
    assert_str_val(val(u, "proxy-core.allow-x-sendfile"), "enable");
    assert_int_val(val(u, "proxy-core.max-pool-size"), 20);

    applied a = eval(t, ":1025", "/seek-bound/movie.avi", "h", "");
    assert_int_equal(a.calls, 9);
    assert_str_val(applied_val(&a, "proxy-core.protocol"), "fastcgi");
    a = eval(t, ":1025", "/other", "h", "");
    assert_int_equal(a.calls, 5);
    assert_null(applied_val(&a, "proxy-core.protocol"));
    a = eval(t, ":80", "/seek-bound/x", "h", "");
    assert_int_equal(a.calls, 5);
    sl_config_tree_free(t);
}

/* ---------------------------------------------------------------------------------------- */
/* Lexical elements                                                                         */

static void test_empty_config(void **state)
{
    sl_config_tree *t = parse_ok("");
    assert_int_equal(t->root->n_assigns, 0);
    assert_int_equal(t->root->n_children, 0);
    assert_null(t->root->parent);
    sl_config_tree_free(t);
    t = parse_ok("  \n\t# only a comment\n\r\n");
    assert_int_equal(t->root->n_assigns, 0);
    sl_config_tree_free(t);
}

static void test_key_names(void **state)
{
    sl_config_tree *t = parse_ok("server.document-root = \"/a\"\n"
                                 "proxy-core.max-pool-size = 1\n"
                                 "index-file.names = ()\n"
                                 "_x9.y_z-1 = 2\n"
                                 "plain = 3\n");
    assert_int_equal(t->root->n_assigns, 5);
    assert_str_val(val(t->root, "server.document-root"), "/a");
    assert_int_val(val(t->root, "proxy-core.max-pool-size"), 1);
    assert_int_val(val(t->root, "_x9.y_z-1"), 2);
    assert_int_val(val(t->root, "plain"), 3);
    sl_config_tree_free(t);
}

static void test_comments_and_whitespace(void **state)
{
    sl_config_tree *t = parse_ok("# header\r\n"
                                 "a = \"x#y\" # trailing comment\r\n"
                                 "\tb\t=\t( # comment inside an array\n"
                                 "  \"1\", # more\n"
                                 "  \"2\"\n"
                                 ")\n"
                                 "c=1 d=2 e=\"3\"\n"
                                 "f\n=\n4\n"
                                 "#last line without newline");
    assert_str_val(val(t->root, "a"), "x#y");
    assert_strlist(val(t->root, "b"), "1", "2", NULL);
    assert_int_val(val(t->root, "c"), 1);
    assert_int_val(val(t->root, "d"), 2);
    assert_str_val(val(t->root, "e"), "3");
    assert_int_val(val(t->root, "f"), 4);
    assert_int_equal(find(t->root, "f")->line, 8);
    assert_int_equal(find(t->root, "e")->line, 7);
    sl_config_tree_free(t);
}

static void test_string_escapes(void **state)
{
    sl_config_tree *t = parse_ok("a = \"q\\\"q\"\n"           /* q\"q      -> q"q */
                                 "b = \"back\\\\slash\"\n"     /* back\\slash -> back\slash */
                                 "c = \"nl\\ntab\\t.\"\n"      /* \n \t */
                                 "d = \"^/foo\\.html$\"\n"     /* unknown escape kept */
                                 "e = \"\\x\\0\\d+\"\n"        /* \x \0 \d kept */
                                 "f = \"\"\n"                  /* empty */
                                 "g = \"a\\\\.b\"\n");         /* \\. -> \. */
    assert_str_val(val(t->root, "a"), "q\"q");
    assert_str_val(val(t->root, "b"), "back\\slash");
    assert_str_val(val(t->root, "c"), "nl\ntab\t.");
    assert_str_val(val(t->root, "d"), "^/foo\\.html$");
    assert_str_val(val(t->root, "e"), "\\x\\0\\d+");
    assert_str_val(val(t->root, "f"), "");
    assert_str_val(val(t->root, "g"), "a\\.b");
    sl_config_tree_free(t);
}

static void test_regex_escape_reaches_pcre(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"url\"] =~ \"^/foo\\.html$\" { a = 1 }\n");
    const sl_cblock *b = t->root->children[0];
    assert_string_equal(b->pattern, "^/foo\\.html$");
    assert_true(sl_cond_match(b, &(sl_cond_input){.url = "/foo.html"}));
    assert_false(sl_cond_match(b, &(sl_cond_input){.url = "/fooxhtml"}));
    assert_false(sl_cond_match(b, &(sl_cond_input){.url = "/foo.html/"}));
    sl_config_tree_free(t);
}

static void test_string_spanning_lines(void **state)
{
    sl_config_tree *t = parse_ok("a = \"one\ntwo\"\nb = 1\n");
    assert_str_val(val(t->root, "a"), "one\ntwo");
    assert_int_equal(find(t->root, "b")->line, 3);
    sl_config_tree_free(t);
}

static void test_nul_bytes(void **state)
{
    static const char in_string[] = "a = \"x\0y\"\n";
    errbuf[0] = 0;
    assert_null(sl_config_parse_string(in_string, sizeof in_string - 1, "test.conf", NULL, errbuf,
                                       sizeof errbuf));
    assert_string_equal(errbuf, "test.conf:1: NUL byte inside a string");
    static const char outside[] = "a = 1\n\0";
    assert_null(sl_config_parse_string(outside, sizeof outside - 1, "test.conf", NULL, errbuf,
                                       sizeof errbuf));
    assert_string_equal(errbuf, "test.conf:2: unexpected byte 0x00");
    static const char in_comment[] = "a = 1 # x\0y\nb = 2\n";
    sl_config_tree *t = sl_config_parse_string(in_comment, sizeof in_comment - 1, "test.conf",
                                               NULL, errbuf, sizeof errbuf);
    assert_non_null(t);
    assert_int_val(val(t->root, "b"), 2);
    sl_config_tree_free(t);
}

static void test_length_not_nul_terminated(void **state)
{
    /* Only len bytes are read: the text need not be NUL-terminated. */
    char buf[8] = {'a', '=', '1', '2', '3', '4', '5', '6'};
    sl_config_tree *t = sl_config_parse_string(buf, 4, "n", NULL, errbuf, sizeof errbuf);
    assert_non_null(t);
    assert_int_val(val(t->root, "a"), 12);
    sl_config_tree_free(t);
    char sbuf[3] = {'a', '=', '"'};
    assert_null(sl_config_parse_string(sbuf, 3, "n", NULL, errbuf, sizeof errbuf));
    assert_string_equal(errbuf, "n:1: unterminated string");
}

static void test_integers(void **state)
{
    sl_config_tree *t = parse_ok("a = 0\nb = -5\nc = 9223372036854775807\n"
                                 "d = -9223372036854775808\ne = 007\n");
    assert_int_val(val(t->root, "a"), 0);
    assert_int_val(val(t->root, "b"), -5);
    assert_int_val(val(t->root, "c"), LLONG_MAX);
    assert_int_val(val(t->root, "d"), LLONG_MIN);
    assert_int_val(val(t->root, "e"), 7);
    sl_config_tree_free(t);
}

/* ---------------------------------------------------------------------------------------- */
/* Arrays                                                                                   */

static void test_arrays(void **state)
{
    sl_config_tree *t = parse_ok("empty = ()\n"
                                 "one = ( \"a\" )\n"
                                 "trailing = ( \"a\", \"b\", )\n"
                                 "ints = ( 1, -2 )\n"
                                 "mime = ( \".html\" => \"text/html\", \"x\" => ( \"nested\" ) )\n"
                                 "mixed = ( \"u\", \"k\" => \"v\", 3 )\n"
                                 "deep = ( ( ( ) ), ( \"z\" ) )\n");
    const sl_cval *v = val(t->root, "empty");
    assert_int_equal(v->type, SL_CV_ARRAY);
    assert_int_equal(v->n_items, 0);
    assert_strlist(val(t->root, "one"), "a", NULL);
    assert_strlist(val(t->root, "trailing"), "a", "b", NULL);
    v = val(t->root, "ints");
    assert_int_equal(v->n_items, 2);
    assert_int_val(v->items[1].val, -2);
    v = val(t->root, "mime");
    assert_int_equal(v->n_items, 2);
    assert_string_equal(v->items[0].key, ".html");
    assert_str_val(v->items[0].val, "text/html");
    assert_string_equal(v->items[1].key, "x");
    assert_strlist(v->items[1].val, "nested", NULL);
    v = val(t->root, "mixed");
    assert_int_equal(v->n_items, 3);
    assert_null(v->items[0].key);
    assert_string_equal(v->items[1].key, "k");
    assert_null(v->items[2].key);
    assert_int_val(v->items[2].val, 3);
    v = val(t->root, "deep");
    assert_int_equal(v->n_items, 2);
    assert_int_equal(v->items[0].val->type, SL_CV_ARRAY);
    assert_int_equal(v->items[0].val->n_items, 1);
    assert_int_equal(v->items[0].val->items[0].val->n_items, 0);
    sl_config_tree_free(t);
}

static void test_large_array(void **state)
{
    /* Enough items to make the item vector grow several times. */
    char text[20000];
    size_t o = (size_t)snprintf(text, sizeof text, "a = (");
    for (int i = 0; i < 1000; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "\"k%d\" => %d,", i, i);
    snprintf(text + o, sizeof text - o, ")\n");
    sl_config_tree *t = parse_ok(text);
    const sl_cval *v = val(t->root, "a");
    assert_int_equal(v->n_items, 1000);
    assert_string_equal(v->items[999].key, "k999");
    assert_int_val(v->items[999].val, 999);
    assert_int_val(v->items[500].val, 500);
    sl_config_tree_free(t);
}

static void test_array_depth_limit(void **state)
{
    char text[512];
    size_t o = (size_t)snprintf(text, sizeof text, "a = ");
    for (int i = 0; i < SL_CONFIG_MAX_ARRAY_DEPTH; i++) text[o++] = '(';
    for (int i = 0; i < SL_CONFIG_MAX_ARRAY_DEPTH; i++) text[o++] = ')';
    text[o] = 0;
    sl_config_tree *t = parse_ok(text);
    sl_config_tree_free(t);
    o = (size_t)snprintf(text, sizeof text, "a = ");
    for (int i = 0; i <= SL_CONFIG_MAX_ARRAY_DEPTH; i++) text[o++] = '(';
    text[o] = 0;
    parse_err(text, "test.conf:1: arrays nested too deep (more than 64 levels)");
}

/* ---------------------------------------------------------------------------------------- */
/* Operators                                                                                */

static void test_plus_operator(void **state)
{
    sl_config_tree *t = parse_ok("s = \"a\" + \"b\" + \"c\"\n"
                                 "n = 1 + 2 + -4\n"
                                 "arr = ( \"a\" ) + ( \"b\", \"c\" ) + ()\n"
                                 "kv = ( \"x\" => 1 ) + ( \"y\" => 2, \"z\" )\n"
                                 "multi = \"a\"\n + \n\"b\"\n");
    assert_str_val(val(t->root, "s"), "abc");
    assert_int_val(val(t->root, "n"), -1);
    assert_strlist(val(t->root, "arr"), "a", "b", "c", NULL);
    const sl_cval *kv = val(t->root, "kv");
    assert_int_equal(kv->n_items, 3);
    assert_string_equal(kv->items[1].key, "y");
    assert_null(kv->items[2].key);
    assert_str_val(val(t->root, "multi"), "ab");
    sl_config_tree_free(t);
}

static void test_force_override(void **state)
{
    sl_config_tree *t = parse_ok("a = 1\nb = 2\na := \"x\"\nc := 3\n");
    assert_int_equal(t->root->n_assigns, 3);
    assert_string_equal(t->root->assigns[0].key, "a");
    assert_str_val(t->root->assigns[0].val, "x");
    assert_int_equal(t->root->assigns[0].line, 3);
    assert_int_val(val(t->root, "c"), 3);
    sl_config_tree_free(t);
    /* := after += and += after := all update the one assignment. */
    t = parse_ok("a = (\"1\")\na += \"2\"\na := (\"3\")\na += \"4\"\n");
    assert_int_equal(t->root->n_assigns, 1);
    assert_strlist(val(t->root, "a"), "3", "4", NULL);
    sl_config_tree_free(t);
}

static void test_same_key_in_different_blocks(void **state)
{
    sl_config_tree *t = parse_ok("a = 1\n"
                                 "$HTTP[\"url\"] == \"/x\" { a = 2 }\n"
                                 "else { a = 3 }\n"
                                 "$HTTP[\"url\"] == \"/y\" { a = 4 }\n");
    assert_int_val(val(t->root, "a"), 1);
    assert_int_val(val(t->root->children[0], "a"), 2);
    assert_int_val(val(t->root->children[0]->else_next, "a"), 3);
    assert_int_val(val(t->root->children[1], "a"), 4);
    sl_config_tree_free(t);
}

static void test_append_semantics(void **state)
{
    sl_config_tree *t = parse_ok("arr = ( \"a\" )\n"
                                 "arr += ( \"b\", \"c\" )\n"
                                 "arr += \"d\"\n"
                                 "s = \"x\"\n"
                                 "s += \"y\"\n"
                                 "n = 40\n"
                                 "n += 2\n"
                                 "fresh += ( \"only\" )\n"
                                 "fresh2 += \"str\"\n"
                                 "kv = ( \"a\" => 1 )\n"
                                 "kv += ( \"b\" => 2 )\n");
    assert_int_equal(t->root->n_assigns, 6);
    assert_strlist(val(t->root, "arr"), "a", "b", "c", "d", NULL);
    assert_int_equal(find(t->root, "arr")->line, 3);
    assert_str_val(val(t->root, "s"), "xy");
    assert_int_val(val(t->root, "n"), 42);
    assert_strlist(val(t->root, "fresh"), "only", NULL);
    assert_str_val(val(t->root, "fresh2"), "str");
    assert_int_equal(val(t->root, "kv")->n_items, 2);
    sl_config_tree_free(t);
}

static void test_append_from_enclosing_block(void **state)
{
    sl_config_tree *t = parse_ok("m = ( \"a\" )\n"
                                 "$HTTP[\"url\"] =~ \"^/x\" {\n"
                                 "  m += ( \"b\" )\n"
                                 "  $HTTP[\"host\"] == \"h\" { m += \"c\" }\n"
                                 "} else {\n"
                                 "  m += \"e\"\n"
                                 "}\n"
                                 "m += \"late\"\n");
    const sl_cblock *r = t->root, *x = r->children[0];
    assert_strlist(val(r, "m"), "a", "late", NULL);
    assert_strlist(val(x, "m"), "a", "b", NULL);
    assert_strlist(val(x->children[0], "m"), "a", "b", "c", NULL);
    /* The else block sees the root, not its sibling's value. */
    assert_strlist(val(x->else_next, "m"), "a", "e", NULL);

    applied a = eval(t, "", "/x", "h", "");
    assert_strlist(applied_val(&a, "m"), "a", "b", "c", NULL);
    a = eval(t, "", "/x", "other", "");
    assert_strlist(applied_val(&a, "m"), "a", "b", NULL);
    a = eval(t, "", "/y", "h", "");
    assert_strlist(applied_val(&a, "m"), "a", "e", NULL);
    sl_config_tree_free(t);
}

/* ---------------------------------------------------------------------------------------- */
/* Variables, references, environment                                                       */

static void test_variables(void **state)
{
    sl_config_tree *t = parse_ok("var.base = \"/srv\"\n"
                                 "var.n = 3\n"
                                 "server.document-root = var.base + \"/www\"\n"
                                 "var.mods = ( \"a\" )\n"
                                 "var.mods += \"b\"\n"
                                 "mods = var.mods\n"
                                 "var.base := \"/other\"\n"
                                 "later = var.base\n"
                                 "count = var.n + 1\n");
    assert_int_equal(t->root->n_assigns, 4);
    assert_null(find(t->root, "var.base"));
    assert_null(find(t->root, "var.mods"));
    assert_str_val(val(t->root, "server.document-root"), "/srv/www");
    assert_strlist(val(t->root, "mods"), "a", "b", NULL);
    assert_str_val(val(t->root, "later"), "/other");
    assert_int_val(val(t->root, "count"), 4);
    sl_config_tree_free(t);
}

static void test_variable_visible_after_block(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"url\"] == \"/\" {\n"
                                 " var.inner = \"i\"\n"
                                 " x = var.inner\n"
                                 "}\n"
                                 "y = var.inner\n");
    assert_int_equal(t->root->children[0]->n_assigns, 1);
    assert_str_val(val(t->root->children[0], "x"), "i");
    assert_str_val(val(t->root, "y"), "i");
    sl_config_tree_free(t);
}

static void test_key_references(void **state)
{
    sl_config_tree *t = parse_ok("server.document-root = \"/srv\"\n"
                                 "alias = server.document-root + \"/x\"\n"
                                 "$HTTP[\"host\"] == \"h\" {\n"
                                 "  server.document-root = \"/h\"\n"
                                 "  inner = server.document-root + \"/y\"\n"
                                 "  outer = alias\n"
                                 "}\n");
    assert_str_val(val(t->root, "alias"), "/srv/x");
    const sl_cblock *h = t->root->children[0];
    assert_str_val(val(h, "inner"), "/h/y");
    assert_str_val(val(h, "outer"), "/srv/x");
    sl_config_tree_free(t);
}

static void test_env(void **state)
{
    assert_int_equal(setenv("SL_TEST_CFG_ENV", "/from/env", 1), 0);
    unsetenv("SL_TEST_CFG_UNSET");
    sl_config_tree *t = parse_ok("a = env.SL_TEST_CFG_ENV + \"/x\"\n"
                                 "$HTTP[\"host\"] == env.SL_TEST_CFG_ENV { b = 1 }\n");
    assert_str_val(val(t->root, "a"), "/from/env/x");
    assert_string_equal(t->root->children[0]->pattern, "/from/env");
    sl_config_tree_free(t);
    unsetenv("SL_TEST_CFG_ENV");
}

/* ---------------------------------------------------------------------------------------- */
/* Conditions                                                                               */

static void test_condition_fields_and_ops(void **state)
{
    sl_config_tree *t = parse_ok("$SERVER[\"socket\"] == \":80\" { a = 1 }\n"
                                 "$SERVER[\"socket\"] != \":80\" { a = 2 }\n"
                                 "$HTTP[\"url\"] =~ \"^/d/\" { a = 3 }\n"
                                 "$HTTP[\"host\"] != \"x\" { a = 4 }\n"
                                 "$HTTP[\"querystring\"] !~ \"debug\" { a = 5 }\n"
                                 "$HTTP[\"host\"] == \"example.org\" { a = 6 }\n"
                                 "$HTTP[\"querystring\"] =~ \"^q=\" { a = 7 }\n"
                                 "$HTTP[\"url\"] !~ \"\\.php$\" { a = 8 }\n");
    const sl_cblock *r = t->root;
    assert_int_equal(r->n_children, 8);
    static const sl_cond_field fields[] = {SL_COND_SOCKET, SL_COND_SOCKET, SL_COND_URL,
                                           SL_COND_HOST,   SL_COND_QUERY,  SL_COND_HOST,
                                           SL_COND_QUERY,  SL_COND_URL};
    static const sl_cond_op ops[] = {SL_COND_EQ,      SL_COND_NE, SL_COND_MATCH, SL_COND_NE,
                                     SL_COND_NOMATCH, SL_COND_EQ, SL_COND_MATCH, SL_COND_NOMATCH};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(r->children[i]->field, fields[i]);
        assert_int_equal(r->children[i]->op, ops[i]);
        assert_int_equal(r->children[i]->line, i + 1);
        assert_false(r->children[i]->is_else);
        assert_null(r->children[i]->else_next);
        bool regex = ops[i] == SL_COND_MATCH || ops[i] == SL_COND_NOMATCH;
        assert_int_equal(r->children[i]->re != NULL, regex);
    }
    sl_cond_input in = {.socket = ":80", .url = "/d/file", .host = "example.org", .query = "q=1"};
    bool want[] = {true, false, true, true, true, true, true, true};
    for (int i = 0; i < 8; i++) assert_int_equal(sl_cond_match(r->children[i], &in), want[i]);
    sl_cond_input in2 = {.socket = ":443", .url = "/x.php", .host = "x", .query = "debug=1"};
    bool want2[] = {false, true, false, false, false, false, false, false};
    for (int i = 0; i < 8; i++) assert_int_equal(sl_cond_match(r->children[i], &in2), want2[i]);
    assert_true(sl_cond_match(r, &in));
    sl_config_tree_free(t);
}

static void test_condition_null_inputs(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"host\"] == \"\" { a = 1 }\n"
                                 "$HTTP[\"url\"] =~ \"^$\" { a = 2 }\n"
                                 "$HTTP[\"querystring\"] != \"\" { a = 3 }\n"
                                 "$SERVER[\"socket\"] == \"\" { a = 4 }\n");
    sl_cond_input in = {0};
    const sl_cblock *r = t->root;
    assert_true(sl_cond_match(r->children[0], &in));
    assert_true(sl_cond_match(r->children[1], &in));
    assert_false(sl_cond_match(r->children[2], &in));
    assert_true(sl_cond_match(r->children[3], &in));
    assert_true(sl_cond_match(r->children[0], NULL));
    applied a = eval(t, NULL, NULL, NULL, NULL);
    assert_int_val(applied_val(&a, "a"), 4);
    assert_int_equal(a.calls, 3);
    sl_config_tree_free(t);
}

static void test_condition_exact_compare(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"url\"] == \"/Example.org\" { a = 1 }\n");
    const sl_cblock *b = t->root->children[0];
    assert_true(sl_cond_match(b, &(sl_cond_input){.url = "/Example.org"}));
    assert_false(sl_cond_match(b, &(sl_cond_input){.url = "/example.org"}));
    assert_false(sl_cond_match(b, &(sl_cond_input){.url = "/Example.org."}));
    assert_false(sl_cond_match(b, &(sl_cond_input){.url = "/Example.or"}));
    sl_config_tree_free(t);
}

/* Hosts arrive normalized (lower case, no trailing dot, no ":80"); a pattern without a port names
 * the host on any port, one with a port only that port. */
static void test_host_condition_ports(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"host\"] == \"example.org\" { a = 1 }\n"
                                 "$HTTP[\"host\"] != \"example.org\" { a = 2 }\n"
                                 "$HTTP[\"host\"] == \"example.org:8080\" { a = 3 }\n"
                                 "$HTTP[\"host\"] == \"[::1]\" { a = 4 }\n"
                                 "$HTTP[\"host\"] == \"\" { a = 5 }\n");
    const sl_cblock *eq = t->root->children[0], *ne = t->root->children[1];
    const sl_cblock *port = t->root->children[2], *v6 = t->root->children[3];
    const sl_cblock *none = t->root->children[4];
    const char *yes[] = {"example.org", "example.org:8080", "example.org:1"};
    const char *no[] = {"example.or", "example.org.x", "xexample.org", "example.org8080", "", "[::1]"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_true(sl_cond_match(eq, &(sl_cond_input){.host = yes[i]}));
        assert_false(sl_cond_match(ne, &(sl_cond_input){.host = yes[i]}));
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_false(sl_cond_match(eq, &(sl_cond_input){.host = no[i]}));
        assert_true(sl_cond_match(ne, &(sl_cond_input){.host = no[i]}));
    }
    assert_true(sl_cond_match(port, &(sl_cond_input){.host = "example.org:8080"}));
    assert_false(sl_cond_match(port, &(sl_cond_input){.host = "example.org"}));
    assert_false(sl_cond_match(port, &(sl_cond_input){.host = "example.org:8081"}));
    assert_true(sl_cond_match(v6, &(sl_cond_input){.host = "[::1]"}));
    assert_true(sl_cond_match(v6, &(sl_cond_input){.host = "[::1]:8080"}));
    assert_false(sl_cond_match(v6, &(sl_cond_input){.host = "[::12]"}));
    assert_true(sl_cond_match(none, &(sl_cond_input){.host = ""}));
    assert_false(sl_cond_match(none, &(sl_cond_input){.host = "a"}));
    sl_config_tree_free(t);
}

/* A host pattern no normalized host can equal is a config mistake, said at start-up. */
static void test_host_pattern_never_matching_refused(void **state)
{
    const char *bad[] = {"Example.org", "example.org.", "example.org:80", "example.org.:8080",
                         "[::FFFF:1.2.3.4]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char conf[128], want[160];
        snprintf(conf, sizeof conf, "$HTTP[\"host\"] == \"%s\" { }\n", bad[i]);
        snprintf(want, sizeof want, "test.conf:1: $HTTP[\"host\"] == \"%s\" can never match", bad[i]);
        parse_err_prefix(conf, want);
    }
    parse_err_prefix("$HTTP[\"host\"] != \"A\" { }\n", "test.conf:1: $HTTP[\"host\"] != \"A\" can");
    sl_config_tree_free(parse_ok("$HTTP[\"host\"] == \"example.org:8080\" { }\n"
                                 "$HTTP[\"host\"] =~ \"Example\" { }\n"
                                 "$HTTP[\"url\"] == \"/A.\" { }\n"));
}

static void test_condition_value_expression(void **state)
{
    sl_config_tree *t = parse_ok("var.h = \"example\"\n"
                                 "$HTTP[\"host\"] == var.h + \".org\" { a = 1 }\n");
    assert_string_equal(t->root->children[0]->pattern, "example.org");
    sl_config_tree_free(t);
}

static void test_unsupported_condition(void **state)
{
    parse_err("a = 1\n$HTTP[\"remote\"] == \"10.0.0.1\" { }\n",
              "test.conf:2: unsupported condition $HTTP[\"remote\"]" KNOWN_FIELDS);
    parse_err("$HTTP[\"URL\"] == \"x\" { }\n",
              "test.conf:1: unsupported condition $HTTP[\"URL\"]" KNOWN_FIELDS);
}

/* A header's value for the tests: the cookie has a group to capture, X-Api-Key is absent. */
static const char *fake_lazy(void *ud, const sl_cblock *b)
{
    (void)ud;
    if (b->field == SL_COND_REMOTE_IP) return "10.1.2.3";
    if (!strcmp(b->header, "User-Agent")) return "curl/8.0 (bot)";
    if (!strcmp(b->header, "Referer")) return "http://www.example.org/";
    if (!strcmp(b->header, "Cookie")) return "id=42; b=2";
    if (!strcmp(b->header, "Accept-Language")) return "en-US, de";
    return NULL;
}

/* The fields lighttpd 1.4 has, the header ones mapped onto their header, and =^ / =$. */
static void test_condition_more_fields(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"useragent\"] =~ \"bot\" { a = 1 }\n"
                                 "$HTTP[\"user-agent\"] =^ \"curl/\" { a = 2 }\n"
                                 "$HTTP[\"referer\"] =$ \".example.org/\" { a = 3 }\n"
                                 "$HTTP[\"cookie\"] =~ \"id=(\\\\d+)\" { a = 4 }\n"
                                 "$HTTP[\"language\"] =^ \"de\" { a = 5 }\n"
                                 "$REQUEST_HEADER[\"X-Api-Key\"] == \"\" { a = 6 }\n"
                                 "$HTTP[\"scheme\"] == \"http\" { a = 7 }\n"
                                 "$HTTP[\"request-method\"] != \"GET\" { a = 8 }\n"
                                 "$HTTP[\"remoteip\"] == \"10.0.0.0/8\" { a = 9 }\n"
                                 "$HTTP[\"remote-ip\"] != \"[::1]\" { a = 10 }\n"
                                 "$HTTP[\"remoteip\"] =~ \"^127\\\\.\" { a = 11 }\n"
                                 "$HTTP[\"query-string\"] =$ \"&x\" { a = 12 }\n"
                                 "$HTTP[\"url\"] =^ \"/a/\" { a = 13 }\n");
    const sl_cblock *r = t->root;
    assert_int_equal(r->n_children, 13);
    static const char *const hdr[] = {"User-Agent", "User-Agent", "Referer", "Cookie",
                                      "Accept-Language", "X-Api-Key"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r->children[i]->field, SL_COND_HEADER);
        assert_string_equal(r->children[i]->header, hdr[i]);
    }
    assert_int_equal(r->children[1]->op, SL_COND_PREFIX);
    assert_int_equal(r->children[2]->op, SL_COND_SUFFIX);
    assert_int_equal(r->children[6]->field, SL_COND_SCHEME);
    assert_int_equal(r->children[7]->field, SL_COND_METHOD);
    assert_int_equal(r->children[8]->field, SL_COND_REMOTE_IP);
    assert_non_null(r->children[8]->net);
    assert_int_equal(r->children[8]->net->bits, 8);
    assert_int_equal(r->children[9]->net->family, AF_INET6);
    assert_int_equal(r->children[9]->net->bits, 128);
    assert_null(r->children[10]->net); /* =~ compares the text */
    assert_int_equal(sl_cond_groups(r->children[3]), 1);
    assert_int_equal(sl_cond_groups(r->children[0]), 0);
    assert_int_equal(sl_cond_groups(r->children[1]), -1);

    /* Inputs: headers through lazy(), the address as a sockaddr. */
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
    sl_cond_input in = {.url = "/a/b", .query = "q=1&x", .scheme = "http", .method = "GET",
                        .peer = (struct sockaddr *)&a4, .lazy = fake_lazy};
    bool want[] = {true, true, true, true, false, true, true, false, true, true, false, true, true};
    for (int i = 0; i < 13; i++) assert_int_equal(sl_cond_match(r->children[i], &in), want[i]);
    sl_cond_capture cap = {0};
    assert_true(sl_cond_match_capture(r->children[3], &in, &cap));
    assert_true(cap.set);
    assert_int_equal(cap.n, 2);
    assert_string_equal(cap.subject + cap.ov[2], "42; b=2");
    in.method = "POST";
    in.url = "/b/a/";
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:10.9.9.9", &a6.sin6_addr); /* IPv4-mapped: in 10.0.0.0/8 */
    in.peer = (struct sockaddr *)&a6;
    assert_true(sl_cond_match(r->children[7], &in));
    assert_true(sl_cond_match(r->children[8], &in));
    assert_false(sl_cond_match(r->children[12], &in));
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    assert_false(sl_cond_match(r->children[8], &in));
    assert_false(sl_cond_match(r->children[9], &in));
    in.peer = NULL; /* no address: in no network */
    assert_false(sl_cond_match(r->children[8], &in));
    assert_true(sl_cond_match(r->children[9], &in));
    sl_config_tree_free(t);
}

static void test_remoteip_refused(void **state)
{
    static const char *const bad[] = {"10.0.0.1/33", "10.0.0.1/", "10.0.0.1/x", "::1/129",
                                      "10.0.0", "example.org", "[10.0.0.1]", "[::1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char conf[128], want[256];
        snprintf(conf, sizeof conf, "$HTTP[\"remoteip\"] == \"%s\" { a = 1 }\n", bad[i]);
        snprintf(want, sizeof want,
                 "test.conf:1: $HTTP[\"remoteip\"] == \"%s\": not an IP address or network "
                 "(want \"ip\" or \"ip/bits\", bits at most 32 for IPv4 and 128 for IPv6)",
                 bad[i]);
        parse_err(conf, want);
    }
    /* =~, =^ and =$ compare the address as text: anything goes. */
    sl_config_tree *t = parse_ok("$HTTP[\"remoteip\"] =^ \"10.\" { a = 1 }\n");
    sl_config_tree_free(t);
}

static void test_bad_regex(void **state)
{
    parse_err_prefix("a = 1\n\n$HTTP[\"url\"] =~ \"^/(unclosed\" { }\n",
                     "test.conf:3: bad regex \"^/(unclosed\": ");
    parse_err_prefix("$HTTP[\"url\"] == \"/\" {\n  $HTTP[\"host\"] !~ \"*x\" { }\n}\n",
                     "test.conf:2: bad regex \"*x\": ");
    /* The offset from PCRE2 is part of the message. */
    parse_err_prefix("$HTTP[\"url\"] =~ \"[a\" { }\n", "test.conf:1: bad regex \"[a\": ");
    assert_non_null(strstr(errbuf, "at offset 2"));
}

/* ---------------------------------------------------------------------------------------- */
/* else chains, nesting and evaluation                                                      */

static const char nested_conf[] =
    "doc = \"/root\"\n"                                          /* 1 */
    "$SERVER[\"socket\"] == \":80\" {\n"                          /* 2 */
    "  level = 1\n"                                              /* 3 */
    "  $HTTP[\"host\"] == \"a.example\" {\n"                      /* 4 */
    "    level = 2\n"                                            /* 5 */
    "    doc = \"/a\"\n"                                         /* 6 */
    "    $HTTP[\"url\"] =~ \"^/static/\" {\n"                     /* 7 */
    "      level = 3\n"                                          /* 8 */
    "      $HTTP[\"querystring\"] == \"raw\" { level = 4 }\n"     /* 9 */
    "      else $HTTP[\"querystring\"] =~ \"^v=\" { level = 41 }\n" /* 10 */
    "      else { level = 42 }\n"                                /* 11 */
    "    } else $HTTP[\"url\"] == \"/\" {\n"                      /* 12 */
    "      level = 30\n"                                         /* 13 */
    "    }\n"                                                    /* 14 */
    "    tail = \"a\"\n"                                         /* 15 */
    "  }\n"                                                      /* 16 */
    "  else $HTTP[\"host\"] =~ \"^b\\.\" { doc = \"/b\" }\n"     /* 17 */
    "  else { doc = \"/other\" }\n"                              /* 18 */
    "}\n"                                                        /* 19 */
    "else { doc = \"/not80\" }\n"                                /* 20 */
    "extra = 1\n";                                               /* 21 */

static void test_nested_structure(void **state)
{
    sl_config_tree *t = parse_ok(nested_conf);
    const sl_cblock *r = t->root;
    assert_int_equal(r->n_assigns, 2);
    assert_int_equal(r->n_children, 1);
    const sl_cblock *s80 = r->children[0];
    assert_int_equal(s80->field, SL_COND_SOCKET);
    const sl_cblock *snot = s80->else_next;
    assert_non_null(snot);
    assert_true(snot->is_else);
    assert_ptr_equal(snot->parent, r);
    assert_int_equal(snot->line, 20);
    assert_null(snot->else_next);
    /* A plain else repeats the condition it follows. */
    assert_int_equal(snot->field, SL_COND_SOCKET);
    assert_string_equal(snot->pattern, ":80");

    assert_int_equal(s80->n_children, 1);
    const sl_cblock *ha = s80->children[0], *hb = ha->else_next, *hother = hb->else_next;
    assert_int_equal(ha->field, SL_COND_HOST);
    assert_false(hb->is_else);
    assert_int_equal(hb->op, SL_COND_MATCH);
    assert_int_equal(hb->line, 17);
    assert_true(hother->is_else);
    assert_int_equal(hother->field, SL_COND_HOST);
    assert_int_equal(hother->op, SL_COND_MATCH);
    assert_ptr_equal(hother->re, hb->re);
    assert_ptr_equal(hb->parent, s80);
    assert_ptr_equal(hother->parent, s80);
    assert_int_equal(ha->n_assigns, 3); /* level, doc, tail */
    assert_int_equal(ha->n_children, 1);
    const sl_cblock *st = ha->children[0];
    assert_int_equal(st->n_children, 1);
    assert_int_equal(st->else_next->line, 12);
    const sl_cblock *q = st->children[0];
    assert_int_equal(q->line, 9);
    assert_int_equal(q->else_next->line, 10);
    assert_true(q->else_next->else_next->is_else);
    assert_int_equal(q->else_next->else_next->line, 11);
    assert_ptr_equal(q->else_next->else_next->parent, st);
    sl_config_tree_free(t);
}

static void test_nested_eval(void **state)
{
    sl_config_tree *t = parse_ok(nested_conf);
    struct {
        const char *socket, *url, *host, *query;
        long long level; /* -1: not set */
        const char *doc;
    } cases[] = {
        {":80", "/static/x", "a.example", "raw", 4, "/a"},
        {":80", "/static/x", "a.example", "v=2", 41, "/a"},
        {":80", "/static/x", "a.example", "", 42, "/a"},
        {":80", "/", "a.example", "raw", 30, "/a"},
        {":80", "/other", "a.example", "raw", 2, "/a"},
        {":80", "/static/x", "b.example", "raw", 1, "/b"},
        {":80", "/static/x", "c.example", "raw", 1, "/other"},
        {":81", "/static/x", "a.example", "raw", -1, "/not80"},
        {NULL, NULL, NULL, NULL, -1, "/not80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        applied a = eval(t, cases[i].socket, cases[i].url, cases[i].host, cases[i].query);
        const sl_cval *lv = applied_val(&a, "level");
        if (cases[i].level < 0) {
            assert_null(lv);
        } else {
            assert_int_val(lv, cases[i].level);
        }
        assert_str_val(applied_val(&a, "doc"), cases[i].doc);
        assert_int_val(applied_val(&a, "extra"), 1);
    }
    sl_config_tree_free(t);
}

static void test_eval_order(void **state)
{
    /* The root's assignments come first even when written after a block; an outer block's
     * before its inner blocks'; sibling chains in file order. */
    sl_config_tree *t = parse_ok("$HTTP[\"url\"] =~ \"\" {\n"
                                 "  $HTTP[\"host\"] =~ \"\" { x = \"inner\" }\n"
                                 "  x = \"outer\"\n"
                                 "  y = \"outer\"\n"
                                 "}\n"
                                 "$HTTP[\"url\"] =~ \"\" { y = \"second\" }\n"
                                 "x = \"root\"\n"
                                 "y = \"root\"\n");
    applied a = eval(t, "", "/", "h", "");
    assert_int_equal(a.calls, 6);
    assert_str_val(applied_val(&a, "x"), "inner");
    assert_str_val(applied_val(&a, "y"), "second");
    sl_config_tree_free(t);
}

static void test_eval_first_match_wins(void **state)
{
    sl_config_tree *t = parse_ok("$HTTP[\"url\"] =~ \"^/a\" { v = 1 }\n"
                                 "else $HTTP[\"url\"] =~ \"^/\" { v = 2 }\n"
                                 "else $HTTP[\"url\"] =~ \"\" { v = 3 }\n"
                                 "else { v = 4 }\n");
    applied a = eval(t, "", "/a", "", "");
    assert_int_equal(a.calls, 1);
    assert_int_val(applied_val(&a, "v"), 1);
    a = eval(t, "", "/b", "", "");
    assert_int_equal(a.calls, 1);
    assert_int_val(applied_val(&a, "v"), 2);
    a = eval(t, "", "b", "", "");
    assert_int_equal(a.calls, 1);
    assert_int_val(applied_val(&a, "v"), 3);
    sl_config_tree_free(t);
}

static void test_else_errors(void **state)
{
    parse_err("$HTTP[\"url\"] == \"/\" { } else $HTTP[\"ip\"] == \"\" { }\n",
              "test.conf:1: unsupported condition $HTTP[\"ip\"]" KNOWN_FIELDS);
}

static void test_block_depth_limit(void **state)
{
    static const char open[] = "$HTTP[\"url\"] =~ \"\" {\n";
    size_t n = SL_CONFIG_MAX_BLOCK_DEPTH + 1;
    char *text = malloc(n * (sizeof open + 2) + 16);
    assert_non_null(text);
    size_t o = 0;
    for (size_t i = 0; i < n - 1; i++) o += (size_t)sprintf(text + o, "%s", open);
    o += (size_t)sprintf(text + o, "deep = 1\n");
    for (size_t i = 0; i < n - 1; i++) o += (size_t)sprintf(text + o, "}\n");
    sl_config_tree *t = parse_ok(text);
    applied a = eval(t, "", "/", "", "");
    assert_int_val(applied_val(&a, "deep"), 1);
    sl_config_tree_free(t);

    o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(text + o, "%s", open);
    /* Reported once; every block stays open, which is an error of its own, said once. */
    parse_err(text, "test.conf:257: conditions nested too deep (more than 256 levels)\n"
                    "test.conf:256: missing '}': this block is still open at end of file "
                    "(and 255 around it)");
    free(text);
}

typedef struct walk_count {
    size_t blocks, assigns, else_blocks, socket_blocks;
    const sl_cblock *last_block;
    bool order_ok;
} walk_count;

static void walk_block_cb(const sl_cblock *b, void *ud)
{
    walk_count *w = ud;
    w->blocks++;
    w->else_blocks += b->is_else;
    w->socket_blocks += b->field == SL_COND_SOCKET;
    w->last_block = b;
}

static void walk_assign_cb(const sl_cblock *b, const sl_cassign *a, void *ud)
{
    walk_count *w = ud;
    w->assigns++;
    /* Each assignment arrives right after its own block was announced. */
    if (b != w->last_block) w->order_ok = false;
    bool in_block = false;
    for (size_t i = 0; i < b->n_assigns; i++) in_block |= &b->assigns[i] == a;
    if (!in_block) w->order_ok = false;
}

static void test_walk_visits_everything(void **state)
{
    sl_config_tree *t = parse_ok(nested_conf);
    walk_count w = {.order_ok = true};
    sl_config_walk(t, walk_assign_cb, walk_block_cb, &w);
    /* root, :80, not80, a, b, other, static, "/", raw, v=, else */
    assert_int_equal(w.blocks, 11);
    assert_int_equal(w.else_blocks, 3);
    assert_int_equal(w.socket_blocks, 2);
    assert_int_equal(w.assigns, 14);
    assert_true(w.order_ok);
    walk_count w2 = {.order_ok = true};
    sl_config_walk(t, NULL, walk_block_cb, &w2);
    assert_int_equal(w2.blocks, 11);
    walk_count w3 = {.order_ok = true};
    sl_config_walk(t, walk_assign_cb, NULL, &w3);
    assert_int_equal(w3.assigns, 14);
    sl_config_tree_free(t);
}

/* ---------------------------------------------------------------------------------------- */
/* Limits                                                                                   */

static void test_memory_limit(void **state)
{
    /* Doubling a string 40 times would need a terabyte; the arena cap stops it. */
    char text[2048];
    size_t o = (size_t)snprintf(text, sizeof text, "var.a = \"0123456789abcdef\"\n");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "var.a := var.a + var.a\n");
    parse_err_prefix(text, "test.conf:");
    assert_non_null(strstr(errbuf, "configuration too large"));

    o = (size_t)snprintf(text, sizeof text, "var.a = ( \"x\", \"y\" )\n");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "var.a += var.a\n");
    parse_err_prefix(text, "test.conf:");
    assert_non_null(strstr(errbuf, "configuration too large"));
}

static void test_keyed_append_quadratic_bounded(void **state)
{
    /* Each += of a keyed array copies the array and checks its keys: quadratic work, which the
     * memory cap bounds (the parse fails quickly instead of eating gigabytes). */
    size_t cap = 400000, o = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    o += (size_t)snprintf(text + o, cap - o, "var.m = ( \"k\" => 0 )\n");
    for (int i = 0; i < 8000; i++)
        o += (size_t)snprintf(text + o, cap - o, "var.m += ( \"k%d\" => %d )\n", i, i);
    parse_err_prefix(text, "test.conf:");
    assert_non_null(strstr(errbuf, "configuration too large"));
    /* A few hundred are fine. */
    o = (size_t)snprintf(text, cap, "m = ( \"k\" => 0 )\n");
    for (int i = 0; i < 300; i++)
        o += (size_t)snprintf(text + o, cap - o, "m += ( \"k%d\" => %d )\n", i, i);
    sl_config_tree *t = parse_ok(text);
    const sl_cval *m = val(t->root, "m");
    assert_int_equal(m->n_items, 301);
    assert_string_equal(m->items[300].key, "k299");
    sl_config_tree_free(t);
    free(text);
}

static void test_text_too_large(void **state)
{
    size_t n = SL_CONFIG_MAX_TEXT + 1;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, ' ', n);
    assert_null(sl_config_parse_string(text, n, "big.conf", NULL, errbuf, sizeof errbuf));
    assert_string_equal(errbuf, "big.conf: configuration too large (more than 8 MiB)");
    free(text);
}

static void test_small_error_buffer(void **state)
{
    char small[12];
    memset(small, 'x', sizeof small);
    assert_null(sl_config_parse_string("a = \"", 5, "test.conf", NULL, small, sizeof small));
    assert_string_equal(small, "test.conf:1");
    assert_null(sl_config_parse_string("a = \"", 5, "test.conf", NULL, NULL, 0));
}

static void test_default_name(void **state)
{
    assert_null(sl_config_parse_string("}", 1, NULL, NULL, errbuf, sizeof errbuf));
    assert_string_equal(errbuf, "<config>:1: unexpected '}' (no block is open)");
}

static void test_type_name(void **state)
{
    assert_string_equal(sl_cval_type_name(SL_CV_STRING), "string");
    assert_string_equal(sl_cval_type_name(SL_CV_INT), "integer");
    assert_string_equal(sl_cval_type_name(SL_CV_ARRAY), "array");
}

static void test_cval_strings(void **state)
{
    sl_cval s = {.type = SL_CV_STRING, .str = "x"}, i = {.type = SL_CV_INT, .num = 1};
    sl_cval empty = {.type = SL_CV_ARRAY};
    assert_true(sl_cval_strings(&empty, true));
    assert_true(sl_cval_strings(&empty, false));
    assert_false(sl_cval_strings(&s, false));
    assert_false(sl_cval_strings(&i, true));

    sl_cval_item plain[] = {{NULL, &s}, {NULL, &s}};
    sl_cval_item pairs[] = {{"a", &s}, {"b", &s}};
    sl_cval_item mixed[] = {{"a", &s}, {NULL, &s}};
    sl_cval_item not_str[] = {{"a", &s}, {"b", &i}};
    sl_cval v = {.type = SL_CV_ARRAY, .items = plain, .n_items = 2};
    assert_true(sl_cval_strings(&v, false));
    assert_false(sl_cval_strings(&v, true));
    v.items = pairs;
    assert_true(sl_cval_strings(&v, true));
    assert_false(sl_cval_strings(&v, false));
    v.items = mixed;
    assert_false(sl_cval_strings(&v, true));
    assert_false(sl_cval_strings(&v, false));
    v.items = not_str;
    assert_false(sl_cval_strings(&v, true));
}

static void test_free_null(void **state)
{
    sl_config_tree_free(NULL);
    sl_config_eval(NULL, NULL, apply_cb, NULL);
    sl_config_walk(NULL, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Includes                                                                                 */

/* lighttpd 1.4 joins a string and an integer as text, either way round, with + and +=
 * (checked with lighttpd -p: "x" + 5 is "x5", 7 + "y" is "7y"). */
static void test_string_and_integer_join(void **state)
{
    sl_config_tree *t = parse_ok("var.port = 80\n"
                                 "a = \"x\" + 5\n"
                                 "b = 7 + \"y\"\n"
                                 "c = \"s\"\nc += 3\n"
                                 "d = 4\nd += \"z\"\n"
                                 "e = \"/usr/share/lighttpd/use-ipv6.pl \" + var.port\n"
                                 "f = -2 + \"\"\n");
    assert_str_val(val(t->root, "a"), "x5");
    assert_str_val(val(t->root, "b"), "7y");
    assert_str_val(val(t->root, "c"), "s3");
    assert_str_val(val(t->root, "d"), "4z");
    assert_str_val(val(t->root, "e"), "/usr/share/lighttpd/use-ipv6.pl 80");
    assert_str_val(val(t->root, "f"), "-2");
    sl_config_tree_free(t);
}

/* include_shell runs the command with /bin/sh in the including file's directory and parses its
 * output in place, as lighttpd does (Debian's lighttpd.conf builds its MIME table this way). */
static void test_include_shell_output_is_config(void **state)
{
    make_tmpdir();
    tu_mkdir(tmpdir, "sub", 0700);
    tu_put(tmpdir, "main.conf", "a = 1\n"
                            "include \"sub/one.conf\"\n"
                            "include_shell \"printf 'c = 3\\\\nvar.v = \\\"w\\\"\\\\n'\"\n"
                            "d = var.v + \"!\"\n");
    /* In sub/: the command runs there, so it reads sub/local.conf. */
    tu_put(tmpdir, "sub/one.conf", "include_shell \"cat local.conf\"\n");
    tu_put(tmpdir, "sub/local.conf", "b = 2\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_int_val(val(t->root, "a"), 1);
    assert_int_val(val(t->root, "b"), 2);
    assert_int_val(val(t->root, "c"), 3);
    assert_str_val(val(t->root, "d"), "w!");
    assert_string_equal(find(t->root, "b")->file, "include_shell \"cat local.conf\"");
    assert_int_equal(find(t->root, "b")->line, 1);
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_shell_failures(void **state)
{
    make_tmpdir();
    char want[1024];
    tu_put(tmpdir, "exit.conf", "a = 1\ninclude_shell \"echo 'b = 2'; exit 3\"\n");
    assert_null(parse_file_in_tmp("exit.conf"));
    snprintf(want, sizeof want,
             "%s/exit.conf:2: include_shell \"echo 'b = 2'; exit 3\": it exited with status 3", tmpdir);
    assert_string_equal(errbuf, want);
    tu_put(tmpdir, "sig.conf", "include_shell \"kill -9 $$\"\n");
    assert_null(parse_file_in_tmp("sig.conf"));
    snprintf(want, sizeof want, "%s/sig.conf:1: include_shell \"kill -9 $$\": it was killed by signal 9",
             tmpdir);
    assert_string_equal(errbuf, want);
    /* An error in the output is the output's, with its line. */
    tu_put(tmpdir, "bad.conf", "include_shell \"printf 'x = 1\\\\ny = = 2\\\\n'\"\n");
    assert_null(parse_file_in_tmp("bad.conf"));
    assert_non_null(strstr(errbuf, "include_shell \"printf 'x = 1\\ny = = 2\\n'\":2: "));
    rm_tmpdir();
}

static void test_parse_file_basic(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "main.conf", "a = 1\n# c\nb = \"x\"\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    assert_non_null(t);
    char want[1024];
    snprintf(want, sizeof want, "%s/main.conf", tmpdir);
    assert_string_equal(find(t->root, "b")->file, want);
    assert_string_equal(t->root->file, want);
    assert_int_equal(find(t->root, "b")->line, 3);
    sl_config_tree_free(t);

    tu_put(tmpdir, "bad.conf", "a = 1\n\nb = \"x\n");
    assert_null(parse_file_in_tmp("bad.conf"));
    snprintf(want, sizeof want, "%s/bad.conf:3: unterminated string", tmpdir);
    assert_string_equal(errbuf, want);

    assert_null(parse_file_in_tmp("missing.conf"));
    /* The whole file: named by its path, with no line. */
    snprintf(want, sizeof want, "%s/missing.conf: cannot read config file: No such file or "
                                "directory", tmpdir);
    assert_string_equal(errbuf, want);
    assert_null(parse_file_in_tmp(""));
    snprintf(want, sizeof want, "%s/: cannot read config file: Is a directory", tmpdir);
    assert_string_equal(errbuf, want);
    rm_tmpdir();
}

static void test_include_relative(void **state)
{
    make_tmpdir();
    tu_mkdir(tmpdir, "sub", 0700);
    tu_put(tmpdir, "main.conf", "var.x = \"v\"\n"
                            "a = 1\n"
                            "include \"sub/one.conf\"\n"
                            "c = b + \"!\"\n");
    /* Relative to sub/, not to the top file or the working directory. */
    tu_put(tmpdir, "sub/one.conf", "b = var.x + \"1\"\ninclude \"two.conf\"\n");
    tu_put(tmpdir, "sub/two.conf", "\n\nd = 4\nvar.y = 5\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_int_equal(t->root->n_assigns, 4);
    assert_str_val(val(t->root, "b"), "v1");
    assert_str_val(val(t->root, "c"), "v1!");
    assert_int_val(val(t->root, "d"), 4);
    char want[1024];
    snprintf(want, sizeof want, "%s/sub/two.conf", tmpdir);
    assert_string_equal(find(t->root, "d")->file, want);
    assert_int_equal(find(t->root, "d")->line, 3);
    snprintf(want, sizeof want, "%s/main.conf", tmpdir);
    assert_string_equal(find(t->root, "c")->file, want);
    assert_int_equal(find(t->root, "c")->line, 4);
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_relative_to_cwd_name(void **state)
{
    /* A top file named without a directory resolves includes against the working directory. */
    make_tmpdir();
    tu_put(tmpdir, "top.conf", "include \"inc.conf\"\n");
    tu_put(tmpdir, "inc.conf", "x = 1\n");
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    sl_config_tree *t = sl_config_parse_file("top.conf", errbuf, sizeof errbuf);
    assert_int_equal(chdir(cwd), 0);
    if (!t) fail_msg("%s", errbuf);
    assert_string_equal(find(t->root, "x")->file, "inc.conf");
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_string_basedir(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "inc.conf", "x = 1\n");
    const char *text = "include \"inc.conf\"\n";
    sl_config_tree *t =
        sl_config_parse_string(text, strlen(text), "str", tmpdir, errbuf, sizeof errbuf);
    if (!t) fail_msg("%s", errbuf);
    assert_int_val(val(t->root, "x"), 1);
    sl_config_tree_free(t);
    /* An absolute include ignores the base directory. */
    char abs[1024];
    snprintf(abs, sizeof abs, "include \"%s/inc.conf\"\ny = x", tmpdir);
    t = sl_config_parse_string(abs, strlen(abs), "str", "/nonexistent", errbuf, sizeof errbuf);
    if (!t) fail_msg("%s", errbuf);
    assert_int_val(val(t->root, "y"), 1);
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_glob(void **state)
{
    make_tmpdir();
    tu_mkdir(tmpdir, "conf.d", 0700);
    tu_put(tmpdir, "main.conf", "m = ( \"base\" )\n"
                            "include \"conf.d/*.conf\"\n"
                            "include \"empty.d/*.conf\"\n"
                            "include \"conf.d/nothing-*.conf\"\n");
    tu_put(tmpdir, "conf.d/20-b.conf", "m += \"b\"\n");
    tu_put(tmpdir, "conf.d/10-a.conf", "m += \"a\"\n");
    tu_put(tmpdir, "conf.d/30-c.conf", "m += \"c\"\n");
    tu_put(tmpdir, "conf.d/ignored.txt", "this is not = config ;\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    if (!t) fail_msg("%s", errbuf);
    /* glob(3) sorts: files are read in name order. */
    assert_strlist(val(t->root, "m"), "base", "a", "b", "c", NULL);
    char want[1024];
    snprintf(want, sizeof want, "%s/conf.d/30-c.conf", tmpdir);
    assert_string_equal(find(t->root, "m")->file, want);
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_glob_dir_with_metachars(void **state)
{
    /* Glob characters in the including file's directory are literal, not a pattern. */
    make_tmpdir();
    tu_mkdir(tmpdir, "a[1]", 0700);
    tu_mkdir(tmpdir, "a1", 0700);
    tu_put(tmpdir, "a[1]/main.conf", "include \"*.inc\"\n");
    tu_put(tmpdir, "a[1]/x.inc", "from = \"bracket\"\n");
    tu_put(tmpdir, "a1/x.inc", "from = \"a1\"\n");
    sl_config_tree *t = parse_file_in_tmp("a[1]/main.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_str_val(val(t->root, "from"), "bracket");
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_missing(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "main.conf", "a = 1\n\ninclude \"nope.conf\"\n");
    assert_null(parse_file_in_tmp("main.conf"));
    char want[1024];
    snprintf(want, sizeof want,
             "%s/main.conf:3: cannot include \"%s/nope.conf\": No such file or directory", tmpdir,
             tmpdir);
    assert_string_equal(errbuf, want);
    tu_put(tmpdir, "empty.conf", "include \"\"\n");
    assert_null(parse_file_in_tmp("empty.conf"));
    snprintf(want, sizeof want, "%s/empty.conf:1: include of an empty path", tmpdir);
    assert_string_equal(errbuf, want);
    rm_tmpdir();
}

static void test_include_error_location(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "main.conf", "a = 1\ninclude \"inc.conf\"\n");
    tu_put(tmpdir, "inc.conf", "b = 2\nc = 3\n$HTTP[\"remoteip\"] == \"x\" { }\n");
    /* A bad network is a meaning error: reported at its line, the block read on. */
    assert_null(parse_file_in_tmp("main.conf"));
    char want[1024];
    snprintf(want, sizeof want, "%s/inc.conf:3: $HTTP[\"remoteip\"] == \"x\": not an IP address or network (want "
             "\"ip\" or \"ip/bits\", bits at most 32 for IPv4 and 128 for IPv6)",
             tmpdir);
    assert_string_equal(errbuf, want);
    rm_tmpdir();
}

static void test_include_self_depth_limit(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "self.conf", "include \"self.conf\"\n");
    assert_null(parse_file_in_tmp("self.conf"));
    char want[1024];
    snprintf(want, sizeof want,
             "%s/self.conf:1: include nesting too deep (more than 16 levels) at \"self.conf\"",
             tmpdir);
    assert_string_equal(errbuf, want);
    rm_tmpdir();
}

static void test_include_depth_exact(void **state)
{
    /* A chain of exactly 16 nested includes is allowed; 17 is not. */
    make_tmpdir();
    char name[32], body[64];
    for (int i = 0; i < 17; i++) {
        snprintf(name, sizeof name, "f%d.conf", i);
        snprintf(body, sizeof body, "include \"f%d.conf\"\n", i + 1);
        tu_put(tmpdir, name, body);
    }
    tu_put(tmpdir, "f17.conf", "leaf = 17\n");
    tu_put(tmpdir, "f16.conf", "leaf = 16\n");
    sl_config_tree *t = parse_file_in_tmp("f0.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_int_val(val(t->root, "leaf"), 16);
    sl_config_tree_free(t);
    tu_put(tmpdir, "f16.conf", "include \"f17.conf\"\n");
    assert_null(parse_file_in_tmp("f0.conf"));
    assert_non_null(strstr(errbuf, "/f16.conf:1: include nesting too deep"));
    rm_tmpdir();
}

static void test_include_fanout_limit(void **state)
{
    /* Ten levels that each include the next twice would read 2046 files; the count stops it. */
    make_tmpdir();
    char name[32], body[96];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "t%d.conf", i);
        snprintf(body, sizeof body, "include \"t%d.conf\"\ninclude \"t%d.conf\"\n", i + 1, i + 1);
        tu_put(tmpdir, name, body);
    }
    tu_put(tmpdir, "t10.conf", "# leaf\n");
    assert_null(parse_file_in_tmp("t0.conf"));
    if (!strstr(errbuf, "/t1.conf:1: too many included files (more than 1024)"))
        fail_msg("%s", errbuf);
    /* A file including itself twice hits the depth limit first. */
    tu_put(tmpdir, "twice.conf", "include \"twice.conf\"\ninclude \"twice.conf\"\n");
    assert_null(parse_file_in_tmp("twice.conf"));
    assert_non_null(strstr(errbuf, "/twice.conf:1: include nesting too deep"));
    rm_tmpdir();
}

static void test_include_inside_block(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "main.conf", "$HTTP[\"url\"] =~ \"^/x\" {\n"
                            "  include \"inner.conf\"\n"
                            "  after = 1\n"
                            "}\n");
    tu_put(tmpdir, "inner.conf",
               "in = \"yes\"\n$HTTP[\"host\"] == \"h\" { deeper = 1 } else { e = 1 }\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_int_equal(t->root->n_assigns, 0);
    const sl_cblock *x = t->root->children[0];
    assert_str_val(val(x, "in"), "yes");
    assert_int_val(val(x, "after"), 1);
    assert_int_equal(x->n_children, 1);
    assert_true(x->children[0]->else_next->is_else);
    applied a = eval(t, "", "/x", "h", "");
    assert_int_val(applied_val(&a, "deeper"), 1);
    sl_config_tree_free(t);
    rm_tmpdir();
}

static void test_include_unbalanced(void **state)
{
    make_tmpdir();
    char want[1024];
    /* A '}' in an included file cannot close a block of the including file. */
    tu_put(tmpdir, "main.conf", "$HTTP[\"url\"] =~ \"^/x\" {\n  include \"close.conf\"\n");
    tu_put(tmpdir, "close.conf", "a = 1\n}\n");
    assert_null(parse_file_in_tmp("main.conf"));
    snprintf(want, sizeof want, "%s/close.conf:2: unexpected '}' (no block is open)\n"
             "%s/main.conf:1: missing '}': this block is still open at end of file", tmpdir,
             tmpdir);
    assert_string_equal(errbuf, want);
    /* A block opened in an included file must close there. */
    tu_put(tmpdir, "main.conf", "include \"open.conf\"\n}\n");
    tu_put(tmpdir, "open.conf", "\n$HTTP[\"url\"] =~ \"^/x\" {\n");
    assert_null(parse_file_in_tmp("main.conf"));
    snprintf(want, sizeof want, "%s/open.conf:2: missing '}': this block is still open at end of "
             "file\n%s/main.conf:2: unexpected '}' (no block is open)", tmpdir, tmpdir);
    assert_string_equal(errbuf, want);
    /* `else` cannot continue a chain across a file boundary. */
    tu_put(tmpdir, "main.conf", "$HTTP[\"url\"] =~ \"^/x\" { }\ninclude \"else.conf\"\n");
    tu_put(tmpdir, "else.conf", "else { a = 1 }\n");
    assert_null(parse_file_in_tmp("main.conf"));
    snprintf(want, sizeof want, "%s/else.conf:1: 'else' without a condition block right before it",
             tmpdir);
    assert_string_equal(errbuf, want);
    rm_tmpdir();
}

static void test_include_directory(void **state)
{
    make_tmpdir();
    tu_mkdir(tmpdir, "d", 0700);
    tu_put(tmpdir, "main.conf", "include \"d\"\n");
    assert_null(parse_file_in_tmp("main.conf"));
    assert_non_null(strstr(errbuf, "main.conf:1: cannot include"));
    assert_non_null(strstr(errbuf, "Is a directory"));
    rm_tmpdir();
}

static void test_include_var_path(void **state)
{
    make_tmpdir();
    tu_put(tmpdir, "main.conf", "var.confdir = \"parts\"\ninclude var.confdir + \"/p.conf\"\n");
    tu_mkdir(tmpdir, "parts", 0700);
    tu_put(tmpdir, "parts/p.conf", "p = 1\n");
    sl_config_tree *t = parse_file_in_tmp("main.conf");
    if (!t) fail_msg("%s", errbuf);
    assert_int_val(val(t->root, "p"), 1);
    sl_config_tree_free(t);
    rm_tmpdir();
}

/* ---------------------------------------------------------------------------------------- */
/* Inputs cut off mid-construct (the shapes a fuzzer produces first)                        */

static void test_truncated_inputs(void **state)
{
    /* Each must be rejected with a message, reading nothing past the given length. */
    static const char *const cases[] = {
        "a=\"", "$", "-", "a=(", "a=(\"k\"=>", "$HTTP[\"url\"]=~\"\"{}else", "a=1+", "}else{",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Exactly strlen bytes, no terminating NUL visible to the parser. */
        size_t n = strlen(cases[i]);
        char *copy = tu_copy(cases[i], n);
        sl_config_tree *t = sl_config_parse_string(copy, n, "f", NULL, errbuf, sizeof errbuf);
        free(copy);
        assert_null(t);
        assert_true(strncmp(errbuf, "f:", 2) == 0);
    }
}

/* ---- Every error in one run: recovery after syntax errors, meaning errors reported on ---- */

static sl_config_tree *parse_all(const char *text, sl_config_errors *errs)
{
    memset(errs, 0, sizeof *errs);
    return sl_config_parse_string_all(text, strlen(text), "test.conf", NULL, errs);
}

static void assert_errors(const sl_config_errors *errs, const char *const *want, size_t n)
{
    char all[4096];
    sl_config_errors_join(errs, all, sizeof all);
    if (errs->n != n) fail_msg("%zu errors, wanted %zu:\n%s", errs->n, n, all);
    for (size_t i = 0; i < n; i++)
        if (strncmp(errs->msg[i], want[i], strlen(want[i])) != 0)
            fail_msg("error %zu is '%s', wanted '%s'", i, errs->msg[i], want[i]);
}

static void test_every_error_reported(void **state)
{
    static const char text[] =
        "a = 12abc\n"                      /* 1: lexer error */
        "b = 2\n"
        "c = ( \"x\" \"y\" )\n"              /* 3: syntax error inside an array */
        "d = 4\n"
        "$HTTP[\"frob\"] == \"x\" {\n"  /* 5: meaning: the block is read on */
        "  e = var.nope\n"                 /* 6: unknown variable, inside it */
        "}\n"
        "f = 1\n"
        "f = 2\n"                          /* 9: duplicate key */
        "$HTTP[\"url\"] =~ \"(\" { g = 1 }\n" /* 10: bad regex */
        "h = \"ok\"\n"
        "i = ( 1,\n"                       /* 12: array cut short by the next statement */
        "j = 5\n"
        "k = ;\n";                         /* 14: lexer error at the end */
    static const char *const want[] = {
        "test.conf:1: invalid integer '12abc'",
        "test.conf:3: expected ',' or ')' in array, got string \"y\"",
        "test.conf:5: unsupported condition $HTTP[\"frob\"]" KNOWN_FIELDS,
        "test.conf:6: unknown variable 'var.nope'",
        "test.conf:9: duplicate config key 'f'; use := to override",
        "test.conf:10: bad regex \"(\": ",
        "test.conf:13: unterminated array (opened on line 12)",
        "test.conf:14: unexpected ';'",
    };
    sl_config_errors errs;
    sl_config_tree *t = parse_all(text, &errs);
    assert_non_null(t);
    assert_true(t->partial);
    assert_errors(&errs, want, sizeof want / sizeof want[0]);
    /* What was right is in the tree, for the checks that follow parsing. */
    assert_int_val(val(t->root, "b"), 2);
    assert_int_val(val(t->root, "d"), 4);
    assert_int_val(val(t->root, "f"), 2);
    assert_str_val(val(t->root, "h"), "ok");
    assert_int_val(val(t->root, "j"), 5);
    assert_null(find(t->root, "a"));
    assert_null(find(t->root, "c"));
    /* Both condition blocks are there (placeholders: they never match) with their statements. */
    assert_int_equal(t->root->n_children, 2);
    assert_int_val(val(t->root->children[1], "g"), 1);
    applied ap = eval(t, ":80", "(", "x", "");
    assert_null(applied_val(&ap, "g"));
    sl_config_tree_free(t);
    /* The single-buffer interface gives the same, one per line, and no tree. */
    assert_null(sl_config_parse_string(text, strlen(text), "test.conf", NULL, errbuf,
                                       sizeof errbuf));
    assert_non_null(strstr(errbuf, "test.conf:1: invalid integer '12abc'\ntest.conf:3: "));
    sl_config_errors_free(&errs);
}

static void test_recovery_keeps_blocks_balanced(void **state)
{
    /* A condition that does not parse still opens a (placeholder) block: its '}' closes that,
     * not the block around it, and its statements are read. */
    static const char text[] =
        "$HTTP[\"host\"] == \"h\" {\n"
        "  $HTTP[\"url\"] == {\n"     /* 2: no value */
        "    a = 1\n"
        "    b = ( 1,\n"
        "  }\n"                        /* 5: cuts the array short, closes the placeholder */
        "  c = 3\n"
        "}\n"
        "d = 4\n";
    static const char *const want[] = {
        "test.conf:2: expected a value, got '{'",
        "test.conf:5: expected a value, got '}'",
    };
    sl_config_errors errs;
    sl_config_tree *t = parse_all(text, &errs);
    assert_non_null(t);
    assert_errors(&errs, want, 2);
    const sl_cblock *host = t->root->children[0];
    assert_int_equal(t->root->n_children, 1);
    assert_int_val(val(host, "c"), 3);
    assert_int_equal(host->n_children, 1);
    assert_int_val(val(host->children[0], "a"), 1);
    assert_int_val(val(t->root, "d"), 4);
    sl_config_tree_free(t);
    sl_config_errors_free(&errs);
}

static void test_failed_names_are_not_reported_again(void **state)
{
    /* The variable's own error is the one reported; its uses are consequences. */
    static const char text[] = "var.x = ( \"a\" \"b\" )\ny = var.x\nz = var.x + \"c\"\n";
    static const char *const want[] = {"test.conf:1: expected ',' or ')' in array"};
    sl_config_errors errs;
    sl_config_tree *t = parse_all(text, &errs);
    assert_errors(&errs, want, 1);
    sl_config_tree_free(t);
    sl_config_errors_free(&errs);
}

static void test_too_many_errors(void **state)
{
    /* Reading stops after SL_CONFIG_MAX_ERRORS with a message that says so. */
    size_t n = SL_CONFIG_MAX_ERRORS + 50;
    char *text = malloc(n * 8 + 1);
    assert_non_null(text);
    text[0] = 0;
    for (size_t i = 0; i < n; i++) strcat(text, "a = ;\n");
    sl_config_errors errs;
    assert_null(parse_all(text, &errs));
    assert_int_equal(errs.n, SL_CONFIG_MAX_ERRORS + 1);
    assert_non_null(strstr(errs.msg[errs.n - 1], "too many errors (200); not reading further"));
    free(text);
    sl_config_errors_free(&errs);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_article_config),
        cmocka_unit_test(test_empty_config),
        cmocka_unit_test(test_key_names),
        cmocka_unit_test(test_comments_and_whitespace),
        cmocka_unit_test(test_string_escapes),
        cmocka_unit_test(test_regex_escape_reaches_pcre),
        cmocka_unit_test(test_string_spanning_lines),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_length_not_nul_terminated),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_large_array),
        cmocka_unit_test(test_array_depth_limit),
        cmocka_unit_test(test_plus_operator),
        cmocka_unit_test(test_force_override),
        cmocka_unit_test(test_same_key_in_different_blocks),
        cmocka_unit_test(test_append_semantics),
        cmocka_unit_test(test_append_from_enclosing_block),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_variable_visible_after_block),
        cmocka_unit_test(test_key_references),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_condition_fields_and_ops),
        cmocka_unit_test(test_condition_null_inputs),
        cmocka_unit_test(test_condition_exact_compare),
        cmocka_unit_test(test_host_condition_ports),
        cmocka_unit_test(test_host_pattern_never_matching_refused),
        cmocka_unit_test(test_condition_value_expression),
        cmocka_unit_test(test_unsupported_condition),
        cmocka_unit_test(test_condition_more_fields),
        cmocka_unit_test(test_remoteip_refused),
        cmocka_unit_test(test_bad_regex),
        cmocka_unit_test(test_nested_structure),
        cmocka_unit_test(test_nested_eval),
        cmocka_unit_test(test_eval_order),
        cmocka_unit_test(test_eval_first_match_wins),
        cmocka_unit_test(test_else_errors),
        cmocka_unit_test(test_every_error_reported),
        cmocka_unit_test(test_recovery_keeps_blocks_balanced),
        cmocka_unit_test(test_failed_names_are_not_reported_again),
        cmocka_unit_test(test_too_many_errors),
        cmocka_unit_test(test_block_depth_limit),
        cmocka_unit_test(test_walk_visits_everything),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_keyed_append_quadratic_bounded),
        cmocka_unit_test(test_text_too_large),
        cmocka_unit_test(test_small_error_buffer),
        cmocka_unit_test(test_default_name),
        cmocka_unit_test(test_type_name),
        cmocka_unit_test(test_cval_strings),
        cmocka_unit_test(test_free_null),
        cmocka_unit_test(test_string_and_integer_join),
        cmocka_unit_test(test_include_shell_output_is_config),
        cmocka_unit_test(test_include_shell_failures),
        cmocka_unit_test(test_parse_file_basic),
        cmocka_unit_test(test_include_relative),
        cmocka_unit_test(test_include_relative_to_cwd_name),
        cmocka_unit_test(test_include_string_basedir),
        cmocka_unit_test(test_include_glob),
        cmocka_unit_test(test_include_glob_dir_with_metachars),
        cmocka_unit_test(test_include_missing),
        cmocka_unit_test(test_include_error_location),
        cmocka_unit_test(test_include_self_depth_limit),
        cmocka_unit_test(test_include_depth_exact),
        cmocka_unit_test(test_include_fanout_limit),
        cmocka_unit_test(test_include_inside_block),
        cmocka_unit_test(test_include_unbalanced),
        cmocka_unit_test(test_include_directory),
        cmocka_unit_test(test_include_var_path),
        cmocka_unit_test(test_truncated_inputs))
