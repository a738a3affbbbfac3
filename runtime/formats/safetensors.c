/* safetensors.c - the safetensors reader and writer; see safetensors.h for
 * the checks. The header is read in two passes over the text, neither
 * recursive: a strict JSON scanner (syntax, depth, integers only, no NUL
 * escapes, short arrays) and then a walk that follows the format's schema
 * and reads the values in place. */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the JSON pre-scan --------------------------------------------------- */

typedef struct jscan {
    const unsigned char *s;
    size_t n, i;
    dpc_err *e;
} jscan;

static dpc_status jfail(jscan *j, const char *what) {
    /* Byte offsets count from the start of the file (the header is at 8). */
    return dpc_errf(j->e, DPC_EUSER, "invalid JSON in the header at byte %zu: %s", j->i + 8, what);
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool hex4(jscan *j, size_t at, unsigned *cp) {
    *cp = 0;
    if (at > j->n || j->n - at < 4)
        return false;
    for (size_t k = 0; k < 4; k++) {
        int c = j->s[at + k], v;
        if (is_digit(c))
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else
            return false;
        *cp = *cp << 4 | (unsigned)v;
    }
    return true;
}

/* \uXXXX at j->i (just past the backslash and 'u'): NUL and unpaired
 * surrogates are refused; a pair is consumed whole. */
static dpc_status scan_uescape(jscan *j) {
    unsigned cp, lo;
    if (!hex4(j, j->i, &cp))
        return jfail(j, "invalid \\u escape");
    if (cp == 0)
        return jfail(j, "\\u0000 in a string (names and metadata may not contain NUL)");
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return jfail(j, "unpaired UTF-16 surrogate in a \\u escape");
    j->i += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (j->n - j->i < 6 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u' || !hex4(j, j->i + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
            return jfail(j, "unpaired UTF-16 surrogate in a \\u escape");
        j->i += 6;
    }
    return DPC_OK;
}

static dpc_status scan_string(jscan *j) {
    for (j->i++; j->i < j->n;) {
        unsigned char c = j->s[j->i];
        if (c == '"') {
            j->i++;
            return DPC_OK;
        }
        if (c < 0x20)
            return jfail(j, "control character in a string");
        if (c != '\\') {
            j->i++;
            continue;
        }
        if (++j->i == j->n)
            break;
        c = j->s[j->i++];
        if (c == 'u') {
            dpc_status st = scan_uescape(j);
            if (st)
                return st;
        } else if (!c || !strchr("\"\\/bfnrt", c)) {
            j->i--;
            return jfail(j, "invalid escape in a string");
        }
    }
    return jfail(j, "unterminated string");
}

/* JSON's number grammar; a fraction or exponent is refused, since every
 * number in a valid header is a dim or an offset. */
static dpc_status scan_number(jscan *j) {
    size_t start = j->i;
    const unsigned char *s = j->s;
    bool integral = true;
    if (s[j->i] == '-')
        j->i++;
    if (j->i == j->n || !is_digit(s[j->i]))
        return jfail(j, "invalid number");
    if (s[j->i] == '0' && j->i + 1 < j->n && is_digit(s[j->i + 1]))
        return jfail(j, "number with a leading zero");
    while (j->i < j->n && is_digit(s[j->i]))
        j->i++;
    for (int part = 0; part < 2; part++) { /* fraction, then exponent */
        if (j->i == j->n || !(part ? s[j->i] == 'e' || s[j->i] == 'E' : s[j->i] == '.'))
            continue;
        integral = false;
        j->i++;
        if (part && j->i < j->n && (s[j->i] == '+' || s[j->i] == '-'))
            j->i++;
        if (j->i == j->n || !is_digit(s[j->i]))
            return jfail(j, "invalid number");
        while (j->i < j->n && is_digit(s[j->i]))
            j->i++;
    }
    if (!integral || j->i - start > 20) {
        char q[80], msg[200];
        size_t at = j->i;
        dpc_quote((const char *)s + start, j->i - start, q, sizeof q);
        snprintf(msg, sizeof msg, "number '%s' is %s (dims and offsets are integers up to 2^48-1)", q,
                 integral ? "too long" : "not an integer");
        j->i = start;
        dpc_status st = jfail(j, msg);
        j->i = at;
        return st;
    }
    return DPC_OK;
}

static dpc_status scan_literal(jscan *j) {
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if (j->n - j->i >= l && !memcmp(j->s + j->i, lits[k], l)) {
            j->i += l;
            return DPC_OK;
        }
    }
    return jfail(j, "unexpected character");
}

enum { J_VALUE, J_VALUE_OR_CLOSE, J_KEY, J_KEY_OR_CLOSE, J_COLON, J_COMMA_OR_CLOSE, J_DONE };

typedef struct jstack {
    char kind[DPC_ST_MAX_DEPTH]; /* '{' or '[' */
    unsigned count[DPC_ST_MAX_DEPTH];
    int depth;
} jstack;

/* One value in state J_VALUE: opens a container or scans a scalar. Returns
 * the next state through *state. */
