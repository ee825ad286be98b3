/* Loader and safetensors reader: the demo checkpoint loads; broken checkpoints made from it
 * in a temp dir (one file edited, the rest symlinked) are each refused with one line that
 * names the file and the fault; F32/F16/BF16 tensors convert exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/model/model.h"
#include "gpu/model/safetensors.h"
#include "worker/text/tok_config.h"

static char tmpdir[256];
static int case_no;
static const char *files[] = {"config.json", "model.safetensors", "vocab.txt",
                              "tokenizer_config.json"};

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/reclass-model-test-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A fresh checkpoint dir whose files link to the demo model's, except skip (removed). */
static void new_case(char *dir, size_t n, const char *skip) {
    snprintf(dir, n, "%s/case%d", tmpdir, case_no++);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (skip && strcmp(skip, files[i]) == 0) continue;
        char src[512], dst[512];
        snprintf(src, sizeof src, "%s/%s", RECLASS_DEMO_MODEL, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        assert_int_equal(symlink(src, dst), 0);
    }
}

static void path_of(char *out, size_t n, const char *dir, const char *file) {
    snprintf(out, n, "%s/%s", dir, file);
}

/* Replaces dir/file (a link) by the given bytes. */
static void write_file(const char *dir, const char *file, const void *a, size_t na, const void *b,
                       size_t nb) {
    char p[512];
    path_of(p, sizeof p, dir, file);
    unlink(p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    if (na) assert_int_equal(fwrite(a, 1, na, f), na);
    if (nb) assert_int_equal(fwrite(b, 1, nb, f), nb);
    fclose(f);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

/* Expects gpu_model_load(dir) to fail with a message naming dir/file and containing what. */
static void expect_refused(const char *dir, const char *file, const char *what) {
    char p[512];
    common_err_t err;
    gpu_model_t *m = (gpu_model_t *)1;
    common_status_t rc = gpu_model_load(dir, &m, &err);
    char line[1024]; /* what the CLI prints (common_err_print) */
    common_err_line(&err, line, sizeof line);
    printf("  %-22s -> %s\n", file, line);
    assert_int_equal(rc, COMMON_USAGE); /* a bad checkpoint is the user's input to fix */
    assert_int_equal(err.code, COMMON_USAGE);
    assert_null(m);
    path_of(p, sizeof p, dir, file);
    assert_non_null(strstr(line, p));
    assert_non_null(strstr(line, what));
    assert_null(strchr(line, '\n'));
}

/* tokenizer_config.json is the tokenizer's (worker_tok_config_read): refused there, one line
 * naming the file. */
static void expect_tok_refused(const char *dir, const char *what) {
    char p[512];
    common_err_t err;
    worker_tok_config_t tok;
    int rc = worker_tok_config_read(dir, &tok, &err);
    printf("  %-22s -> %s\n", "tokenizer_config.json", err.message);
    assert_int_not_equal(rc, 0);
    path_of(p, sizeof p, dir, "tokenizer_config.json");
    char line[1024]; /* what the CLI prints (common_err_print) */
    common_err_line(&err, line, sizeof line);
    assert_non_null(strstr(line, p));
    assert_non_null(strstr(line, what));
    assert_null(strchr(line, '\n'));
}

typedef void (*json_edit_fn)(json_t *root);

/* dir/config.json = the demo config edited by fn. */
static void edit_config(const char *dir, json_edit_fn fn) {
    json_t *root = json_load_file(RECLASS_DEMO_MODEL "/config.json", 0, NULL);
    assert_non_null(root);
    fn(root);
    char *s = json_dumps(root, JSON_INDENT(1));
    write_file(dir, "config.json", s, strlen(s), NULL, 0);
    free(s);
    json_decref(root);
}

static size_t g_data_len; /* data section of the demo weights, for header edits */

/* dir/model.safetensors = the demo weights with the header edited by fn and extra bytes
 * appended to the data section. */
static void edit_header_ext(const char *dir, json_edit_fn fn, const void *extra, size_t nextra) {
    size_t len;
    char *buf = slurp(RECLASS_DEMO_MODEL "/model.safetensors", &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | (uint8_t)buf[i];
    json_t *root = json_loadb(buf + 8, (size_t)hlen, 0, NULL);
    assert_non_null(root);
    g_data_len = len - 8 - hlen;
    fn(root);
    char *h = json_dumps(root, JSON_COMPACT);
    size_t nh = strlen(h);
    char *out = malloc(8 + nh);
    for (int i = 0; i < 8; i++)
        out[i] = (char)((uint64_t)nh >> (8 * i));
    memcpy(out + 8, h, nh);
    char *data = malloc(len - 8 - hlen + nextra);
    memcpy(data, buf + 8 + hlen, len - 8 - hlen);
    if (nextra) memcpy(data + len - 8 - hlen, extra, nextra);
    write_file(dir, "model.safetensors", out, 8 + nh, data, len - 8 - hlen + nextra);
    free(data);
    free(out);
    free(h);
    free(buf);
    json_decref(root);
}

static void edit_header(const char *dir, json_edit_fn fn) {
    edit_header_ext(dir, fn, NULL, 0);
}

static void hdr_unknown_dtype(json_t *r) {
    json_object_set_new(json_object_get(r, "classifier.bias"), "dtype", json_string("Q4"));
}
/* Older checkpoints carry the position_ids buffer as I64: it must not stop the load. */
static void hdr_position_ids(json_t *r) {
    json_object_set_new(r, "bert.embeddings.position_ids",
                        json_pack("{s:s, s:[i,i], s:[I,I]}", "dtype", "I64", "shape", 1, 4,
                                  "data_offsets", (json_int_t)g_data_len,
                                  (json_int_t)g_data_len + 32));
}

static void cfg_arch(json_t *r) {
    json_object_set_new(r, "architectures", json_pack("[s]", "BertForMaskedLM"));
}
static void cfg_act(json_t *r) {
    json_object_set_new(r, "hidden_act", json_string("silu"));
}
static void cfg_no_hidden(json_t *r) {
    json_object_del(r, "hidden_size");
}
static void cfg_heads(json_t *r) {
    json_object_set_new(r, "num_attention_heads", json_integer(3));
}
static void cfg_num_labels(json_t *r) {
    json_object_del(r, "id2label");
    json_object_del(r, "label2id");
    json_object_set_new(r, "num_labels", json_integer(151));
}
static void hdr_drop(json_t *r) {
    json_object_del(r, "bert.encoder.layer.2.output.dense.bias");
}
static void hdr_shape(json_t *r) { /* same element count, transposed */
    json_object_set_new(json_object_get(r, "classifier.weight"), "shape",
                        json_pack("[i,i]", 256, 151));
}
static void hdr_outside(json_t *r) {
    json_t *t = json_object_get(r, "classifier.bias");
    json_t *o = json_object_get(t, "data_offsets");
    json_int_t b = json_integer_value(json_array_get(o, 0));
    json_object_set_new(t, "data_offsets", json_pack("[I,I]", b + 100000000, b + 100000302));
}
static void hdr_dtype(json_t *r) {
    json_object_set_new(json_object_get(r, "classifier.bias"), "dtype", json_string("I16"));
}
static void hdr_short(json_t *r) { /* F16 bytes declared as F32: too few bytes */
    json_object_set_new(json_object_get(r, "classifier.bias"), "dtype", json_string("F32"));
}
static void hdr_overlap(json_t *r) {
    json_t *a = json_object_get(r, "bert.embeddings.LayerNorm.bias");
    json_t *b = json_object_get(r, "bert.embeddings.LayerNorm.weight");
    json_object_set(b, "data_offsets", json_object_get(a, "data_offsets"));
}
static void hdr_legacy(json_t *r) { /* TF-era LayerNorm names */
    json_t *copy = json_deep_copy(r);
    const char *k;
    json_t *v;
    json_object_foreach(copy, k, v) {
        size_t n = strlen(k);
        char nk[256];
        if (n > 17 && strcmp(k + n - 17, "LayerNorm.weight") == 0) continue; /* no match */
        if (n > 16 && strcmp(k + n - 16, "LayerNorm.weight") == 0) {
            snprintf(nk, sizeof nk, "%.*sLayerNorm.gamma", (int)(n - 16), k);
        } else if (n > 14 && strcmp(k + n - 14, "LayerNorm.bias") == 0) {
            snprintf(nk, sizeof nk, "%.*sLayerNorm.beta", (int)(n - 14), k);
        } else {
            continue;
        }
        json_object_set(r, nk, v);
        json_object_del(r, k);
    }
    json_decref(copy);
}

static void test_demo_loads(void **state) {
    common_err_t err;
    gpu_model_t *m;
    assert_int_equal(gpu_model_load(RECLASS_DEMO_MODEL, &m, &err), 0);
    const gpu_model_config_t *c = &m->cfg;
    assert_int_equal(c->vocab_size, 30522);
    assert_int_equal(c->hidden, 256);
    assert_int_equal(c->layers, 4);
    assert_int_equal(c->heads, 4);
    assert_int_equal(c->intermediate, 1024);
    assert_int_equal(c->max_pos, 512);
    assert_int_equal(c->type_vocab, 2);
    assert_int_equal(c->num_labels, 151);
    assert_true(c->ln_eps > 0.99e-12f && c->ln_eps < 1.01e-12f);
    assert_string_equal(c->id2label[0], "accept_reservations");
    assert_string_equal(m->name, "clinc150-bert-mini");
    assert_non_null(strstr(m->vocab_path, "clinc150-bert-mini/vocab.txt"));
    /* Every weight is a slice of the one blob. */
    const float *lo = m->blob, *hi = m->blob + m->blob_floats;
    assert_true(m->w.word_emb >= lo && m->w.cls_b < hi && m->w.layer[3].ln2_b < hi);
    assert_true(m->blob_floats >= gpu_model_param_count(c));
    assert_int_equal(gpu_model_param_count(c), 11209367); /* elements in model.safetensors */
    gpu_model_free(m);
}

static void test_missing_files(void **state) {
    char dir[300];
    new_case(dir, sizeof dir, "config.json");
    expect_refused(dir, "config.json", "missing");
    new_case(dir, sizeof dir, "model.safetensors");
    expect_refused(dir, "model.safetensors", "missing");
    write_file(dir, "pytorch_model.bin", "PK", 2, NULL, 0);
    expect_refused(dir, "model.safetensors", "safe_serialization");
    new_case(dir, sizeof dir, "vocab.txt");
    expect_refused(dir, "vocab.txt", "missing");
    expect_refused("/nonexistent/ckpt", "config.json", "missing");
}

static void test_bad_config(void **state) {
    char dir[300];
    new_case(dir, sizeof dir, NULL);
    edit_config(dir, cfg_arch);
    expect_refused(dir, "config.json",
                   "unsupported architecture 'BertForMaskedLM' (supported: "
                   "BertForSequenceClassification, DistilBertForSequenceClassification,");
    /* the whole list, past what one message holds: its last architecture too */
    expect_refused(dir, "config.json", strrchr(gpu_model_architectures(), ' ') + 1);
    new_case(dir, sizeof dir, NULL);
    edit_config(dir, cfg_act);
    expect_refused(dir, "config.json", "unsupported hidden_act 'silu' (gelu (erf), gelu_new");
    new_case(dir, sizeof dir, NULL);
    edit_config(dir, cfg_no_hidden);
    expect_refused(dir, "config.json", "'hidden_size' is missing");
    new_case(dir, sizeof dir, NULL);
    edit_config(dir, cfg_heads);
    expect_refused(dir, "config.json", "not a multiple");
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "config.json", "{\"hidden_size\": ", 16, NULL, 0);
    expect_refused(dir, "config.json", "invalid JSON");
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", "[1,", 3, NULL, 0);
    expect_tok_refused(dir, "invalid JSON");
    /* Tokenizer settings of the wrong type are refused, not guessed. */
    static const char sa[] = "{\"do_lower_case\": true, \"strip_accents\": \"yes\"}";
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", sa, sizeof sa - 1, NULL, 0);
    expect_tok_refused(dir, "strip_accents");
    static const char cjk[] = "{\"tokenize_chinese_chars\": 0}";
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", cjk, sizeof cjk - 1, NULL, 0);
    expect_tok_refused(dir, "tokenize_chinese_chars");
}

/* A config.json that breaks a rule a later stage relies on is refused by the parser, naming
 * the field: here RoPE thetas that are positive in JSON but round to 0 (or a subnormal) in the
 * backends' fp32, among them the fuzzer's find (kept in tests/fuzz/regressions/). */
static void expect_config(const char *json, const char *want) {
    gpu_model_config_t c;
    common_err_t err;
    int rc = gpu_model_parse_config(json, strlen(json), "config.json", &c, &err);
    if (!want) {
        assert_int_equal(rc, 0);
        for (int i = 0; i < c.num_labels; i++)
            free(c.id2label[i]);
        free(c.id2label);
        return;
    }
    if (rc == 0 || !strstr(err.message, want))
        fail_msg("config refused? rc %d, err '%s' (want '%s')", rc, err.message, want);
}

static void test_config_invariants(void **state) {
    char json[1024];
    static const char mb[] =
        "{\"architectures\": [\"ModernBertForSequenceClassification\"], \"vocab_size\": 100, "
        "\"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
        "\"intermediate_size\": 16, \"max_position_embeddings\": 64, \"num_labels\": 2%s}";
    snprintf(json, sizeof json, mb, "");
    expect_config(json, NULL);
    snprintf(json, sizeof json, mb, ", \"global_rope_theta\": 10000, \"local_rope_theta\": 1e-50");
    expect_config(json, "'local_rope_theta'");
    snprintf(json, sizeof json, mb, ", \"global_rope_theta\": 1e-40");
    expect_config(json, "'global_rope_theta'");
    snprintf(json, sizeof json, mb,
             ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e5}, "
             "\"sliding_attention\": {\"rope_theta\": 101e-50}}");
    expect_config(json, "'rope_parameters.sliding_attention.rope_theta'");

    FILE *f = fopen(RECLASS_SOURCE_DIR
                    "/tests/fuzz/regressions/model_config/rope_theta_rounds_to_zero.json",
                    "rb");
    assert_non_null(f);
    char crash[4096];
    size_t n = fread(crash, 1, sizeof crash - 1, f);
    fclose(f);
    crash[n] = '\0';
    expect_config(crash, "'rope_parameters.sliding_attention.rope_theta'");
}

static void test_bad_tensors(void **state) {
    char dir[300];
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_drop);
    expect_refused(dir, "model.safetensors",
                   "missing tensor 'bert.encoder.layer.2.output.dense.bias'");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_shape);
    expect_refused(dir, "model.safetensors", "has shape [256, 151], expected [151, 256]");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_outside);
    expect_refused(dir, "model.safetensors", "outside the data section");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_dtype);
    expect_refused(dir, "model.safetensors", "unsupported dtype 'I16'");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_unknown_dtype);
    expect_refused(dir, "model.safetensors", "unknown dtype 'Q4'");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_short);
    expect_refused(dir, "model.safetensors", "need 604");
    new_case(dir, sizeof dir, NULL);
    edit_header(dir, hdr_overlap);
    expect_refused(dir, "model.safetensors", "overlap");
}

