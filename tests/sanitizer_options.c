/* Default options of the sanitizer runtimes, compiled into every program of a sanitized build
 * (-DRECLASS_SANITIZE=ON, -DRECLASS_FUZZ=ON) that links reclass_core, so that a test binary
 * or reclass run by hand behaves as under tests/sanitize.sh. *SAN_OPTIONS in the environment
 * are applied on top of these. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__lsan_default_options(void);

const char *__asan_default_options(void) {
    return "detect_leaks=1:strict_string_checks=1:check_initialization_order=1";
}

const char *__ubsan_default_options(void) {
    return "print_stacktrace=1:halt_on_error=1";
}

/* use_unaligned: avro-c keeps the pointers to its live value buffers at unaligned offsets;
 * without it LeakSanitizer reports those buffers as leaked. */
const char *__lsan_default_options(void) {
    return "use_unaligned=1:suppressions=" RECLASS_SOURCE_DIR "/tests/lsan.supp";
}
