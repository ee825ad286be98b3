/* What the pipeline's in-process tests share (tests/test_pipeline_mock.c, test_pipeline_lanes.c):
 * the embedded Kafka (consumers/mock_broker.h) with PARTS partitions a topic, a throwaway
 * PostgreSQL (tests/lib/pg_tmp.sh) with the migrations applied, CLINC150 texts, producing
 * tickets, reading the database and the group's offsets, and a worker's settings. */
#ifndef RECLASS_TESTS_PIPE_MOCK_H
#define RECLASS_TESTS_PIPE_MOCK_H

#include <librdkafka/rdkafka.h>

#include "consumers/avro_codec.h"
#include "consumers/mock_broker.h"
#include "worker/pipeline/pipeline.h"

#define PARTS 4

extern char db_url[256];
extern consumers_mock_t *mock;
extern const char *bootstrap;
extern char **texts; /* (n_texts) CLINC150 test texts */
extern int n_texts;

/* cmocka group setup and teardown: texts, the broker, PostgreSQL migrated. */
int pipe_setup(void **state);
int pipe_teardown(void **state);

/* A producer to the embedded broker, with the codec that frames tickets for it. */
typedef struct {
    rd_kafka_t *rk;
    consumers_codec_t *codec;
} pipe_producer_t;

pipe_producer_t pipe_mock_producer(void);
/* Sends one record (buf: malloc'ed, taken) to topic, partition (-1: by its key). */
void pipe_mock_send(pipe_producer_t *p, const char *topic, int32_t partition, const char *key,
                    void *buf, size_t len);
/* Waits for every record sent to be delivered, then frees p. */
void pipe_mock_producer_close(pipe_producer_t *p);

/* Creates topic with PARTS partitions. */
void topic_create(const char *topic);
/* Produces tickets [from, to) of an n-ticket job_id of tenant to topic. */
void produce_tenant(const char *topic, const char *job_id, const char *tenant, int from, int to,
                    int n);
/* The same for tenant acme, creating topic when from is 0. */
void produce_range(const char *topic, const char *job_id, int from, int to, int n);
/* Produces n tickets of job_id to topic (created with PARTS partitions). */
void produce_job(const char *topic, const char *job_id, int n);

/* The first column of the first row of sql (one text parameter, or none when NULL); -1 NULL. */
long db_long(const char *sql, const char *param);
/* Sum over partitions of (high watermark - committed offset of group): 0 when all stored. */
long group_lag(const char *topic, const char *group);
/* A worker's settings: topic, group, idle exit after idle s, the demo model on the CPU. */
void cfg_for(worker_run_cfg_t *cfg, const char *topic, const char *group, int idle);

#endif