static dpc_status scan_value(jscan *j, jstack *k, int *state) {
    unsigned char c = j->s[j->i];
    if (k->depth == 0 && c != '{')
        return jfail(j, "the header is not a JSON object");
    if (k->depth > 0 && k->kind[k->depth - 1] == '[' && ++k->count[k->depth - 1] > DPC_MAX_RANK)
        return jfail(j, "array with more than 8 elements (no valid header field has more)");
    if (c == '{' || c == '[') {
        if (k->depth == DPC_ST_MAX_DEPTH)
            return jfail(j, "JSON nested deeper than 64 levels");
        k->kind[k->depth] = (char)c;
        k->count[k->depth++] = 0;
        j->i++;
        *state = c == '{' ? J_KEY_OR_CLOSE : J_VALUE_OR_CLOSE;
        return DPC_OK;
    }
    dpc_status st = c == '"' ? scan_string(j) : c == '-' || is_digit(c) ? scan_number(j) : scan_literal(j);
    *state = k->depth ? J_COMMA_OR_CLOSE : J_DONE;
    return st;
}

/* Validates the header; *members gets the number of top-level members. */
static dpc_status json_prescan(const unsigned char *s, size_t n, size_t *members, dpc_err *e) {
    jscan j = {s, n, 0, e};
    jstack k = {.depth = 0};
    int state = J_VALUE;
    for (;;) {
        while (j.i < n && (s[j.i] == ' ' || s[j.i] == '\t' || s[j.i] == '\n' || s[j.i] == '\r'))
            j.i++;
        if (j.i == n)
            return state == J_DONE ? DPC_OK : jfail(&j, "unexpected end of the header");
        unsigned char c = s[j.i];
        char close = k.depth && k.kind[k.depth - 1] == '{' ? '}' : ']';
        dpc_status st = DPC_OK;
        if (state == J_DONE)
            return jfail(&j, "unexpected text after the JSON object");
        if ((state == J_KEY_OR_CLOSE || state == J_VALUE_OR_CLOSE || state == J_COMMA_OR_CLOSE) && c == close) {
            j.i++;
            k.depth--;
            state = k.depth ? J_COMMA_OR_CLOSE : J_DONE;
        } else if (state == J_KEY_OR_CLOSE || state == J_KEY) {
            if (c != '"')
                return jfail(&j, "expected a string key");
            *members += k.depth == 1;
            st = scan_string(&j);
            state = J_COLON;
        } else if (state == J_COLON) {
            if (c != ':')
                return jfail(&j, "expected ':'");
            j.i++;
            state = J_VALUE;
        } else if (state == J_COMMA_OR_CLOSE) {
            if (c != ',')
                return jfail(&j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
            j.i++;
            state = close == '}' ? J_KEY : J_VALUE;
        } else
            st = scan_value(&j, &k, &state);
        if (st)
            return st;
    }
}

/* ---- header semantics: a walk over the validated JSON ---------------------
 * The pre-scan has proven the header strict JSON within the limits; this
 * walk follows the schema and reads values in place. It builds no tree: a
 * cJSON tree costs up to ~30 times the text, which a 100 MB header would
 * turn into gigabytes. It allocates one entry per tensor (counted by the
 * pre-scan), the names, and the metadata, all bounded by the text. */

/* A tensor while parsing: its offsets stay beside it until the tiling check. */
typedef struct st_entry {
    dpc_st_tensor t;
    uint64_t begin, end;
} st_entry;

static const struct {
    const char *name;
    dpc_dtype dt;
} st_dtypes[] = {{"F64", DPC_F64}, {"F32", DPC_F32}, {"F16", DPC_F16}, {"BF16", DPC_BF16},
                 {"I64", DPC_I64}, {"I32", DPC_I32}, {"I16", DPC_I16}, {"I8", DPC_I8},
                 {"U8", DPC_U8},   {"BOOL", DPC_BOOL}};

static const char *st_dtype_code(dpc_dtype dt) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dt == dt)
            return st_dtypes[i].name;
    return NULL;
}

static void qname(const char *s, char out[80]) { dpc_quote(s, strlen(s), out, 80); }

