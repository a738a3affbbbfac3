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
 *     hexadecimal), or NAN / INFINITY cast to the type; under a locale with
 *     a decimal comma (where one is installed) it still writes no comma. */
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

int main(void) {
    for (int b = 1; b < 256; b++) {
        comment_byte(b);
        string_byte(b);
    }
    floats();
    /* a decimal comma must not reach generated code */
    static const char *const comma[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"};
    for (size_t i = 0; i < sizeof comma / sizeof *comma; i++)
        if (setlocale(LC_NUMERIC, comma[i])) {
            printf("test_escape: floats again under LC_NUMERIC=%s\n", comma[i]);
            floats();
            setlocale(LC_NUMERIC, "C");
            break;
        }
    if (failures) {
        fprintf(stderr, "test_escape: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_escape: ok\n");
    return 0;
}
