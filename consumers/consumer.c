#include "consumers/consumer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "common/err.h"
#include "consumers/consumer_int.h"
#include "consumers/kafka_props.h"

static common_status_t conf_set(rd_kafka_conf_t *conf, const char *k, const char *v,
                                common_err_t *e) {
    char why[256];
    if (rd_kafka_conf_set(conf, k, v, why, sizeof(why)) != RD_KAFKA_CONF_OK)
        return common_err_set(e, COMMON_USAGE, "Kafka property %s=%s: %s", k, v, why);
    return COMMON_OK;
}

static int topic_index(const consumers_consumer_t *c, const char *name) {
    for (int i = 0; i < c->n_topics; i++)
        if (!strcmp(c->topics[i], name)) return i;
    return -1;
}

static int32_t *parts_of(const consumers_consumer_t *c, const rd_kafka_topic_partition_list_t *l,
                         int *n) {
    int32_t *p = malloc(sizeof(*p) * (size_t)(l->cnt > 0 ? l->cnt : 1)); /* (cnt) tracks */
    *n = 0;
    if (!p) return NULL;
    for (int i = 0; i < l->cnt; i++) {
        int t = topic_index(c, l->elems[i].topic);
        if (t >= 0) p[(*n)++] = l->elems[i].partition * c->n_topics + t;
    }
    return p;
}

/* The partitions of l that must not fetch now (paused, or their topic held). */
static rd_kafka_topic_partition_list_t *stopped_of(const consumers_consumer_t *c,
                                                   const rd_kafka_topic_partition_list_t *l) {
    rd_kafka_topic_partition_list_t *s = rd_kafka_topic_partition_list_new(l->cnt > 0 ? l->cnt : 1);
    for (int i = 0; i < l->cnt; i++) {
        int t = topic_index(c, l->elems[i].topic);
        if (c->paused || (t >= 0 && c->held[t]))
            rd_kafka_topic_partition_list_add(s, l->elems[i].topic, l->elems[i].partition);
    }
    return s;
}

/* Several lanes: each newly assigned partition reads into its lane's queue. */
static void forward_lanes(consumers_consumer_t *c, const rd_kafka_topic_partition_list_t *l) {
    if (c->n_lanes < 2) return;
    for (int i = 0; i < l->cnt; i++) {
        int t = topic_index(c, l->elems[i].topic);
        if (t < 0) continue;
        rd_kafka_queue_t *pq =
            rd_kafka_queue_get_partition(c->rk, l->elems[i].topic, l->elems[i].partition);
        if (!pq) continue;
        rd_kafka_queue_forward(pq, c->lane_q[c->lane[t]]);
        rd_kafka_queue_destroy(pq);
    }
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    consumers_consumer_t *c = opaque;
    int cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    int n;
    int32_t *p = parts_of(c, parts, &n);
    rd_kafka_error_t *e = NULL;
    rd_kafka_resp_err_t re = RD_KAFKA_RESP_ERR_NO_ERROR;
    c->rebalances++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        c->ever_assigned = 1;
        if (c->rb.on_assign && p) c->rb.on_assign(c->rb.ctx, p, n);
        if (cooperative)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            re = rd_kafka_assign(rk, parts);
        forward_lanes(c, parts);
        /* a paused member stays paused, a held topic held, for what it just got */
        rd_kafka_topic_partition_list_t *st = stopped_of(c, parts);
        if (st->cnt > 0) rd_kafka_pause_partitions(rk, st);
        rd_kafka_topic_partition_list_destroy(st);
        common_logf(c->log, "assigned %d partition(s) of %s%s\n", n, c->topic,
                    c->n_topics > 1 ? " and the other lanes" : "");
    } else {
        int lost = rd_kafka_assignment_lost(rk);
        if (c->rb.on_revoke && p) c->rb.on_revoke(c->rb.ctx, p, n, lost);
        if (cooperative)
            e = rd_kafka_incremental_unassign(rk, parts);
        else
            re = rd_kafka_assign(rk, NULL);
        common_logf(c->log, "%s %d partition(s) of %s%s\n", lost ? "lost" : "revoked", n, c->topic,
                    c->n_topics > 1 ? " and the other lanes" : "");
    }
    if (e) {
        common_logf(c->log, "rebalance: %s\n", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    } else if (re) {
        common_logf(c->log, "rebalance: %s\n", rd_kafka_err2str(re));
    }
    free(p);
}