static void skip_ws(jscan *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

static int cur(const jscan *j) { return j->i < j->n ? j->s[j->i] : -1; }

/* Consumes c (and the whitespace after it). The pre-scan guarantees the
 * structural characters are there; checking again costs nothing. */
static dpc_status expect(jscan *j, char c) {
    if (cur(j) != c) {
        char msg[32];
        snprintf(msg, sizeof msg, "expected '%c'", c);
        return jfail(j, msg);
    }
    j->i++;
    skip_ws(j);
    return DPC_OK;
}

static void put_utf8(char *o, size_t *k, unsigned cp) {
    if (cp < 0x80)
        o[(*k)++] = (char)cp;
    else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | cp >> 6);
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | cp >> 12);
        o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | cp >> 18);
        o[(*k)++] = (char)(0x80 | (cp >> 12 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Decodes the (validated) string at j->i into a new C string; the decoded
 * text is never longer than the escaped text. */
static dpc_status get_string(jscan *j, char **out) {
    *out = NULL;
    if (cur(j) != '"')
        return jfail(j, "expected a string");
    size_t end = ++j->i;
    while (end < j->n && j->s[end] != '"')
        end += j->s[end] == '\\' ? 2 : 1;
    if (end >= j->n)
        return jfail(j, "unterminated string");
    char *o = dpc_malloc(end - j->i + 1);
    if (!o)
        return dpc_errf(j->e, DPC_ENOMEM, "out of memory reading the header");
    size_t k = 0;
    while (j->i < end) {
        unsigned char c = j->s[j->i++];
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        c = j->s[j->i++];
        unsigned cp = 0, lo = 0;
        if (c == 'u') {
            hex4(j, j->i, &cp);
            j->i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && hex4(j, j->i + 2, &lo)) { /* pair: checked by the pre-scan */
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                j->i += 6;
            }
            put_utf8(o, &k, cp);
        } else
            o[k++] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : (char)c;
    }
    o[k] = 0;
    j->i = end + 1;
    skip_ws(j);
    *out = o;
    return DPC_OK;
}

/* An integer in [0, 2^48-1], read exactly from the text (never through a
 * double, so 2^64 or 2^53+1 are reported as written). */
static dpc_status get_uint(jscan *j, const char *tname, const char *field, uint64_t *out) {
    char q[80], v[80];
    qname(tname, q);
    int c = cur(j);
    if (c != '-' && !is_digit(c))
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': %s must hold integers", q, field);
    size_t start = j->i;
    uint64_t x = 0;
    bool neg = c == '-', big = false;
    for (j->i += neg; is_digit(cur(j)); j->i++) {
        x = x * 10 + (uint64_t)(cur(j) - '0');
        big |= x > DPC_ST_MAX_INT;
        if (big)
            x = DPC_ST_MAX_INT; /* keeps the product from wrapping */
    }
    if (neg || big || cur(j) == '.' || cur(j) == 'e' || cur(j) == 'E') {
        dpc_quote((const char *)j->s + start, j->i - start, v, sizeof v);
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': %s value %s is out of range (integers 0 to 2^48-1)", q,
                        field, v);
    }
    skip_ws(j);
    *out = x;
    return DPC_OK;
}

/* [n, n, ...] with at most max elements into v; *count gets the length. */
static dpc_status get_uint_array(jscan *j, const char *tname, const char *field, int max, uint64_t *v,
                                 int *count) {
    char q[80];
    qname(tname, q);
    if (cur(j) != '[')
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': %s must be an array", q, field);
    dpc_status s = expect(j, '[');
    for (*count = 0; !s && cur(j) != ']';) {
        if (*count == max)
            return dpc_errf(j->e, DPC_EUSER, "tensor '%s': %s must be an array of at most %d integers", q, field,
                            max);
        s = get_uint(j, tname, field, &v[(*count)++]);
        if (!s && cur(j) == ',')
            s = expect(j, ',');
    }
    return s ? s : expect(j, ']');
}

static dpc_status get_dtype(jscan *j, st_entry *en) {
    char q[80], dq[80];
    qname(en->t.name, q);
    if (cur(j) != '"')
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': dtype must be a string", q);
    char *d;
    dpc_status s = get_string(j, &d);
    if (s)
        return s;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(d, st_dtypes[i].name)) {
            en->t.dtype = st_dtypes[i].dt;
            dpc_free(d);
            return DPC_OK;
        }
    qname(d, dq);
    dpc_free(d);
    return dpc_errf(j->e, DPC_EUSER, "unsupported dtype '%s' for tensor '%s' (supported: F64 F32 F16 BF16 I64 I32 "
                    "I16 I8 U8 BOOL)", dq, q);
}

static dpc_status get_shape(jscan *j, st_entry *en) {
    uint64_t v[DPC_MAX_RANK];
    int n = 0;
    dpc_status s = get_uint_array(j, en->t.name, "shape", DPC_MAX_RANK, v, &n);
    for (int i = 0; i < n && !s; i++)
        en->t.shape[i] = (int64_t)v[i];
    en->t.rank = n;
    return s;
}

static dpc_status get_offsets(jscan *j, st_entry *en) {
    char q[80];
    qname(en->t.name, q);
    uint64_t v[2];
    int n = 0;
    dpc_status s = get_uint_array(j, en->t.name, "data_offsets", 2, v, &n);
    if (!s && n != 2)
        s = dpc_errf(j->e, DPC_EUSER, "tensor '%s': data_offsets must be an array [begin, end]", q);
    if (s)
        return s;
    en->begin = v[0];
    en->end = v[1];
    if (en->begin > en->end)
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': data_offsets [%llu, %llu] end before they begin", q,
                        (unsigned long long)en->begin, (unsigned long long)en->end);
    return DPC_OK;
}

