#include "consumers/ticket.h"

#include <stdlib.h>

void consumers_ticket_free(consumers_ticket_t *t) {
    if (!t) return;
    free(t->job_id);
    free(t->tenant);
    free(t->ticket_id);
    free(t->text);
    t->job_id = t->tenant = t->ticket_id = t->text = NULL;
    t->text_len = 0;
}
