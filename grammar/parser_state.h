/* parser_state.h - what the flex scanner and the bison parser share while
 * reading one file: the compilation context, the file, bracket depth (a
 * newline inside () or [] does not end a statement) and what was parsed. */
#ifndef DPC_PARSER_STATE_H
#define DPC_PARSER_STATE_H

#include "compiler.h"

typedef struct import_decl {
    const char *path;
    loc at;
} import_decl;

typedef struct parser_state {
    dpc_ctx *c;
    const src_file *file;
    int line, col;  /* scanner position, 1-based */
    int paren;      /* depth of ( and [ : newlines inside are whitespace */
    int open_line, open_col; /* the outermost ( or [ still open */
    char open_char;
    int nest;       /* depth of all brackets, { included, for the nesting limit */
    int opnest;     /* unary +/- and ** still waiting for their operand: they
                     * nest without brackets, so they have their own count */
    bool too_deep;  /* the nesting limit was hit: the scanner stops */
    bool line_has_token, prev_has_token; /* a token before this one on its line? */
    char prev_tok, cur_tok;  /* first characters of the previous and this token */
    /* A newline the scanner made up because a line starts with a keyword
     * while a ( or [ is open (see dp.l): the syntax error it causes names the
     * keyword and points at the bracket. Valid until the next token. */
    bool resync_nl;
    const char *resync_kw;
    int resync_open_line, resync_open_col;
    char resync_open_char;
    int unterminated_line; /* line of the last unterminated string (its syntax errors are noise) */
    int errors_before;
    /* results */
    vec imports;    /* import_decl* */
    vec modules;    /* module_def* */
    node *model;
    loc model_at;
    int nmodel;     /* number of `model = ...` lines seen */
} parser_state;

/* flex reports a failed allocation through YY_FATAL_ERROR, which must not
 * exit: it jumps here (set to the arena's out-of-memory handler). */
extern _Thread_local jmp_buf *dp_lex_fatal;

loc ps_loc(parser_state *ps, int line, int col);

/* The value of an unterminated string: "" (compared by address). */
extern const char dp_bad_string[];

/* AST constructors (ast.c). Each records the subtree height (node.depth);
 * ps_expr, called on every complete expression, reports once per file an
 * expression that nests deeper than the limit. */
node *ast_node(parser_state *ps, node_kind k, loc at);
node *ast_binop(parser_state *ps, int op, node *l, node *r, loc at);
node *ast_unary(parser_state *ps, node *e, loc at);
node *ast_call(parser_state *ps, node *callee, vec args, loc at);
node *ast_index(parser_state *ps, node *base, node *idx, loc at);
/* base[items]: one plain index is an ND_INDEX, anything else an ND_SUBSCRIPT. */
node *ast_subscript(parser_state *ps, node *base, vec items, loc at);
node *ast_slice(parser_state *ps, node *start, node *stop, node *step, loc at);
/* base.name; torch., nn. and F. (and torch.nn.functional.) are namespace
 * prefixes and vanish: torch.flatten is flatten, nn.Conv2d is Conv2d. */
node *ast_attr(parser_state *ps, node *base, const char *name, loc at);
node *ast_not(parser_state *ps, node *e, loc at);
node *ast_cond(parser_state *ps, node *cond, node *then, node *otherwise, loc at);
node *ast_seq(parser_state *ps, node_kind k, vec items, loc at);
node *ast_listcomp(parser_state *ps, node *elem, const char *var, node *iter, loc at);
node *ast_dictcomp(parser_state *ps, node *key, node *value, const char *var, node *iter, loc at);
arg *ast_arg(parser_state *ps, const char *name, node *value, loc at);
node *ps_expr(parser_state *ps, node *e);
/* Counts a unary operator or ** waiting for its operand (at: the operator);
 * false once past the nesting limit, which stops the scan. */
void ps_open_operator(parser_state *ps, loc at);
/* Reports parameters declared twice in one list. */
void ps_check_params(parser_state *ps, const vec *params);
stmt *ps_stmt(parser_state *ps, stmt_kind k, loc at);
member *ps_member(parser_state *ps, member_kind k, const char *name, loc at, node *value);
/* A module definition from its body items (NULL: an empty body); the forward
 * is taken out of the items (a second one, or one inside an if, is an error). */
module_def *ps_module(parser_state *ps, const char *name, loc at, vec params, const char *base,
                      loc base_at, const vec *items);
/* A parameter `name: type`, `name: type = default`, `name: [dims]` or
 * `name: dtype[dims]`; dims == NULL for scalars. */
param *ps_param(parser_state *ps, const char *name, loc at, const char *type, loc type_at,
                const vec *dims, node *deflt);

#endif