static void test_truncated(void **state) {
    char dir[300];
    size_t len;
    char *buf = slurp(RECLASS_DEMO_MODEL "/model.safetensors", &len);
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "model.safetensors", buf, len / 2, NULL, 0);
    expect_refused(dir, "model.safetensors", "truncated");
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "model.safetensors", buf, 5, NULL, 0);
    expect_refused(dir, "model.safetensors", "truncated");
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "model.safetensors", buf, 2000, NULL, 0); /* mid-header */
    expect_refused(dir, "model.safetensors", "header length");
    new_case(dir, sizeof dir, NULL);
    memcpy(buf, "\xff\xff\xff\xff\x00\x00\x00\x00", 8); /* header length past EOF */
    write_file(dir, "model.safetensors", buf, len, NULL, 0);
    expect_refused(dir, "model.safetensors", "past the end of the file");
    new_case(dir, sizeof dir, NULL);
    memcpy(buf, "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": nonsense}", 24);
    write_file(dir, "model.safetensors", buf, len, NULL, 0);
    expect_refused(dir, "model.safetensors", "not valid JSON");
    free(buf);
}

/* Optional and alternative spellings load, with the same weights. */
static void test_variants(void **state) {
    char dir[300];
    common_err_t err;
    gpu_model_t *ref, *m;
    assert_int_equal(gpu_model_load(RECLASS_DEMO_MODEL, &ref, &err), 0);
    new_case(dir, sizeof dir, "tokenizer_config.json");
    edit_header(dir, hdr_legacy);
    edit_config(dir, cfg_num_labels);
    int rc = gpu_model_load(dir, &m, &err);
    if (rc) printf("%s\n", err.message);
    assert_int_equal(rc, 0);
    worker_tok_config_t tok;
    assert_int_equal(worker_tok_config_read(dir, &tok, &err), 0);
    assert_int_equal(tok.lower, 1); /* no tokenizer_config.json: BERT uncased */
    assert_int_equal(m->cfg.num_labels, 151);
    assert_string_equal(m->cfg.id2label[150], "LABEL_150");
    assert_memory_equal(m->w.layer[2].ln1_g, ref->w.layer[2].ln1_g, 256 * sizeof(float));
    assert_memory_equal(m->w.emb_ln_b, ref->w.emb_ln_b, 256 * sizeof(float));
    assert_memory_equal(m->w.cls_w, ref->w.cls_w, 151 * 256 * sizeof(float));
    gpu_model_free(m);
    new_case(dir, sizeof dir, NULL);
    int64_t pos[4] = {0, 1, 2, 3};
    edit_header_ext(dir, hdr_position_ids, pos, sizeof pos);
    rc = gpu_model_load(dir, &m, &err);
    if (rc) printf("%s\n", err.message);
    assert_int_equal(rc, 0);
    assert_memory_equal(m->w.word_emb, ref->w.word_emb, 256 * sizeof(float));
    gpu_model_free(m);
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", "{\"do_lower_case\": false}", 24, NULL, 0);
    assert_int_equal(worker_tok_config_read(dir, &tok, &err), 0);
    assert_int_equal(tok.lower, 0);
    assert_int_equal(tok.strip_accents, 0); /* absent: as do_lower_case */
    assert_int_equal(tok.chinese_chars, 1);
    /* Hugging Face's other settings are read as given (null strip_accents: do_lower_case). */
    static const char opts[] = "{\"do_lower_case\": true, \"strip_accents\": false, "
                               "\"tokenize_chinese_chars\": false}";
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", opts, sizeof opts - 1, NULL, 0);
    assert_int_equal(worker_tok_config_read(dir, &tok, &err), 0);
    assert_int_equal(tok.lower, 1);
    assert_int_equal(tok.strip_accents, 0);
    assert_int_equal(tok.chinese_chars, 0);
    static const char null_sa[] = "{\"do_lower_case\": false, \"strip_accents\": null}";
    new_case(dir, sizeof dir, NULL);
    write_file(dir, "tokenizer_config.json", null_sa, sizeof null_sa - 1, NULL, 0);
    assert_int_equal(worker_tok_config_read(dir, &tok, &err), 0);
    assert_int_equal(tok.strip_accents, 0);
    gpu_model_free(ref);
}

