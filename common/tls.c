#include "common/tls.h"

#include <stddef.h>
#include <stdlib.h>

/* Each object sits behind a header that remembers how it is released: a key's destructor is
 * handed the value alone. */
typedef struct {
    void (*release)(void *);
    max_align_t align[];
} tls_head_t;

static void tls_free(void *p) {
    tls_head_t *h = p;
    if (h->release) h->release(h->align);
    free(h);
}

static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER; /* making keys */

void *common_tls_get(common_tls_t *t) {
    if (!__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&tls_mu);
        if (!t->ready) {
            t->key_ok = pthread_key_create(&t->key, tls_free) == 0;
            __atomic_store_n(&t->ready, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&tls_mu);
    }
    if (!t->key_ok) return NULL;
    tls_head_t *h = pthread_getspecific(t->key);
    if (h) return h->align;
    h = calloc(1, sizeof(*h) + t->size);
    if (!h) return NULL;
    h->release = t->release;
    if (pthread_setspecific(t->key, h) != 0) {
        free(h);
        return NULL;
    }
    return h->align;
}
