/* The option rows of the classification settings (worker/classify/settings.h) that `run`,
 * `classify` and `bench` share: one wording, one range and one printed default per setting. */
#include <string.h>

#include "worker/cli/cli.h"

/* "(default ...)" of a value chosen by backend, on a line of its own */
#define AUTO_BY_BACKEND(cpu, cuda)                                                                 \
    "\n      (default 0 = auto: " CLS_STR(cpu) " on the cpu backend, " CLS_STR(cuda) " on cuda)"

int worker_cli_settings_opts(cls_settings_t *s, unsigned rows, int env, cli_opt_t *out) {
    const cli_opt_t t[] = {
        {"backend", CLI_STR, &s->backend, 0, 0, "RECLASS_BACKEND", NULL,
         "cpu or cuda (default cpu)"},
        {"precision", CLI_STR, &s->precision, 0, 0, "RECLASS_PRECISION", NULL,
         "what the encoder computes in: fp32, bf16 or fp8 (the FP8 reference) on the cpu\n"
         "      backend; fp16 or bf16 on cuda (default: the backend's first, fp32 / fp16)"},
        {"token-budget", CLI_INT, &s->token_budget, 0, 1 << 24, "RECLASS_TOKEN_BUDGET", NULL,
         "tokens per encoder batch, at least --max-len; auto is raised to --max-len\n"
         "      where that is longer" AUTO_BY_BACKEND(CLS_AUTO_TOKEN_BUDGET_CPU,
                                                      CLS_AUTO_TOKEN_BUDGET_CUDA)},
        {"max-len", CLI_INT, &s->max_len, 0, 1 << 20, "RECLASS_MAX_LEN", NULL,
         "truncate texts to this many tokens (default 0 = the model's maximum)"},
        {"threads", CLI_INT, &s->threads, 0, 1024, "RECLASS_THREADS", NULL,
         "CPU backend threads (default 0 = one per core)"},
        {"device", CLI_INT, &s->device, 0, 1024, "RECLASS_DEVICE", NULL,
         "CUDA device ordinal (default 0)"},
        {"max-pending", CLI_INT, &s->max_pending, 0, 1 << 24, "RECLASS_MAX_PENDING", NULL,
         "items waiting for a batch before input pauses; also bounds the work a shutdown\n"
         "      finishes" AUTO_BY_BACKEND(CLS_AUTO_MAX_PENDING_CPU, CLS_AUTO_MAX_PENDING_CUDA)},
        {"max-pending-tokens", CLI_LONG, &s->max_pending_tokens, 0, 1 << 30,
         "RECLASS_MAX_PENDING_TOKENS", NULL,
         "tokens of the items waiting before input pauses (default 0 = " CLS_STR(
             CLS_AUTO_PENDING_BUDGETS) " token budgets)"},
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