/* librdkafka's client-wide errors. A failed authentication or TLS handshake does not heal by
 * retrying (a wrong password, CA or protocol), so it stops the worker at once with what to
 * check, instead of the join timeout's guess at reachability; the rest are logged once per
 * kind and 30 s, and librdkafka goes on retrying them. */
static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    consumers_consumer_t *c = opaque;
    const char *hint = consumers_kafka_unrecoverable(err);
    if (hint) {
        if (!c->fatal) snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s: %s", hint, reason);
        c->fatal = 1;
        return;
    }
    char fe[512];
    if (rd_kafka_fatal_error(rk, fe, sizeof(fe))) {
        c->fatal = 1;
        snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s", fe);
    }
    time_t now = time(NULL);
    if (err != (int)c->last_err || now - c->last_err_at >= 30) {
        common_logf(c->log, "kafka: %s\n", reason);
        c->last_err = err;
        c->last_err_at = now;
    }
}

common_status_t consumers_consumer_init(const consumers_consumer_cfg_t *cfg,
                                        const consumers_rebalance_t *rb, consumers_consumer_t **out,
                                        common_err_t *e) {
    *out = NULL;
    if (cfg->n_topics < 0 || cfg->n_topics > CONSUMERS_MAX_TOPICS)
        return common_err_set(e, COMMON_USAGE, "%d topics: give 1 to %d", cfg->n_topics,
                              CONSUMERS_MAX_TOPICS);
    consumers_consumer_t *c = calloc(1, sizeof(*c));
    if (!c) return common_err_set(e, COMMON_FATAL, "out of memory");
    c->n_topics = cfg->n_topics > 0 ? cfg->n_topics : 1;
    for (int i = 0; i < c->n_topics; i++) {
        c->topics[i] = strdup(cfg->n_topics > 0 ? cfg->topics[i] : cfg->topic);
        c->prio[i] = cfg->n_topics > 0 && cfg->priorities ? cfg->priorities[i] : 0;
        if (!c->topics[i]) {
            consumers_consumer_free(c);
            return common_err_set(e, COMMON_FATAL, "out of memory");
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(c->topics[i], c->topics[j])) {
                common_err_set(e, COMMON_USAGE, "topic %s given twice", c->topics[i]);
                consumers_consumer_free(c);
                return COMMON_USAGE;
            }
    }
    c->topic = c->topics[0];
    c->log = cfg->log;
    for (int i = 0; i < c->n_topics; i++) { /* lane = rank among the distinct priorities */
        c->lane[i] = 0;
        for (int j = 0; j < c->n_topics; j++) {
            int earlier = 0; /* a distinct smaller priority counts once */
            for (int k = 0; k < j; k++)
                earlier |= c->prio[k] == c->prio[j];
            if (c->prio[j] < c->prio[i] && !earlier) c->lane[i]++;
        }
        if (c->lane[i] + 1 > c->n_lanes) c->n_lanes = c->lane[i] + 1;
    }
    if (rb) c->rb = *rb;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char num[32];
    const char *fixed[][2] = {
        {"bootstrap.servers", cfg->brokers},
        {"group.id", cfg->group},
        {"partition.assignment.strategy", "cooperative-sticky"},
        {"enable.auto.offset.store", "false"},
        {"enable.auto.commit", "true"},
        {"auto.offset.reset", "earliest"},
        {"client.id", "reclass-run"},
        /* a resumed partition waits for the fetch in flight: keep that short (the default
         * 500 ms; --kafka overrides) */
        {"fetch.wait.max.ms", "100"},
    };
    common_status_t bad = COMMON_OK;
    for (size_t i = 0; !bad && i < sizeof(fixed) / sizeof(fixed[0]); i++)
        bad = conf_set(conf, fixed[i][0], fixed[i][1], e);
    if (!bad && cfg->max_poll_interval_ms > 0) {
        snprintf(num, sizeof(num), "%d", cfg->max_poll_interval_ms);
        bad = conf_set(conf, "max.poll.interval.ms", num, e);
    }
    if (!bad && cfg->session_timeout_ms > 0) {
        snprintf(num, sizeof(num), "%d", cfg->session_timeout_ms);
        bad = conf_set(conf, "session.timeout.ms", num, e);
    }
    if (!bad && cfg->auto_commit_interval_ms > 0) {
        snprintf(num, sizeof(num), "%d", cfg->auto_commit_interval_ms);
        bad = conf_set(conf, "auto.commit.interval.ms", num, e);
    }
    if (!bad) bad = consumers_kafka_props_apply(conf, cfg->extra, CONSUMERS_PROPS_ALL, e);
    if (bad) {
        rd_kafka_conf_destroy(conf);
        consumers_consumer_free(c);
        return bad;
    }
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    char why[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why)); /* takes conf on success */
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        consumers_consumer_free(c);
        /* what librdkafka refuses at creation is its configuration (TLS files, SASL) */
        return common_err_set(e, COMMON_USAGE, "Kafka consumer: %s", why);
    }
    rd_kafka_poll_set_consumer(c->rk);
    for (int l = 0; c->n_lanes > 1 && l < c->n_lanes; l++)
        if (!(c->lane_q[l] = rd_kafka_queue_new(c->rk))) {
            consumers_consumer_free(c);
            return common_err_set(e, COMMON_FATAL, "out of memory");
        }
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(c->n_topics);
    for (int i = 0; i < c->n_topics; i++)
        rd_kafka_topic_partition_list_add(sub, c->topics[i], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t re = rd_kafka_subscribe(c->rk, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (re) {
        common_err_set(e, COMMON_FATAL, "subscribe to %s: %s", c->topic, rd_kafka_err2str(re));
        consumers_consumer_free(c);
        return COMMON_FATAL;
    }
    *out = c;
    return COMMON_OK;
}

/* A record is librdkafka's message itself, behind the opaque type. */
static const rd_kafka_message_t *msg_of(const consumers_record_t *r) {
    return (const rd_kafka_message_t *)r;
}

const void *consumers_record_value(const consumers_record_t *r, size_t *len) {
    *len = msg_of(r)->len;
    return msg_of(r)->payload;
}

const void *consumers_record_key(const consumers_record_t *r, size_t *len) {
    *len = msg_of(r)->key_len;
    return msg_of(r)->key;
}

int32_t consumers_record_partition(const consumers_record_t *r) {
    return msg_of(r)->partition;
}

int64_t consumers_record_offset(const consumers_record_t *r) {
    return msg_of(r)->offset;
}

const char *consumers_record_topic(const consumers_record_t *r) {
    return msg_of(r)->rkt ? rd_kafka_topic_name(msg_of(r)->rkt) : "";
}

void consumers_record_free(consumers_record_t *r) {
    if (r) rd_kafka_message_destroy((rd_kafka_message_t *)r);
}

static consumers_record_t *checked(consumers_consumer_t *c, rd_kafka_message_t *m);

consumers_record_t *consumers_consumer_poll(consumers_consumer_t *c, int timeout_ms) {
    if (c->closed) return NULL;
    rd_kafka_message_t *m = NULL;
    if (c->n_lanes > 1) {
        /* the consumer queue first, without waiting: it serves rebalances and errors, which
         * a steady stream on the lane queues must not starve */
        m = rd_kafka_consumer_poll(c->rk, 0);
        for (int l = 0; !m && l < c->n_lanes; l++)
            m = rd_kafka_consume_queue(c->lane_q[l], 0);
        /* then wait on it briefly: a record arriving on a lane queue meanwhile waits that long */
        if (!m) m = rd_kafka_consumer_poll(c->rk, timeout_ms > 10 ? 10 : timeout_ms);
    } else {
        m = rd_kafka_consumer_poll(c->rk, timeout_ms);
    }
    return checked(c, m);
}

consumers_record_t *consumers_consumer_poll_lane(consumers_consumer_t *c, int lane) {
    if (c->closed || c->n_lanes < 2 || lane < 0 || lane >= c->n_lanes) return NULL;
    return checked(c, rd_kafka_consume_queue(c->lane_q[lane], 0));
}

/* A record, or NULL for none or an error event (logged; a fatal one remembered). */
static consumers_record_t *checked(consumers_consumer_t *c, rd_kafka_message_t *m) {
    if (!m) return NULL;
    if (!m->err) return (consumers_record_t *)m;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        rd_kafka_message_destroy(m);
        return NULL;
    }
    char fe[512];
    if (rd_kafka_fatal_error(c->rk, fe, sizeof(fe))) {
        c->fatal = 1;
        snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s", fe);
    }
    time_t now = time(NULL);
    if (m->err != c->last_err || now - c->last_err_at >= 30) {
        common_logf(c->log, "kafka: %s\n", rd_kafka_message_errstr(m));
        c->last_err = m->err;
        c->last_err_at = now;
    }
    rd_kafka_message_destroy(m);
    return NULL;
}

