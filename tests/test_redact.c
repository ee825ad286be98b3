/* common_redact: the secrets of connection strings and --kafka lists never reach a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <string.h>

#include "common/redact.h"

static void expect(const char *in, const char *want) {
    char out[512];
    assert_string_equal(common_redact(in, out, sizeof(out)), want);
}

static void test_redact_urls(void **state) {
    (void)state;
    expect("invalid percent-encoded token: \"postgresql://u:s3cr3t@h%zz/db\"",
           "invalid percent-encoded token: \"postgresql://u:***@h%zz/db\"");
    expect("postgres://user:p%40ss@w@host:5432/db?sslmode=verify-full",
           "postgres://user:***@host:5432/db?sslmode=verify-full");
    expect("postgresql://u:s3cr3t@[::1/db", "postgresql://u:***@[::1/db");
    /* no password, a port, a user only: nothing to hide */
    expect("postgresql://host:5432/db", "postgresql://host:5432/db");
    expect("postgresql://user@host/db", "postgresql://user@host/db");
    expect("sasl_ssl://broker:9093, ssl://b2:9093", "sasl_ssl://broker:9093, ssl://b2:9093");
}

static void test_redact_keys(void **state) {
    (void)state;
    expect("host=h password=s3cr3t dbname=d", "host=h password=*** dbname=d");
    expect("host=h password = 'two words' user=u", "host=h password = '***' user=u");
    expect("--kafka sasl.password=s3cr3t", "--kafka sasl.password=***");
    expect("ssl.key.password=x sasl.oauthbearer.client.secret=y",
           "ssl.key.password=*** sasl.oauthbearer.client.secret=***");
    expect("missing \"=\" after \"bogus\" in connection info string",
           "missing \"=\" after \"bogus\" in connection info string");
    char small[8];
    common_redact("password=s3cr3t", small, sizeof(small));
    assert_null(strstr(small, "s3c"));
    char same[64] = "x password=s3cr3t";
    assert_string_equal(common_redact(same, same, sizeof(same)), "x password=***");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact_urls),
        cmocka_unit_test(test_redact_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