/* A small hand-made file in all three dtypes reads back exactly. */
static void test_dtypes(void **state) {
    float f32[3] = {1.5f, -2.25f, 3e-5f};
    uint16_t f16[5] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000}; /* 1, -2, 2^-24, 65504, -0 */
    uint16_t bf16[2] = {0x3f80, 0xc0a0};                        /* 1, -5 */
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                      "\"b\":{\"dtype\":\"F16\",\"shape\":[5,1],\"data_offsets\":[12,22]},"
                      "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[22,26]}}";
    uint8_t data[26];
    memcpy(data, f32, 12);
    memcpy(data + 12, f16, 10);
    memcpy(data + 22, bf16, 4);
    size_t nh = strlen(hdr);
    uint8_t *buf = malloc(8 + nh + 26);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)nh >> (8 * i));
    memcpy(buf + 8, hdr, nh);
    memcpy(buf + 8 + nh, data, 26);
    char path[300];
    common_err_t err;
    snprintf(path, sizeof path, "%s/dtypes.safetensors", tmpdir);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, 8 + nh + 26, f);
    fclose(f);
    gpu_st_file_t *st;
    assert_int_equal(gpu_st_open(path, &st, &err), 0);
    assert_int_equal(gpu_st_count(st), 3);
    float out[5];
    gpu_st_read_f32(st, gpu_st_find(st, "a"), out);
    assert_memory_equal(out, f32, 12);
    const gpu_st_tensor_t *b = gpu_st_find(st, "b");
    assert_int_equal(b->ndim, 2);
    assert_int_equal(b->shape[0], 5);
    gpu_st_read_f32(st, b, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0x1p-24f && out[3] == 65504.0f);
    assert_true(out[4] == 0.0f);
    gpu_st_read_f32(st, gpu_st_find(st, "c"), out);
    assert_true(out[0] == 1.0f && out[1] == -5.0f);
    assert_null(gpu_st_find(st, "d"));
    gpu_st_close(st);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_loads),  cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_bad_config),  cmocka_unit_test(test_config_invariants),
        cmocka_unit_test(test_bad_tensors), cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_variants),    cmocka_unit_test(test_dtypes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