/* Byte size of a tensor, every step overflow-checked; false on overflow. */
static bool tensor_bytes(dpc_dtype dt, int rank, const int64_t *shape, uint64_t *bytes) {
    uint64_t numel = 1;
    for (int i = 0; i < rank; i++)
        if (__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel))
            return false;
    return !__builtin_mul_overflow(numel, (uint64_t)dpc_dtype_size(dt), bytes) && *bytes <= SIZE_MAX;
}

/* Element count times element size must equal end - begin. */
static dpc_status check_size(const st_entry *en, dpc_err *e) {
    char q[80], s[160];
    qname(en->t.name, q);
    dpc_shape_str(en->t.rank, en->t.shape, s, sizeof s);
    uint64_t bytes;
    if (!tensor_bytes(en->t.dtype, en->t.rank, en->t.shape, &bytes))
        return dpc_errf(e, DPC_EUSER, "tensor '%s': %s of shape %s is too large (size overflow)", q,
                        st_dtype_code(en->t.dtype), s);
    if (bytes != en->end - en->begin)
        return dpc_errf(e, DPC_EUSER,
                        "tensor '%s': size mismatch: data_offsets [%llu, %llu] hold %llu bytes, %s of shape "
                        "%s needs %llu",
                        q, (unsigned long long)en->begin, (unsigned long long)en->end,
                        (unsigned long long)(en->end - en->begin), st_dtype_code(en->t.dtype), s,
                        (unsigned long long)bytes);
    return DPC_OK;
}

/* One tensor entry: exactly dtype, shape and data_offsets, once each. */
static dpc_status parse_tensor(jscan *j, st_entry *en) {
    char q[80], kq[80];
    qname(en->t.name, q);
    if (cur(j) != '{')
        return dpc_errf(j->e, DPC_EUSER, "tensor '%s': entry is not a JSON object", q);
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    dpc_status (*const get[])(jscan *, st_entry *) = {get_dtype, get_shape, get_offsets};
    bool seen[3] = {false, false, false};
    dpc_status s = expect(j, '{');
    while (!s && cur(j) != '}') {
        char *key;
        if ((s = get_string(j, &key)))
            return s;
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]))
            k++;
        qname(key, kq);
        dpc_free(key);
        if (k == 3)
            return dpc_errf(j->e, DPC_EUSER, "tensor '%s': unexpected key '%s' (expected dtype, shape, data_offsets)",
                            q, kq);
        if (seen[k])
            return dpc_errf(j->e, DPC_EUSER, "tensor '%s': key '%s' appears twice", q, kq);
        seen[k] = true;
        if (!(s = expect(j, ':')) && !(s = get[k](j, en)) && cur(j) == ',')
            s = expect(j, ',');
    }
    if (s || (s = expect(j, '}')))
        return s;
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return dpc_errf(j->e, DPC_EUSER, "tensor '%s': missing '%s'", q, keys[k]);
    return check_size(en, j->e);
}

typedef struct meta_list {
    char **kv; /* pair i at [2i, 2i+1] */
    size_t n, cap;
} meta_list;

static int cmp_pair(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a pair; on failure the caller still owns k and v. */
static dpc_status meta_push(jscan *j, meta_list *m, char *k, char *v) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 8;
        char **kv = dpc_realloc(m->kv, 2 * cap * sizeof *kv);
        if (!kv)
            return dpc_errf(j->e, DPC_ENOMEM, "out of memory reading __metadata__");
        m->kv = kv;
        m->cap = cap;
    }
    m->kv[2 * m->n] = k;
    m->kv[2 * m->n++ + 1] = v;
    return DPC_OK;
}

/* __metadata__: string -> string. */
static dpc_status parse_meta(jscan *j, meta_list *m) {
    if (cur(j) != '{')
        return dpc_errf(j->e, DPC_EUSER, "__metadata__ must be a JSON object mapping strings to strings");
    dpc_status s = expect(j, '{');
    while (!s && cur(j) != '}') {
        char *k, *v = NULL, q[80];
        if ((s = get_string(j, &k)))
            return s;
        if (!(s = expect(j, ':')) && cur(j) != '"') {
            qname(k, q);
            s = dpc_errf(j->e, DPC_EUSER, "__metadata__ value for key '%s' is not a string", q);
        }
        if (s || (s = get_string(j, &v)) || (s = meta_push(j, m, k, v))) {
            dpc_free(k);
            dpc_free(v);
            return s;
        }
        if (cur(j) == ',')
            s = expect(j, ',');
    }
    return s ? s : expect(j, '}');
}

