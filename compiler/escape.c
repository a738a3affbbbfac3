/* escape.c - the only way text from a user's file enters generated source.
 *
 * The C and CUDA dialects are compiled and loaded into the process (cc and
 * dlopen, NVRTC), so whatever a .dp or .dpa can put into them outside a
 * comment or a string literal is code that runs. Names and paths from a
 * model (source and import paths, module and scope names, the model's name)
 * reach generated source only as comment text or string-literal text
 * written here; identifiers in generated code are generated (k3, b7, v12),
 * never copied from the model; numbers from the model are written by
 * emit_float, whose output is checked to be a number.
 *
 * Both escapers pass a conservative set of printable ASCII through and write
 * every other byte as an escape, so the output is one line of plain ASCII
 * that cannot end its comment or literal early:
 *   - `*` is escaped, so neither the `*` of a closing `*` `/` nor the `*` of
 *     an opening one can appear in comment text (nor in a literal, where
 *     it is harmless, so that no user text ever contributes a `*`);
 *   - control bytes (newline included) are escaped, so a comment or a
 *     `#line` directive stays on its line, and the line-start scans that the
 *     CUDA emitter does (its `#line` and comment stripping in canonical())
 *     see only what the emitter wrote;
 *   - `\` is escaped, so no backslash-newline splices the next line into a
 *     comment or a literal, and `?` is escaped, so no trigraph (`??/` is a
 *     backslash in ISO C modes) can make one;
 *   - bytes >= 0x80 are escaped, so the output is ASCII whatever the host
 *     compiler's input charset.
 * A comment's escapes read \xNN (a backslash followed by x never splices); a
 * literal's are three octal digits, \ooo, because a hex escape would swallow
 * the hex digits that follow it. */
#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char HEX[] = "0123456789abcdef";

/* Printable ASCII that means nothing special in either position: not `*`
 * (comments), `"` (literals), `\` or `?` (splices, escapes, trigraphs). */
static bool plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '*' && c != '"' && c != '\\' && c != '?'; }

void emit_comment_text(dpc_buf *o, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (plain(*p) || *p == '"') {
            dpc_buf_put(o, (const char *)p, 1);
            continue;
        }
        char esc[4] = {'\\', 'x', HEX[*p >> 4], HEX[*p & 15]};
        dpc_buf_put(o, esc, sizeof esc);
    }
}

void emit_string_text(dpc_buf *o, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (plain(*p)) {
            dpc_buf_put(o, (const char *)p, 1);
            continue;
        }
        char esc[4] = {'\\', (char)('0' + (*p >> 6)), (char)('0' + ((*p >> 3) & 7)), (char)('0' + (*p & 7))};
        dpc_buf_put(o, esc, sizeof esc);
    }
}

/* Whether t is a decimal floating literal as dpc_format_pyfloat writes one:
 * digits, one point, an optional exponent. Anything else (a locale's decimal
 * comma, say) is not written as code. */
static bool decimal_literal(const char *t) {
    size_t i = t[0] == '-' ? 1 : 0, digits = 0;
    bool point = false;
    for (; t[i] && t[i] != 'e'; i++) {
        if (t[i] >= '0' && t[i] <= '9')
            digits++;
        else if (t[i] == '.' && !point)
            point = true;
        else
            return false;
    }
    if (!digits || !point)
        return false;
    if (!t[i])
        return true;
    i++;
    if (t[i] == '+' || t[i] == '-')
        i++;
    if (!t[i])
        return false;
    for (; t[i]; i++)
        if (t[i] < '0' || t[i] > '9')
            return false;
    return true;
}

/* v exactly, as a hexadecimal floating literal built from integers only. */
static void hex_literal(char *b, size_t n, double v, const char *suffix) {
    int e;
    double m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
    unsigned long long mant = (unsigned long long)ldexp(m, 53);
    snprintf(b, n, "%s0x%llxp%d%s", signbit(v) ? "-" : "", mant, e - 53, suffix);
}

const char *emit_float_str(char *b, size_t n, double v, bool f32) {
    const char *suffix = f32 ? "f" : "";
    if (isnan(v) || isinf(v)) {
        snprintf(b, n, "((%s)(%s))", f32 ? "float" : "double", isnan(v) ? "NAN" : v < 0 ? "-INFINITY" : "INFINITY");
        return b;
    }
    char num[64];
    dpc_format_pyfloat(v, num, sizeof num);
    if (decimal_literal(num))
        snprintf(b, n, "%s%s", num, suffix);
    else
        hex_literal(b, n, v, suffix);
    return b;
}

void emit_float(dpc_buf *o, double v, bool f32) {
    char b[EMIT_FLOAT_MAX];
    dpc_buf_puts(o, emit_float_str(b, sizeof b, v, f32));
}