common_status_t consumers_consumer_fatal(consumers_consumer_t *c, common_err_t *e) {
    return c->fatal ? common_err_set(e, COMMON_FATAL, "%s", c->fatal_msg) : COMMON_OK;
}

/* Pauses (or resumes) the assigned partitions of the topics for which sel[t] is set. */
static int pause_topics(consumers_consumer_t *c, const int *sel, int pause) {
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(c->rk, &a)) return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(a->cnt > 0 ? a->cnt : 1);
    for (int i = 0; i < a->cnt; i++) {
        int t = topic_index(c, a->elems[i].topic);
        if (t >= 0 && sel[t])
            rd_kafka_topic_partition_list_add(l, a->elems[i].topic, a->elems[i].partition);
    }
    rd_kafka_resp_err_t re = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (l->cnt > 0)
        re = pause ? rd_kafka_pause_partitions(c->rk, l) : rd_kafka_resume_partitions(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_topic_partition_list_destroy(a);
    return re ? -1 : 0;
}

static int pause_resume(consumers_consumer_t *c, int pause) {
    int sel[CONSUMERS_MAX_TOPICS];
    for (int t = 0; t < c->n_topics; t++)
        sel[t] = pause || !c->held[t]; /* a resume leaves held topics stopped */
    if (pause_topics(c, sel, pause)) return -1;
    c->paused = pause;
    return 0;
}

