/* The table of proxy-core's protocols (proto.h): looked up by name at start-up. */
#include <string.h>

#include "proto.h"

const sl_proxy_proto *sl_proxy_proto_find(const char *name)
{
    static const sl_proxy_proto *const all[] = {&sl_proxy_fastcgi, &sl_proxy_http, NULL};
    for (size_t i = 0; all[i]; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}