/* Sorts the pairs by key, refuses a key given twice, and hands them to st. */
static dpc_status store_meta(meta_list *m, dpc_safetensors *st, dpc_err *e) {
    if (m->n) /* qsort(NULL, 0, ...) is undefined */
        qsort(m->kv, m->n, 2 * sizeof *m->kv, cmp_pair);
    for (size_t i = 1; i < m->n; i++)
        if (!strcmp(m->kv[2 * i], m->kv[2 * i - 2])) {
            char q[80];
            qname(m->kv[2 * i], q);
            return dpc_errf(e, DPC_EUSER, "__metadata__ has key '%s' twice", q);
        }
    st->meta_keys = dpc_calloc(m->n ? m->n : 1, sizeof *st->meta_keys);
    st->meta_vals = dpc_calloc(m->n ? m->n : 1, sizeof *st->meta_vals);
    if (!st->meta_keys || !st->meta_vals)
        return dpc_errf(e, DPC_ENOMEM, "out of memory reading __metadata__");
    for (size_t i = 0; i < m->n; i++) {
        st->meta_keys[i] = m->kv[2 * i];
        st->meta_vals[i] = m->kv[2 * i + 1];
    }
    st->nmeta = m->n;
    m->n = 0; /* st owns the strings now */
    return DPC_OK;
}

static void meta_free(meta_list *m) {
    for (size_t i = 0; i < 2 * m->n; i++)
        dpc_free(m->kv[i]);
    dpc_free(m->kv);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->t.name, ((const st_entry *)b)->t.name);
}

/* Sorted by name, a name given twice sits next to itself. */
static dpc_status check_unique(st_entry *en, size_t n, dpc_err *e) {
    qsort(en, n, sizeof *en, cmp_names);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(en[i].t.name, en[i - 1].t.name)) {
            char q[80];
            qname(en[i].t.name, q);
            return dpc_errf(e, DPC_EUSER, "duplicate tensor name '%s' in the header", q);
        }
    return DPC_OK;
}

/* One top-level member: __metadata__ or a tensor (into en[*n]). */
static dpc_status parse_member(jscan *j, st_entry *en, size_t *n, meta_list *m, bool *meta_seen) {
    char *key;
    dpc_status s = get_string(j, &key);
    if (s || (s = expect(j, ':'))) {
        dpc_free(key);
        return s;
    }
    if (!strcmp(key, "__metadata__")) {
        dpc_free(key);
        if (*meta_seen)
            return dpc_errf(j->e, DPC_EUSER, "duplicate tensor name '__metadata__' in the header");
        *meta_seen = true;
        return parse_meta(j, m);
    }
    st_entry *x = &en[(*n)++];
    x->t.name = key;
    return parse_tensor(j, x);
}

/* The whole header: entries (sorted by name, unique) and metadata. */
static dpc_status walk_header(jscan *j, size_t members, dpc_safetensors *st, st_entry **entries, size_t *n) {
    st_entry *en = dpc_calloc(members ? members : 1, sizeof *en);
    if (!en)
        return dpc_errf(j->e, DPC_ENOMEM, "out of memory reading the header (%zu entries)", members);
    *entries = en;
    *n = 0;
    meta_list m = {NULL, 0, 0};
    bool meta_seen = false;
    skip_ws(j);
    dpc_status s = expect(j, '{');
    while (!s && cur(j) != '}') {
        if (*n == members)
            s = jfail(j, "more members than counted"); /* cannot happen after the pre-scan */
        else if (!(s = parse_member(j, en, n, &m, &meta_seen)) && cur(j) == ',')
            s = expect(j, ',');
    }
    if (!s && !(s = expect(j, '}')) && !(s = check_unique(en, *n, j->e)))
        s = store_meta(&m, st, j->e);
    meta_free(&m);
    return s;
}

/* ---- data ------------------------------------------------------------------ */

