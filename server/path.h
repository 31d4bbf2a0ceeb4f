/* Request-target handling: splitting it (RFC 9112 §3.2) and turning its path into something safe to
 * append to a document root, and back into a URI path for Location headers. Pure. */
#ifndef SL_PATH_H
#define SL_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Split a request-target into path, query and authority. Accepted forms:
 *   origin-form    "/a/b?q"                path "/a/b", query "q"
 *   absolute-form  "http://host:80/a?q"    scheme http or https (case-insensitive), authority "host:80";
 *                                          an empty path ("http://host?q") gives path_len 0 (pointer at
 *                                          the place the path would start), which means "/" (RFC 9110
 *                                          §4.2.3): the caller must substitute "/" before normalizing
 *   asterisk-form  "*"                     path "*" (length 1)
 * Outputs point into target. An absent query has *query NULL and *query_len 0 ("/a?" has an empty,
 * non-NULL query); an absent authority has *auth_len 0. The query is not validated beyond the
 * characters below. Returns 0, or -EINVAL when the target is none of those forms, contains a control
 * byte (0x00-0x1f, 0x7f), a space or a '#', or (absolute-form) has an empty host, userinfo ("@"),
 * a non-numeric port or characters outside the RFC 3986 authority grammar. Bytes >= 0x80 are let
 * through in path and query, as real clients send raw UTF-8. */
int sl_uri_split(const char *target, size_t len, const char **path, size_t *path_len, const char **query,
                 size_t *query_len, const char **auth, size_t *auth_len);

/* The reg-name at the start of s[0..len) (RFC 3986 §3.2.2: unreserved, sub-delims and
 * pct-encoded; it also covers IPv4address), which runs to the first ':' or the end: returns its
 * length (0 when s starts with ':' or len is 0), or -1 when a byte outside that alphabet or a '%'
 * without two hex digits comes first. The host part of a Host field and of an absolute-form
 * authority that is not an IP-literal. */
ssize_t sl_uri_reg_name(const char *s, size_t len);

/* Is s[0..len) an optional port as it follows the host in an authority: empty, or ":" *DIGIT
 * (RFC 3986 §3.2.3; the value is not checked)? */
bool sl_uri_port(const char *s, size_t len);

/* Is s[0..n) an IPv4address as RFC 3986 §3.2.2 writes it: four dec-octets (0..255, no leading
 * zeros) separated by dots? */
bool sl_ipv4_literal(const char *s, size_t n);

/* Normalize a Host field value or an absolute-form authority h[0..len) into the form conditions
 * ($HTTP["host"]), the access log (%V) and proxy-core see, as lighttpd does (RFC 3986 §6.2.2):
 *   - a name is lower-cased and loses one trailing dot ("Example.COM." -> "example.com"); it is
 *     dot-separated labels of letters, digits and '-', none empty, none starting with '-';
 *   - a name whose last label is all digits must be an IPv4address as RFC 3986 writes it (four
 *     decimal octets, no leading zeros, which some parsers read as octal);
 *   - an IPv6 literal "[...]" is written the canonical way (inet_ntop: "[0:0::1]" -> "[::1]");
 *     IPvFuture and zone identifiers are refused;
 *   - the port, when present, is 1..65535 in decimal without leading zeros; an empty port and
 *     default_port (80 for http) are dropped ("example.com:80" -> "example.com").
 * The output is NUL-terminated. Returns its length, -EINVAL for an empty or invalid value
 * (answered 400), -ENAMETOOLONG when it does not fit in outcap bytes with the NUL. */
ssize_t sl_host_normalize(const char *h, size_t len, unsigned default_port, char *out,
                          size_t outcap);

/* Percent-decode path[0..len), reject what must never reach the filesystem, and normalize it:
 * "." and ".." segments are removed as in RFC 3986 §5.2.4 ("never above /": "/../x" is "/x"),
 * repeated slashes are merged. %2F decodes to a separator and decoded dot segments ("%2e%2E") are
 * removed like literal ones, so the result never contains "//", "/./" or "/../" and never ends in
 * "/." or "/..". The output is NUL-terminated, starts with '/', and ends with '/' when the input's
 * last segment was empty, "." or ".." ("/dir/" and "/dir/." both give "/dir/").
 * Returns the output length (without the NUL); -EINVAL for an empty path, a path not starting with
 * '/', a '%' not followed by two hex digits, or a NUL or control byte (0x01-0x1f, 0x7f) whether
 * literal or decoded; -ENAMETOOLONG when the normalized result plus its NUL exceeds outcap.
 * Validation covers the whole input, so -EINVAL wins over -ENAMETOOLONG; a long intermediate that
 * ".." later shortens does not count as too long. */
ssize_t sl_path_normalize(const char *path, size_t len, char *out, size_t outcap);

/* Percent-encode path[0..len) (a decoded, normalized path) for a Location header: every byte outside
 * RFC 3986 pchar and '/' becomes %XX (upper-case hex); a literal '%' becomes %25. The output is
 * NUL-terminated. Returns its length (without the NUL), or -ENAMETOOLONG when it does not fit in
 * outcap bytes including the NUL. */
ssize_t sl_path_encode(const char *path, size_t len, char *out, size_t outcap);

/* The request-target as lighttpd's rewrite and redirect rules see it (its default
 * http-parseopts, which seekless always applies): %-escapes of unreserved characters (RFC 3986
 * §2.3) are decoded, the hex digits of the others upper-cased, bytes above 0x7e encoded
 * (url-normalize-unreserved, -required); in the path (up to '?') "%2F" is a '/'
 * (url-path-2f-decode) and "." / ".." / empty segments are resolved (url-path-dotseg-remove; a
 * trailing '/' stays). Writes a NUL-terminated string; returns its length, or -1 when it does
 * not fit in cap bytes. */
ssize_t sl_target_normalize(const char *t, size_t n, char *out, size_t cap);

#endif
