/* A per-thread object: made, zeroed, on a thread's first call and freed when the thread ends,
 * so that shared read-only state (a tokenizer) can keep growable scratch per thread. */
#ifndef RECLASS_COMMON_TLS_H
#define RECLASS_COMMON_TLS_H

#include <pthread.h>
#include <stddef.h>

typedef struct {
    size_t size;             /* bytes of the object */
    void (*release)(void *); /* frees what the object holds (not the object); may be NULL */
    int ready;               /* the key below is made (or failed: key_ok 0) */
    int key_ok;
    pthread_key_t key;
} common_tls_t;

/* A static common_tls_t for objects of type T, released by release. */
#define COMMON_TLS_INIT(T, release)                                                                \
    { sizeof(T), (release), 0, 0, 0 }

/* The calling thread's object, or NULL when out of memory. */
void *common_tls_get(common_tls_t *t);

#endif
