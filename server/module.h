/* The module interface: one table of hooks per module. */
#ifndef SL_MODULE_H
#define SL_MODULE_H

struct sl_conn;

/* What a hook tells the core. */
typedef enum {
    SL_GO_ON,    /* not mine, or nothing to do: ask the next module */
    SL_FINISHED, /* the response is ready in the connection (status, headers, body queue) */
    SL_WAIT,     /* work is in flight; the module resumes the connection when it completes */
    SL_ERROR,    /* failed; c->status (or c->error, a negative errno) says how */
} sl_hresult;

/* A module's hooks. Any hook may be NULL. */
typedef struct sl_module {
    const char *name;
    /* Produce a response for the request in c, or pass with SL_GO_ON. */
    sl_hresult (*handle_request)(struct sl_conn *c);
    /* The request ended (sent, failed or aborted): release what handle_request kept. */
    void (*request_done)(struct sl_conn *c);
} sl_module;

#endif