int consumers_consumer_hold_above(consumers_consumer_t *c, int priority) {
    int on[CONSUMERS_MAX_TOPICS], off[CONSUMERS_MAX_TOPICS], changed = 0;
    for (int t = 0; t < c->n_topics; t++) {
        int want = c->prio[t] > priority;
        on[t] = want && !c->held[t];
        off[t] = !want && c->held[t];
        changed += on[t] + off[t];
    }
    if (!changed) return 0;
    /* a paused member's partitions stay paused: only the flags move */
    if (!c->paused && (pause_topics(c, on, 1) || pause_topics(c, off, 0))) return -1;
    for (int t = 0; t < c->n_topics; t++)
        c->held[t] = c->prio[t] > priority;
    return changed;
}

int32_t consumers_consumer_track(const consumers_consumer_t *c, const consumers_record_t *r) {
    const rd_kafka_message_t *m = msg_of(r);
    if (c->n_topics == 1) return m->partition;
    int t = m->rkt ? topic_index(c, rd_kafka_topic_name(m->rkt)) : -1;
    return t < 0 ? -1 : m->partition * c->n_topics + t;
}

int consumers_consumer_pause(consumers_consumer_t *c) {
    return c->paused ? 0 : pause_resume(c, 1);
}

int consumers_consumer_resume(consumers_consumer_t *c) {
    return c->paused ? pause_resume(c, 0) : 0;
}