static int cmp_offsets(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorted by offsets, each tensor must start where the previous one ended
 * and the last must end at the end of the buffer. */
static dpc_status check_tiling(st_entry *en, size_t n, uint64_t data_len, dpc_err *e) {
    st_entry **by = dpc_calloc(n ? n : 1, sizeof *by);
    if (!by)
        return dpc_errf(e, DPC_ENOMEM, "out of memory checking data offsets");
    for (size_t i = 0; i < n; i++)
        by[i] = &en[i];
    qsort(by, n, sizeof *by, cmp_offsets);
    uint64_t at = 0;
    dpc_status st = DPC_OK;
    char q[80], pq[80];
    for (size_t i = 0; i < n && !st; i++) {
        qname(by[i]->t.name, q);
        if (by[i]->end > data_len)
            st = dpc_errf(e, DPC_EUSER, "tensor '%s': data_offsets end %llu is past the end of the data (%llu bytes)",
                          q, (unsigned long long)by[i]->end, (unsigned long long)data_len);
        else if (by[i]->begin > at)
            st = dpc_errf(e, DPC_EUSER, "gap of %llu bytes before tensor '%s' (the data must be fully used)",
                          (unsigned long long)(by[i]->begin - at), q);
        else if (by[i]->begin < at) {
            qname(by[i - 1]->t.name, pq);
            st = dpc_errf(e, DPC_EUSER, "tensor '%s' overlaps tensor '%s' (data_offsets [%llu, %llu])", q, pq,
                          (unsigned long long)by[i]->begin, (unsigned long long)by[i]->end);
        }
        at = by[i]->end;
    }
    if (!st && at != data_len)
        st = dpc_errf(e, DPC_EUSER, "%llu trailing bytes after the last tensor (the data must be fully used)",
                      (unsigned long long)(data_len - at));
    dpc_free(by);
    return st;
}

static dpc_status copy_data(st_entry *en, const unsigned char *data, dpc_err *e) {
    size_t nb = (size_t)(en->end - en->begin);
    char q[80];
    qname(en->t.name, q);
    size_t i;
    if (en->t.dtype == DPC_BOOL && !dpc_bool_valid(data + en->begin, nb, &i))
        return dpc_errf(e, DPC_EUSER, "tensor '%s': BOOL holds byte 0x%02x at element %zu (only 0 and 1 are valid)", q,
                        data[en->begin + i], i);
    en->t.data = dpc_aligned_alloc(nb);
    if (!en->t.data)
        return dpc_errf(e, DPC_ENOMEM, "out of memory loading tensor '%s' (%zu bytes)", q, nb);
    memcpy(en->t.data, data + en->begin, nb);
    en->t.nbytes = nb;
    return DPC_OK;
}

/* ---- the reader ------------------------------------------------------------ */

/* Checks the 8-byte length prefix against the file: *hlen is N. */
static dpc_status check_frame(const unsigned char *b, size_t len, size_t *hlen, dpc_err *e) {
    if (len < 8)
        return dpc_errf(e, DPC_EUSER, "file too small for a safetensors header (%zu bytes, need at least 8)", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    if (n > DPC_ST_MAX_HEADER)
        return dpc_errf(e, DPC_EUSER, "header length %llu exceeds the limit of %u bytes", (unsigned long long)n,
                        DPC_ST_MAX_HEADER);
    size_t end;
    if (!dpc_add_size(8, (size_t)n, &end) || end > len)
        return dpc_errf(e, DPC_EUSER, "header length %llu runs past the end of the file (%zu bytes)",
                        (unsigned long long)n, len);
    *hlen = (size_t)n;
    return DPC_OK;
}

static void free_entries(st_entry *en, size_t n) {
    for (size_t i = 0; en && i < n; i++) {
        dpc_free(en[i].t.name);
        dpc_free(en[i].t.data);
    }
    dpc_free(en);
}

/* Turns the entries into the tensor array in place (a tensor is the first
 * part of its entry, so moving each down never overwrites one not yet
 * moved), sparing a second array as large as the first. */
static dpc_st_tensor *pack_entries(st_entry *en, size_t n) {
    dpc_st_tensor *t = (dpc_st_tensor *)en;
    for (size_t i = 0; i < n; i++)
        memmove(&t[i], &en[i].t, sizeof *t);
    dpc_st_tensor *shrunk = dpc_realloc(t, (n ? n : 1) * sizeof *t);
    return shrunk ? shrunk : t; /* a failed shrink leaves the block as it was */
}

/* Header text to entries: UTF-8, the JSON pre-scan, then the schema walk. */
static dpc_status parse_header(const char *h, size_t hlen, dpc_safetensors *st, st_entry **en, size_t *n,
                               dpc_err *e) {
    size_t bad, members = 0;
    if (!dpc_utf8_valid(h, hlen, &bad))
        return dpc_errf(e, DPC_EUSER, "header is not valid UTF-8 (byte %zu)", bad + 8);
    dpc_status s = json_prescan((const unsigned char *)h, hlen, &members, e);
    if (s)
        return s;
    jscan j = {(const unsigned char *)h, hlen, 0, e};
    return walk_header(&j, members, st, en, n);
}

dpc_status dpc_st_parse(const void *buf, size_t len, dpc_safetensors **out, dpc_err *e) {
    *out = NULL;
    const unsigned char *b = buf;
    size_t hlen = 0, n = 0;
    dpc_status s = check_frame(b, len, &hlen, e);
    if (s)
        return s;
    dpc_safetensors *st = dpc_calloc(1, sizeof *st);
    if (!st)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    st_entry *en = NULL;
    const unsigned char *data = b + 8 + hlen;
    s = parse_header((const char *)b + 8, hlen, st, &en, &n, e);
    if (!s)
        s = check_tiling(en, n, len - 8 - hlen, e);
    for (size_t i = 0; i < n && !s; i++)
        s = copy_data(&en[i], data, e);
    if (s) {
        free_entries(en, n);
        dpc_st_free(st);
        return s;
    }
    st->t = pack_entries(en, n);
    st->n = n;
    *out = st;
    return DPC_OK;
}

/* dpc_st_parse in the type dpc_parse_file takes. */
static dpc_status parse_st(const void *buf, size_t len, void *out, dpc_err *e) { return dpc_st_parse(buf, len, out, e); }

dpc_status dpc_st_read(const char *path, dpc_safetensors **out, dpc_err *e) {
    *out = NULL;
    return dpc_parse_file(path, parse_st, out, e);
}

static int cmp_find(const void *key, const void *elem) {
    return strcmp(key, ((const dpc_st_tensor *)elem)->name);
}

const dpc_st_tensor *dpc_st_find(const dpc_safetensors *st, const char *name) {
    if (!st || !st->n)
        return NULL;
    return bsearch(name, st->t, st->n, sizeof *st->t, cmp_find);
}

void dpc_st_free(dpc_safetensors *st) {
    if (!st)
        return;
    for (size_t i = 0; st->t && i < st->n; i++) {
        dpc_free(st->t[i].name);
        dpc_free(st->t[i].data);
    }
    for (size_t i = 0; i < st->nmeta; i++) {
        dpc_free(st->meta_keys[i]);
        dpc_free(st->meta_vals[i]);
    }
    dpc_free(st->t);
    dpc_free(st->meta_keys);
    dpc_free(st->meta_vals);
    dpc_free(st);
}

/* ---- the writer ------------------------------------------------------------ */

/* Everything the reader would refuse is refused here, so that what dpc
 * writes dpc (and the reference) can read. */
static dpc_status check_out_tensor(const dpc_st_tensor *t, dpc_err *e) {
    char q[80];
    if (!t->name || !dpc_utf8_valid(t->name, strlen(t->name), NULL))
        return dpc_errf(e, DPC_EUSAGE, "tensor name is missing or not valid UTF-8");
    qname(t->name, q);
    if (!strcmp(t->name, "__metadata__"))
        return dpc_errf(e, DPC_EUSAGE, "a tensor may not be called '__metadata__'");
    if ((unsigned)t->dtype >= DPC_NUM_DTYPES || t->rank < 0 || t->rank > DPC_MAX_RANK)
        return dpc_errf(e, DPC_EUSAGE, "tensor '%s': invalid dtype or rank", q);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0 || (uint64_t)t->shape[i] > DPC_ST_MAX_INT)
            return dpc_errf(e, DPC_EUSAGE, "tensor '%s': dimension %lld is out of range", q, (long long)t->shape[i]);
    uint64_t bytes;
    if (!tensor_bytes(t->dtype, t->rank, t->shape, &bytes) || bytes != t->nbytes)
        return dpc_errf(e, DPC_EUSAGE, "tensor '%s': holds %zu bytes, which does not match its dtype and shape", q,
                        t->nbytes);
    if (t->nbytes && !t->data)
        return dpc_errf(e, DPC_EUSAGE, "tensor '%s' has no data", q);
    size_t i;
    if (t->dtype == DPC_BOOL && t->nbytes && !dpc_bool_valid(t->data, t->nbytes, &i))
        return dpc_errf(e, DPC_EUSAGE, "tensor '%s': bool byte 0x%02x at element %zu (only 0 and 1 are valid)", q,
                        ((const unsigned char *)t->data)[i], i);
    return DPC_OK;
}

/* A tensor to write, with the offset the layout gives it. The writer sorts
 * arrays of pointers to these (qsort has no context argument in C11). */
typedef struct out_item {
    const dpc_st_tensor *t;
    uint64_t begin;
} out_item;

static int cmp_item_name(const void *a, const void *b) {
    return strcmp((*(const out_item *const *)a)->t->name, (*(const out_item *const *)b)->t->name);
}
static int cmp_item_layout(const void *a, const void *b) {
    const dpc_st_tensor *x = (*(const out_item *const *)a)->t, *y = (*(const out_item *const *)b)->t;
    size_t sx = dpc_dtype_size(x->dtype), sy = dpc_dtype_size(y->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct meta_pair {
    const char *k, *v;
} meta_pair;

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const meta_pair *)a)->k, ((const meta_pair *)b)->k);
}

