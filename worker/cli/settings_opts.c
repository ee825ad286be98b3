/* The option rows that several commands share: the classification settings
 * (worker/classify/settings.h) of `run`, `classify` and `bench`, the model and geometry rows
 * (whose help lists the family registry's), and the database, Kafka and schema rows of `run`,
 * `submit` and the database commands: one wording, one range, one environment variable and
 * one default per setting. */
#include <string.h>

#include "common/paths.h"
#include "gpu/model/model.h"
#include "worker/cli/cli.h"

/* what 0 means for a value chosen by backend, on a line of its own */
#define AUTO_BY_BACKEND(cpu, cuda)                                                                 \
    "\n      (0 = auto: " CLS_STR(cpu) " on the cpu backend, " CLS_STR(cuda) " on cuda)"

int worker_cli_settings_opts(cls_settings_t *s, unsigned rows, int env, cli_opt_t *out) {
    const cli_opt_t t[] = {
        {"backend", CLI_STR, &s->backend, 0, 0, "RECLASS_BACKEND", NULL, "cpu or cuda", "cpu"},
        {"precision", CLI_STR, &s->precision, 0, 0, "RECLASS_PRECISION", NULL,
         "what the encoder computes in: fp32, bf16 or fp8 (the FP8 reference) on the cpu\n"
         "      backend; fp16, bf16 or fp8 (E4M3 linears) on cuda (default: the backend's\n"
         "      first, fp32 / fp16)",
         NULL},
        {"token-budget", CLI_INT, &s->token_budget, 0, 1 << 24, "RECLASS_TOKEN_BUDGET", NULL,
         "tokens per encoder batch, at least --max-len; auto is raised to --max-len\n"
         "      where that is longer" AUTO_BY_BACKEND(CLS_AUTO_TOKEN_BUDGET_CPU,
                                                      CLS_AUTO_TOKEN_BUDGET_CUDA),
         "0"},
        {"max-len", CLI_INT, &s->max_len, 0, 1 << 20, "RECLASS_MAX_LEN", NULL,
         "truncate texts to this many tokens (0 = the model's maximum)", "0"},
        {"threads", CLI_INT, &s->threads, 0, 1024, "RECLASS_THREADS", NULL,
         "CPU threads: the CPU backend's, and `run`'s for decoding, tokenizing and\n"
         "      scoring (0 = the cores this process may run on)",
         "0"},
        {"device", CLI_INT, &s->device, 0, 1024, "RECLASS_DEVICE", NULL, "CUDA device ordinal",
         "0"},
        {"max-pending", CLI_INT, &s->max_pending, 0, 1 << 24, "RECLASS_MAX_PENDING", NULL,
         "items waiting for a batch before input pauses; also bounds the work a shutdown\n"
         "      finishes" AUTO_BY_BACKEND(CLS_AUTO_MAX_PENDING_CPU, CLS_AUTO_MAX_PENDING_CUDA),
         "0"},
        {"max-pending-tokens", CLI_LONG, &s->max_pending_tokens, 0, 1 << 30,
         "RECLASS_MAX_PENDING_TOKENS", NULL,
         "tokens of the items waiting before input pauses (0 = " CLS_STR(
             CLS_AUTO_PENDING_BUDGETS) " token budgets)",
         "0"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (!(rows & (1u << i))) continue;
        out[n] = t[i];
        if (!env) out[n].env = NULL;
        n++;
    }
    return n;
}

cli_opt_t worker_cli_opt_db(const char **dst, const char *help) {
    return (cli_opt_t){"db", CLI_STR,      dst,   0,
                       0,    "RECLASS_DB", "URL", help ? help : "PostgreSQL URL or conninfo",
                       NULL};
}

cli_opt_t worker_cli_opt_top_k(int *dst, long lo, int env, const char *help) {
    return (cli_opt_t){"top-k", CLI_INT, dst, lo, 64, env ? "RECLASS_TOP_K" : NULL, "K", help, "3"};
}

/* A --geometry model stands in for a checkpoint, so it takes as many labels as a checkpoint's
 * config.json may have (the model loader's limit): plan-memory can then plan any model that
 * loads, and bench time any head that plan-memory plans. */
cli_opt_t worker_cli_opt_labels(int *dst) {
    return (cli_opt_t){"labels",
                       CLI_INT,
                       dst,
                       1,
                       GPU_MODEL_MAX_LABELS,
                       NULL,
                       "N",
                       "classifier labels of a --geometry model",
                       "2"};
}

cli_opt_t worker_cli_opt_registry(const char **dst, const char *help) {
    return (cli_opt_t){"schema-registry",         CLI_STR, dst,  0,   0,
                       "RECLASS_SCHEMA_REGISTRY", "URL",   help, NULL};
}

cli_opt_t worker_cli_opt_brokers(const char **dst) {
    return (cli_opt_t){
        "brokers",       CLI_STR, dst, 0, 0, "RECLASS_BROKERS", "B", "Kafka bootstrap servers",
        "127.0.0.1:9092"};
}

cli_opt_t worker_cli_opt_topic(const char **dst, const char *arg, const char *help) {
    return (cli_opt_t){"topic", CLI_STR, dst, 0, 0, "RECLASS_TOPIC", arg, help, "tickets"};
}

cli_opt_t worker_cli_opt_schemas(const char **dst) {
    return (cli_opt_t){"schemas",
                       CLI_STR,
                       dst,
                       0,
                       0,
                       "RECLASS_SCHEMAS",
                       "DIR",
                       "directory of ticket-v<ID>.avsc schemas (default: <exe>/../consumers/"
                       "schemas, else\n      <exe>/../share/reclass/schemas, else "
                       "/usr/share/reclass/schemas)",
                       NULL};
}

common_status_t worker_cli_schemas_default(const char **schemas, char *buf, size_t n,
                                           common_err_t *e) {
    if (*schemas) return COMMON_OK;
    if (common_data_dir("consumers/schemas", "schemas", buf, n))
        return common_err_set(e, COMMON_USAGE,
                              "no schemas directory found (tried %s): give --schemas DIR or set "
                              "RECLASS_SCHEMAS",
                              buf);
    *schemas = buf;
    return COMMON_OK;
}

cli_opt_t worker_cli_opt_plain_schema(const char **dst, const char *help) {
    return (cli_opt_t){"plain-schema",         CLI_STR, dst,  0,   0,
                       "RECLASS_PLAIN_SCHEMA", "FILE",  help, NULL};
}

cli_opt_t worker_cli_opt_registry_auth(const char **dst) {
    return (cli_opt_t){"schema-registry-auth-file",
                       CLI_STR,
                       dst,
                       0,
                       0,
                       "RECLASS_SCHEMA_REGISTRY_AUTH_FILE",
                       "FILE",
                       "one line \"basic user:password\" or \"bearer TOKEN\" for the registry",
                       NULL};
}

cli_opt_t worker_cli_opt_registry_ca(const char **dst) {
    return (cli_opt_t){"schema-registry-ca",
                       CLI_STR,
                       dst,
                       0,
                       0,
                       "RECLASS_SCHEMA_REGISTRY_CA",
                       "FILE",
                       "CA certificates (PEM) the registry's TLS certificate is verified against",
                       NULL};
}

cli_opt_t worker_cli_opt_kafka(cli_list_t *dst) {
    return (cli_opt_t){
        "kafka", CLI_KV,
        dst,     0,
        0,       NULL,
        "K=V",   "extra librdkafka property (repeatable), e.g. security.protocol=ssl",
        NULL};
}

/* text, then the items of list (", " between them) and end on help lines of at most 78
 * columns (continuation lines indented by 6, as worker_cli_print_opts prints them); into buf.
 * The lists are the registry's (gpu/families/registry.h), so no help text names a family or
 * a geometry by hand. */
static const char *help_list(char *buf, size_t n, const char *text, const char *list,
                             const char *end) {
    const char *nl = strrchr(text, '\n');
    size_t at = (size_t)snprintf(buf, n, "%s", text);
    size_t col = nl ? strlen(nl + 1) : 6 + at;
    while (*list && at < n) {
        const char *comma = strchr(list, ',');
        const size_t len = comma ? (size_t)(comma - list) + 1 : strlen(list);
        const size_t need = len + (comma ? 0 : strlen(end));
        const int wrap = col + 1 + need > 78;
        at += (size_t)snprintf(buf + at, n - at, "%s%.*s", wrap ? "\n      " : " ", (int)len, list);
        col = (wrap ? 6 : col + 1) + len;
        list += len;
        while (*list == ' ')
            list++;
    }
    if (at < n) snprintf(buf + at, n - at, "%s", end);
    return buf;
}

cli_opt_t worker_cli_opt_model(const char **dst, int env, int required, const char *help) {
    static char listed[2][512]; /* the registry's families, without and with " (required)" */
    if (!help)
        help = help_list(listed[required != 0], sizeof listed[0],
                         "Hugging Face sequence-classification checkpoint directory, of a family:",
                         gpu_model_families(), required ? " (required)" : "");
    return (cli_opt_t){"model", CLI_STR, dst, 0, 0, env ? "RECLASS_MODEL" : NULL,
                       "DIR",   help,    NULL};
}

cli_opt_t worker_cli_opt_geometry(const char **dst) {
    static char help[1024];
    return (cli_opt_t){"geometry",
                       CLI_STR,
                       dst,
                       0,
                       0,
                       NULL,
                       "NAME",
                       help_list(help, sizeof help,
                                 "random weights of a named geometry instead of a checkpoint:",
                                 gpu_model_geometries(), ""),
                       NULL};
}