int consumers_consumer_paused(const consumers_consumer_t *c) {
    return c->paused;
}

int consumers_consumer_store(consumers_consumer_t *c, int32_t track, int64_t next_offset) {
    if (track < 0) return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, c->topics[track % c->n_topics], track / c->n_topics)
        ->offset = next_offset;
    rd_kafka_resp_err_t re = rd_kafka_offsets_store(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    return re ? -1 : 0;
}

/* The group's own refusals: this member's generation or membership is being replaced (a
 * rebalance, or a member leaving). The partitions' next owner commits what it stores. */
static int refused_by_group(rd_kafka_resp_err_t re) {
    return re == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS ||
           re == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
           re == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
           re == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID || re == RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST ||
           re == RD_KAFKA_RESP_ERR__STATE;
}

common_status_t consumers_consumer_commit(consumers_consumer_t *c, common_err_t *e) {
    if (c->closed) return COMMON_OK;
    rd_kafka_resp_err_t re = rd_kafka_commit(c->rk, NULL, 0);
    if (re && re != RD_KAFKA_RESP_ERR__NO_OFFSET)
        return common_err_set(e, refused_by_group(re) ? COMMON_RETRY : COMMON_FATAL,
                              "offset commit: %s", rd_kafka_err2str(re));
    return COMMON_OK;
}

/* librdkafka < 2.3 aborts when a cooperative-sticky member that joined but never received an
 * assignment is closed or destroyed (confluentinc/librdkafka#4312, fixed by #4381). Such a
 * member has consumed and stored nothing, so it just goes away with the process: the group
 * drops it after session.timeout.ms. */
static int close_is_unsafe(const consumers_consumer_t *c) {
    return !c->ever_assigned && rd_kafka_version() < 0x020300ff;
}

#define CLOSE_UNASSIGN_MS 10000 /* longest wait for the group to take the partitions back */

/* rd_kafka_consumer_close can wait for ever when a cooperative rebalance hands this member
 * partitions while it closes (seen with 2.15 as the workers of one job leave together:
 * rebalance_cb's incremental assign never returns; confluentinc/librdkafka#4527, #4884). So
 * the member first gives its assignment back (unsubscribe; the revocations are served here,
 * through rebalance_cb, which stores what is committed), then closes with nothing assigned. */
static void unassign_before_close(consumers_consumer_t *c) {
    if (rd_kafka_unsubscribe(c->rk)) return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        rd_kafka_topic_partition_list_t *a = NULL;
        int left = rd_kafka_assignment(c->rk, &a) ? 1 : a->cnt;
        if (a) rd_kafka_topic_partition_list_destroy(a);
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L;
        if (left == 0 || ms >= CLOSE_UNASSIGN_MS) return;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
        if (m) rd_kafka_message_destroy(m); /* fetched before: never tracked, re-read */
    }
}

void consumers_consumer_close(consumers_consumer_t *c) {
    if (!c || !c->rk || c->closed) return;
    if (close_is_unsafe(c)) {
        c->closed = 1;
        return;
    }
    common_err_t e;
    char line[COMMON_ERR_LINE_MAX];
    if (consumers_consumer_commit(c, &e))
        common_logf(c->log, "%s (retried by the next owner)\n",
                    common_err_line(&e, line, sizeof(line)));
    unassign_before_close(c);
    /* close leaves the group (a revoke still assigned goes through rebalance_cb) */
    rd_kafka_consumer_close(c->rk);
    c->closed = 1;
}

void consumers_consumer_free(consumers_consumer_t *c) {
    if (!c) return;
    if (c->rk) {
        int unsafe = close_is_unsafe(c);
        consumers_consumer_close(c);
        for (int l = 0; l < c->n_lanes; l++)
            if (c->lane_q[l]) rd_kafka_queue_destroy(c->lane_q[l]);
        if (!unsafe) rd_kafka_destroy(c->rk); /* else left to process exit, see above */
    }
    for (int i = 0; i < c->n_topics; i++)
        free(c->topics[i]);
    free(c);
}