/* Metadata pairs sorted by key, checked for UTF-8 and unique keys. */
static dpc_status plan_meta(const char *const *mk, const char *const *mv, size_t nmeta, meta_pair *m, dpc_err *e) {
    for (size_t i = 0; i < nmeta; i++) {
        if (!mk[i] || !mv[i] || !dpc_utf8_valid(mk[i], strlen(mk[i]), NULL) ||
            !dpc_utf8_valid(mv[i], strlen(mv[i]), NULL))
            return dpc_errf(e, DPC_EUSAGE, "metadata entry %zu is missing or not valid UTF-8", i);
        m[i].k = mk[i];
        m[i].v = mv[i];
    }
    qsort(m, nmeta, sizeof *m, cmp_meta);
    for (size_t i = 1; i < nmeta; i++)
        if (!strcmp(m[i].k, m[i - 1].k)) {
            char q[80];
            qname(m[i].k, q);
            return dpc_errf(e, DPC_EUSAGE, "metadata key '%s' given twice", q);
        }
    return DPC_OK;
}

/* Validates the tensors, sorts them both ways and assigns offsets in
 * layout order. */
static dpc_status plan_tensors(const dpc_st_tensor *t, size_t n, out_item *items, out_item **by_name,
                               out_item **by_layout, dpc_err *e) {
    for (size_t i = 0; i < n; i++) {
        dpc_status s = check_out_tensor(&t[i], e);
        if (s)
            return s;
        items[i].t = &t[i];
        by_name[i] = by_layout[i] = &items[i];
    }
    qsort(by_name, n, sizeof *by_name, cmp_item_name);
    qsort(by_layout, n, sizeof *by_layout, cmp_item_layout);
    for (size_t k = 1; k < n; k++)
        if (!strcmp(by_name[k]->t->name, by_name[k - 1]->t->name)) {
            char q[80];
            qname(by_name[k]->t->name, q);
            return dpc_errf(e, DPC_EUSAGE, "tensor name '%s' given twice", q);
        }
    uint64_t at = 0;
    for (size_t k = 0; k < n; k++) {
        by_layout[k]->begin = at;
        if (__builtin_add_overflow(at, (uint64_t)by_layout[k]->t->nbytes, &at) || at > DPC_ST_MAX_INT)
            return dpc_errf(e, DPC_EUSAGE, "tensors too large for one safetensors file");
    }
    return DPC_OK;
}

