/* A client of the Confluent Schema Registry REST API (what Confluent, Apicurio's ccompat,
 * Karapace and Redpanda serve): writer schemas by id, and registration under a subject.
 *
 * Credentials never come from argv: RECLASS_SCHEMA_REGISTRY_USER_INFO ("user:password", basic
 * auth, as Confluent clients' basic.auth.user.info), RECLASS_SCHEMA_REGISTRY_TOKEN (a bearer
 * token), or a file (cfg.auth_file) holding "basic user:password" or "bearer TOKEN". TLS
 * verifies the server against the system's CAs or cfg.ca_file. Not thread-safe: one per
 * thread. */
#ifndef RECLASS_CONSUMERS_SCHEMA_REGISTRY_H
#define RECLASS_CONSUMERS_SCHEMA_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct consumers_registry consumers_registry_t;

typedef struct {
    const char *url;       /* http(s)://host:port[/prefix] */
    const char *ca_file;   /* NULL: the system's CA store */
    const char *auth_file; /* NULL: the environment, or none */
    int timeout_ms;        /* 0: CONSUMERS_REGISTRY_TIMEOUT_MS */
} consumers_registry_cfg_t;

#define CONSUMERS_REGISTRY_TIMEOUT_MS 5000

/* What a lookup comes to (common_status_t): COMMON_OK; COMMON_MISSING, the registry answered
 * that it has no such schema id (40403); COMMON_RETRY, unreachable, timed out, 5xx, 429: ask
 * again later; COMMON_FATAL, it refused us (401/403), TLS, a bad URL: fix the setup. */

/* COMMON_OK; COMMON_USAGE with e, an unreadable auth file or a URL that is no http(s) URL;
 * COMMON_FATAL, out of memory or libcurl failed to start. */
common_status_t consumers_registry_open(const consumers_registry_cfg_t *cfg,
                                        consumers_registry_t **out, common_err_t *e);
void consumers_registry_free(consumers_registry_t *r);

/* The writer schema of id, as JSON text (*schema malloc'd, the caller frees). A schema of
 * another type than AVRO is COMMON_MISSING with a message saying so. */
common_status_t consumers_registry_schema(consumers_registry_t *r, int32_t id, char **schema,
                                          common_err_t *e);

/* Registers schema (JSON text) under subject (Confluent's TopicNameStrategy names it
 * "<topic>-value") or finds it there; *id is the registry's id. */
common_status_t consumers_registry_register(consumers_registry_t *r, const char *subject,
                                            const char *schema, int32_t *id, common_err_t *e);

/* The URL without user:password@, for messages. */
const char *consumers_registry_url(const consumers_registry_t *r);

#endif
