/* Singly linked FIFO queues kept as a pair of pointers to the first and the last node, linked
 * through a pointer field the caller names (next, wait_next, fnext...): the chunk queue, the
 * thread pool's job queue and completion ports, the network backends' and the gateway's wait
 * lists. Only the append is shared; each queue takes nodes off its own way. */
#ifndef SL_QUEUE_H
#define SL_QUEUE_H

/* Append the chain first..last (linked through field, last->field already NULL) behind the
 * queue whose first node is head and last node is tail (both NULL when it is empty). head and
 * tail are lvalues; every argument may be evaluated more than once, so pass plain names and
 * members, nothing with side effects. */
#define SL_QUEUE_APPEND_CHAIN(head, tail, first, last, field)                                      \
    do {                                                                                           \
        if (tail)                                                                                  \
            (tail)->field = (first);                                                               \
        else                                                                                       \
            (head) = (first);                                                                      \
        (tail) = (last);                                                                           \
    } while (0)

/* Append the node x (x->field already NULL) behind the queue head..tail, as above. */
#define SL_QUEUE_APPEND(head, tail, x, field) SL_QUEUE_APPEND_CHAIN(head, tail, x, x, field)

#endif