/* Short escapes where JSON has them (as serde_json writes), \u00XX for the
 * other control characters, UTF-8 as is. */
static void put_json_string(dpc_buf *b, const char *s) {
    dpc_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc = c == '"' ? '"' : c == '\\' ? '\\' : c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n'
                 : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
        if (esc)
            dpc_buf_printf(b, "\\%c", esc);
        else if (c < 0x20)
            dpc_buf_printf(b, "\\u%04x", c);
        else
            dpc_buf_put(b, s, 1);
    }
    dpc_buf_put(b, "\"", 1);
}

/* The header text: metadata, then tensors by name, padded to 8 bytes. */
static void put_header(dpc_buf *h, out_item *const *by_name, size_t n, const meta_pair *m, size_t nmeta) {
    dpc_buf_puts(h, "{");
    if (nmeta) {
        dpc_buf_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; i < nmeta; i++) {
            dpc_buf_puts(h, i ? "," : "");
            put_json_string(h, m[i].k);
            dpc_buf_puts(h, ":");
            put_json_string(h, m[i].v);
        }
        dpc_buf_puts(h, n ? "}," : "}");
    }
    for (size_t k = 0; k < n; k++) {
        const dpc_st_tensor *x = by_name[k]->t;
        dpc_buf_puts(h, k ? "," : "");
        put_json_string(h, x->name);
        dpc_buf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_code(x->dtype));
        for (int i = 0; i < x->rank; i++)
            dpc_buf_printf(h, "%s%lld", i ? "," : "", (long long)x->shape[i]);
        dpc_buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)by_name[k]->begin,
                       (unsigned long long)(by_name[k]->begin + x->nbytes));
    }
    dpc_buf_puts(h, "}");
    while (h->len % 8)
        dpc_buf_put(h, " ", 1);
}

static void put_file(dpc_buf *out, const dpc_buf *h, out_item *const *by_layout, size_t n) {
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h->len >> (8 * i));
    dpc_buf_put(out, len8, 8);
    dpc_buf_put(out, h->data, h->len);
    for (size_t k = 0; k < n; k++)
        if (by_layout[k]->t->nbytes) /* an empty tensor's data may be NULL */
            dpc_buf_put(out, by_layout[k]->t->data, by_layout[k]->t->nbytes);
}

dpc_status dpc_st_serialize(const dpc_st_tensor *t, size_t n, const char *const *meta_keys,
                            const char *const *meta_vals, size_t nmeta, dpc_buf *out, dpc_err *e) {
    dpc_buf_init(out);
    out_item *items = dpc_calloc(n ? n : 1, sizeof *items);
    out_item **by_name = dpc_calloc(n ? n : 1, sizeof *by_name);
    out_item **by_layout = dpc_calloc(n ? n : 1, sizeof *by_layout);
    meta_pair *m = dpc_calloc(nmeta ? nmeta : 1, sizeof *m);
    dpc_buf h;
    dpc_buf_init(&h);
    dpc_status s;
    if (!items || !by_name || !by_layout || !m)
        s = dpc_errf(e, DPC_ENOMEM, "out of memory writing safetensors");
    else if (!(s = plan_meta(meta_keys, meta_vals, nmeta, m, e)) &&
             !(s = plan_tensors(t, n, items, by_name, by_layout, e))) {
        put_header(&h, by_name, n, m, nmeta);
        put_file(out, &h, by_layout, n);
        if (h.oom || out->oom)
            s = dpc_errf(e, DPC_ENOMEM, "out of memory writing safetensors");
    }
    dpc_buf_free(&h);
    dpc_free(items);
    dpc_free(by_name);
    dpc_free(by_layout);
    dpc_free(m);
    if (s)
        dpc_buf_free(out);
    return s;
}

dpc_status dpc_st_write(const char *path, const dpc_st_tensor *t, size_t n, const char *const *mk,
                        const char *const *mv, size_t nmeta, dpc_err *e) {
    dpc_buf b;
    dpc_status s = dpc_st_serialize(t, n, mk, mv, nmeta, &b, e);
    return dpc_write_image(path, &b, s, e);
}
