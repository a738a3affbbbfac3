/* test_escape.c - compiler/escape.c on its own: every byte through the two
 * escapers, and numbers through emit_float.
 *
 *   - comment text of any byte string is printable ASCII with no `*`, no
 *     `?` and no backslash other than one starting \xNN, so it can neither
 *     close a comment nor splice a line;
 *   - string-literal text is printable ASCII with no `"`, `*`, `?`, and
 *     every backslash starts a three-digit octal escape that decodes back
 *     to the byte;
 *   - emit_float writes a number that strtod reads back exactly (decimal or
 *     hexadecimal), or NAN / INFINITY cast to the type;
 *   - with --comma: the same under a locale whose decimal point is a comma
 *     (an installed one, else one generated with localedef into a temporary
 *     LOCPATH), where printf itself writes "1,5": emit_float still writes no
 *     comma. Exit 77 (a CTest skip) when no such locale can be had. */
#define _GNU_SOURCE /* newlocale, uselocale */
#include "emit.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fputc('\n', stderr);                                                                                      \
            failures++;                                                                                               \
        }                                                                                                             \
    } while (0)

static bool printable(unsigned char c) { return c >= 0x20 && c < 0x7f; }

static void comment_byte(int b) {
    char in[8] = {'a', '*', (char)b, '/', (char)b, '\\', 0};
    dpc_buf o;
    dpc_buf_init(&o);
    emit_comment_text(&o, in);
    const char *s = o.data ? o.data : "";
    for (size_t i = 0; s[i]; i++) {
        CHECK(printable((unsigned char)s[i]) && s[i] != '*' && s[i] != '?', "byte 0x%02x: comment text '%s'", b, s);
        if (s[i] == '\\')
            CHECK(s[i + 1] == 'x' && s[i + 2] && s[i + 3], "byte 0x%02x: a bare backslash in '%s'", b, s);
    }
    dpc_buf_free(&o);
}

static void string_byte(int b) {
    char in[4] = {(char)b, '"', 0};
    dpc_buf o;
    dpc_buf_init(&o);
    emit_string_text(&o, in);
    const char *s = o.data ? o.data : "";
    char back[8];
    size_t n = 0;
    for (size_t i = 0; s[i] && n < sizeof back; i++) {
        unsigned char c = (unsigned char)s[i];
        CHECK(printable(c) && c != '"' && c != '*' && c != '?', "byte 0x%02x: literal text '%s'", b, s);
        if (c != '\\') {
            back[n++] = (char)c;
            continue;
        }
        CHECK(s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' &&
                  s[i + 3] <= '7',
              "byte 0x%02x: escape in '%s' is not \\ooo", b, s);
        back[n++] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
        i += 3;
    }
    CHECK(n == 2 && back[0] == (char)b && back[1] == '"', "byte 0x%02x: '%s' does not decode back", b, s);
    dpc_buf_free(&o);
}

/* Reads a literal emit_float wrote, in the C locale. */
static double read_back(const char *t, bool f32, bool *ok) {
    char num[EMIT_FLOAT_MAX];
    snprintf(num, sizeof num, "%s", t);
    size_t n = strlen(num);
    *ok = true;
    if (f32) {
        *ok = n > 0 && num[n - 1] == 'f';
        num[n ? n - 1 : 0] = 0;
    }
    char *end;
    double v = strtod(num, &end);
    *ok = *ok && *end == 0 && n > 1;
    return v;
}

static void one_float(double v, bool f32) {
    char t[EMIT_FLOAT_MAX];
    emit_float_str(t, sizeof t, v, f32);
    CHECK(!strchr(t, ','), "%.17g: '%s' has a comma", v, t);
    if (isnan(v) || isinf(v)) {
        const char *want = isnan(v) ? (f32 ? "((float)(NAN))" : "((double)(NAN))")
                           : v > 0  ? (f32 ? "((float)(INFINITY))" : "((double)(INFINITY))")
                                    : (f32 ? "((float)(-INFINITY))" : "((double)(-INFINITY))");
        CHECK(strcmp(t, want) == 0, "%g: '%s', want '%s'", v, t, want);
        return;
    }
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = uselocale(c);
    bool ok;
    double back = read_back(t, f32, &ok);
    uselocale(old);
    freelocale(c);
    CHECK(ok && back == v && signbit(back) == signbit(v), "%.17g: '%s' reads back as %.17g", v, t, back);
}

static void floats(void) {
    const double vals[] = {0.0,     -0.0,   1.0,          0.5,     1e-5,   -3.25,     1e300, -1e300,  5e-324,
                           2.5e-8,  1e-45,  3.4028235e38, 1.0 / 3, 0.1,    123456789, NAN,   INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        one_float(vals[i], true);
        one_float(vals[i], false);
    }
}

/* A locale whose decimal point is a comma, set as LC_NUMERIC: an installed
 * one, else de_DE.UTF-8 generated by localedef into dir (LOCPATH). */
static bool comma_locale(char *dir, size_t n) {
    static const char *const comma[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"};
    for (size_t i = 0; i < sizeof comma / sizeof *comma; i++)
        if (setlocale(LC_NUMERIC, comma[i]) && localeconv()->decimal_point[0] == ',') {
            printf("test_escape: installed locale %s\n", comma[i]);
            return true;
        }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, n, "%s/dpc-locale-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        return false;
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1", dir);
    int rc = system(cmd); /* exits 1 on warnings while still writing the locale */
    setenv("LOCPATH", dir, 1);
    bool ok = setlocale(LC_NUMERIC, "de_DE.UTF-8") && localeconv()->decimal_point[0] == ',';
    printf("test_escape: localedef de_DE.UTF-8 into %s: rc %d, %s\n", dir, rc, ok ? "set" : "not usable");
    return ok;
}

static int comma_test(void) {
    char dir[4096] = "";
    bool have = comma_locale(dir, sizeof dir);
    if (have) {
        char probe[16];
        snprintf(probe, sizeof probe, "%.1f", 1.5);
        CHECK(strcmp(probe, "1,5") == 0, "the locale writes 1.5 as '%s'", probe);
        floats(); /* a decimal comma must not reach generated code */
        setlocale(LC_NUMERIC, "C");
    }
    if (dir[0]) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "test_escape: could not remove %s\n", dir);
    }
    if (!have) {
        printf("test_escape: no locale with a decimal comma (none installed, localedef failed): skipped\n");
        return 77;
    }
    if (failures) {
        fprintf(stderr, "test_escape --comma: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_escape --comma: ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--comma") == 0)
        return comma_test();
    for (int b = 1; b < 256; b++) {
        comment_byte(b);
        string_byte(b);
    }
    floats();
    if (failures) {
        fprintf(stderr, "test_escape: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_escape: ok\n");
    return 0;
}
