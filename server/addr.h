/* Socket addresses as configs spell them: "ip:port", "[ip6]:port", ":port", networks "ip/bits". */
#ifndef SL_ADDR_H
#define SL_ADDR_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;
struct sockaddr_storage;

/* Split "host:port" or "[ipv6]:port" into host (may come out empty: ":80"; 256 bytes) and a
 * port number 1..65535 whose digits *port points at. 0 or -EINVAL. */
int sl_split_host_port(const char *spec, char host[256], const char **port, long *pn);

/* Canonical "ip:port" / "[ip6]:port" form of a socket spec (":80", "host:port", "[::1]:80").
 * Resolves names with getaddrinfo (start-up only). Returns 0 or a negative errno / -EINVAL. */
int sl_socket_canonical(const char *spec, char *out, size_t outlen);

/* Parse "ip/bits" or "ip" (IPv4 or IPv6) into net (16 bytes), family and prefix length.
 * 0 or -EINVAL. */
int sl_cidr_parse(const char *s, unsigned char net[16], int *family, int *bits);

/* Whether the address lies in the network cidr (IPv4-mapped IPv6 matches IPv4 networks). */
bool sl_cidr_match(const char *cidr, const struct sockaddr *sa);

/* A network parsed once (sl_cidr_parse's result), for matching many addresses. */
typedef struct sl_net {
    unsigned char addr[16];
    int family; /* AF_INET or AF_INET6 */
    int bits;
} sl_net;

/* Whether sa lies in net (IPv4-mapped IPv6 addresses match IPv4 networks). */
bool sl_net_match(const sl_net *net, const struct sockaddr *sa);

/* Parse a numeric IPv4 or IPv6 address (no port, no brackets) into *out with port 0.
 * 0 or -EINVAL. */
int sl_addr_parse(const char *s, size_t len, struct sockaddr_storage *out);

/* The numeric host of sa ("127.0.0.1", "::1"; "-" for other families) into buf (64 bytes is
 * enough), and its port into *port when port is not NULL. */
void sl_addr_str(const struct sockaddr *sa, char *buf, size_t buflen, int *port);

#endif
