/* dp.y - the .dp grammar (see docs/language.md).
 *
 * A pure, location-tracking LALR(1) parser with detailed error messages and
 * LAC, so "expecting ..." lists only tokens that can really follow. Errors
 * recover at the next statement separator, so one run reports every
 * independent syntax error. The actions only build the AST (ast.c); meaning
 * is given later by sema.c and irbuild.c. */
%define api.pure full
%define api.prefix {dp}
%define parse.error custom
%define parse.lac full
%locations
%lex-param {void *scanner}
%parse-param {void *scanner} {parser_state *ps}

%code requires {
#include "parser_state.h"
}

%code provides {
int dplex(DPSTYPE *yylval, DPLTYPE *yylloc, void *scanner);
}

%code {
#include <stdio.h>
#include <string.h>
static void dperror(DPLTYPE *l, void *scanner, parser_state *ps, const char *msg);
#define L(at) ps_loc(ps, (at).first_line, (at).first_column)
/* The right-hand side of an assignment: one expression, or a tuple. */
static node *rhs_value(parser_state *ps, vec v) {
    if (v.len == 0)
        return ast_node(ps, ND_NONE, ps_loc(ps, 0, 0));
    for (int i = 0; i < v.len; i++)
        ps_expr(ps, v.items[i]);
    if (v.len == 1)
        return v.items[0];
    return ast_seq(ps, ND_TUPLE, v, ((node *)v.items[0])->at);
}
/* NULL items come from error recovery and are dropped. */
static vec vadd(parser_state *ps, vec v, void *x) { if (x) vec_push(&ps->c->arena, &v, x); return v; }
static vec vec1(parser_state *ps, void *x) { return vadd(ps, (vec){0}, x); }
}

%union {
    int64_t ival;
    double fval;
    const char *str;
    node *nd;
    arg *ag;
    stmt *st;
    param *pm;
    member *mb;
    module_def *md;
    vec v;
    void *ptr;
}

%token <str> IDENT "identifier"
%token <str> STRING "string"
%token <str> FSTRING "f-string"
%token <ival> INT "integer"
%token <fval> FLOAT "number"
%token NL "newline"
%token MODULE "module" FORWARD "forward" IMPORT "import" RETURN "return"
%token FOR "for" IN "in" TRUE "True" FALSE "False" NONE "None"
%token FLOORDIV "//" POW "**"
%token IF "if" ELIF "elif" ELSE "else" AND "and" OR "or" NOT "not" IS "is" ISNOT "is not"
%token EXTENDS "extends" ELLIPSIS "..." EQ "==" NE "!=" LE "<=" GE ">="
%right IF ELSE
%left OR
%left AND
%precedence NOT
%nonassoc EQ NE '<' '>' LE GE IS ISNOT
%left '|'
%left '&'
%left '+' '-'
%left '*' '/' FLOORDIV '@' '%'
%precedence UMINUS
%right POW

%type <nd> expr postfix primary subscript expr_opt
%type <v> ctor_params exprs args arglist stmt_list params param_list dims targets body_items block
%type <v> subscripts else_part body_block body_else dict_items
%type <str> extends_opt
%type <ag> arg
%type <st> stmt
%type <pm> param
%type <md> module_def
%type <mb> body_item

%%

program
    : seps_opt
    | seps_opt top_items seps_opt
    ;

top_items
    : top_item
    | top_items seps top_item
    ;

top_item
    : IMPORT STRING {
        ps->opnest = 0;
        if ($2 == dp_bad_string)
            ; /* unterminated: already reported */
        else if ($2[0] == 0)
            error_at(ps->c, L(@2), "empty import path");
        else {
            import_decl *d = arena_alloc(&ps->c->arena, sizeof *d);
            d->path = $2; d->at = L(@2);
            vec_push(&ps->c->arena, &ps->imports, d);
        }
      }
    | module_def { ps->opnest = 0; vec_push(&ps->c->arena, &ps->modules, $1); }
    | IDENT '=' expr {
        ps->opnest = 0;
        ps_expr(ps, $3);
        if (strcmp($1, "model") != 0)
            error_at(ps->c, L(@1), "only 'model = ...' may be assigned at the top level, not '%s'", $1);
        else {
            ps->model = $3; ps->model_at = L(@1); ps->nmodel++;
            if (ps->nmodel > 1)
                error_at(ps->c, L(@1), "the model is named twice");
        }
      }
    | error { ps->opnest = 0; }
    ;

seps : sep | seps sep ;
seps_opt : %empty | seps ;
sep : NL | ';' ;

module_def
    : MODULE IDENT ctor_params extends_opt '{' seps_opt body_items seps_opt '}' {
        $$ = ps_module(ps, $2, L(@2), $3, $4, L(@4), &$7);
      }
    | MODULE IDENT ctor_params extends_opt '{' seps_opt '}' {
        $$ = ps_module(ps, $2, L(@2), $3, $4, L(@4), NULL);
      }
    ;
extends_opt
    : %empty { $$ = NULL; }
    | EXTENDS IDENT { $$ = $2; }
    ;
ctor_params
    : %empty { $$ = (vec){0}; }
    | '(' params ')' { $$ = $2; ps_check_params(ps, &$$); }
    ;

body_items
    : body_item { $$ = vec1(ps, $1); }
    | body_items seps body_item { $$ = vadd(ps, $1, $3); }
    ;

body_item
    : IDENT '=' expr {
        ps->opnest = 0;
        ps_expr(ps, $3);
        $$ = ps_member(ps, MB_ASSIGN, $1, L(@1), $3);
      }
    | expr {
        /* a bare module: the next numbered entry of a Sequential subclass */
        ps->opnest = 0;
        ps_expr(ps, $1);
        $$ = ps_member(ps, MB_ENTRY, NULL, $1->at, $1);
      }
    | IF expr body_block body_else {
        ps->opnest = 0;
        ps_expr(ps, $2);
        $$ = ps_member(ps, MB_IF, NULL, L(@1), $2);
        $$->then_items = $3; $$->else_items = $4;
      }
    | FORWARD '(' params ')' block {
        module_def *f = arena_alloc(&ps->c->arena, sizeof *f);
        f->forward_at = L(@1); f->fparams = $3; f->body = $5;
        ps_check_params(ps, &f->fparams);
        $$ = ps_member(ps, MB_FORWARD, NULL, L(@1), NULL);
        $$->forward = f;
      }
    | error { ps->opnest = 0; $$ = NULL; }
    ;
body_block
    : '{' seps_opt body_items seps_opt '}' { $$ = $3; }
    | '{' seps_opt '}' { $$ = (vec){0}; }
    ;
body_else
    : %empty { $$ = (vec){0}; }
    | ELSE body_block { $$ = $2; }
    | ELIF expr body_block body_else {
        ps->opnest = 0;
        ps_expr(ps, $2);
        member *m = ps_member(ps, MB_IF, NULL, L(@1), $2);
        m->then_items = $3; m->else_items = $4;
        $$ = vec1(ps, m);
      }
    ;
params
    : %empty { $$ = (vec){0}; }
    | param_list
    | param_list ',' { $$ = $1; }
    ;

param_list
    : param { $$ = vec1(ps, $1); }
    | param_list ',' param { $$ = vadd(ps, $1, $3); }
    ;

param
    : IDENT ':' IDENT {
        $$ = ps_param(ps, $1, L(@1), $3, L(@3), NULL, NULL);
      }
    | IDENT ':' IDENT '=' expr {
        ps->opnest = 0;
        $$ = ps_param(ps, $1, L(@1), $3, L(@3), NULL, ps_expr(ps, $5));
      }
    | IDENT ':' '[' dims ']' {
        $$ = ps_param(ps, $1, L(@1), NULL, L(@3), &$4, NULL);
      }
    | IDENT ':' IDENT '[' dims ']' {
        $$ = ps_param(ps, $1, L(@1), $3, L(@3), &$5, NULL);
      }
    /* a tensor cannot have a default: parsed, so that the error says so */
    | IDENT ':' '[' dims ']' '=' expr {
        ps->opnest = 0;
        $$ = ps_param(ps, $1, L(@1), NULL, L(@3), &$4, ps_expr(ps, $7));
      }
    | IDENT ':' IDENT '[' dims ']' '=' expr {
        ps->opnest = 0;
        $$ = ps_param(ps, $1, L(@1), $3, L(@3), &$5, ps_expr(ps, $8));
      }
    | IDENT {
        error_at(ps->c, L(@1), "parameter '%s' needs a type (for example '%s: int' or '%s: [N, 10]')", $1, $1, $1);
        $$ = ps_param(ps, $1, L(@1), "int", L(@1), NULL, NULL);
      }
    ;

dims
    : exprs {
        ps->opnest = 0;
        for (int i = 0; i < $1.len; i++)
            ps_expr(ps, $1.items[i]);
        $$ = $1;
      }
    ;

block
    : '{' seps_opt stmt_list seps_opt '}' { $$ = $3; }
    | '{' seps_opt '}' { $$ = (vec){0}; }
    ;

stmt_list
    : stmt { $$ = vec1(ps, $1); }
    | stmt_list seps stmt { $$ = vadd(ps, $1, $3); }
    ;

stmt
    : IDENT '=' exprs {
        ps->opnest = 0;
        $$ = ps_stmt(ps, ST_ASSIGN, L(@1));
        vec_push(&ps->c->arena, &$$->targets, (void *)$1);
        vec_push(&ps->c->arena, &$$->values, rhs_value(ps, $3));
      }
    | targets '=' exprs {
        ps->opnest = 0;
        $$ = ps_stmt(ps, ST_ASSIGN, L(@1));
        $$->targets = $1;
        vec_push(&ps->c->arena, &$$->values, rhs_value(ps, $3));
      }
    | RETURN exprs {
        ps->opnest = 0;
        $$ = ps_stmt(ps, ST_RETURN, L(@1));
        for (int i = 0; i < $2.len; i++)
            ps_expr(ps, $2.items[i]);
        $$->values = $2;
      }
    | FOR IDENT IN expr {
        ps->opnest = 0;
        ps_expr(ps, $4);
      } block {
        $$ = ps_stmt(ps, ST_FOR, L(@1));
        vec_push(&ps->c->arena, &$$->targets, (void *)$2);
        vec_push(&ps->c->arena, &$$->values, $4);
        $$->body = $6;
      }
    | IF expr {
        ps->opnest = 0;
        ps_expr(ps, $2);
      } block else_part {
        $$ = ps_stmt(ps, ST_IF, L(@1));
        vec_push(&ps->c->arena, &$$->values, $2);
        $$->body = $4;
        $$->orelse = $5;
      }
    | error { ps->opnest = 0; $$ = NULL; }
    ;

else_part
    : %empty { $$ = (vec){0}; }
    | ELSE block { $$ = $2; }
    | ELIF expr {
        ps->opnest = 0;
        ps_expr(ps, $2);
      } block else_part {
        stmt *st = ps_stmt(ps, ST_IF, L(@1));
        vec_push(&ps->c->arena, &st->values, $2);
        st->body = $4;
        st->orelse = $5;
        $$ = vec1(ps, st);
      }
    ;

targets
    : IDENT ',' IDENT {
        $$ = vec1(ps, (void *)$1);
        $$ = vadd(ps, $$, (void *)$3);
      }
    | targets ',' IDENT { $$ = vadd(ps, $1, (void *)$3); }
    ;

exprs
    : expr { $$ = vec1(ps, $1); }
    | exprs ',' expr { $$ = vadd(ps, $1, $3); }
    ;

expr
    : postfix
    | expr '+' expr { $$ = ast_binop(ps, '+', $1, $3, L(@2)); }
    | expr '-' expr { $$ = ast_binop(ps, '-', $1, $3, L(@2)); }
    | expr '*' expr { $$ = ast_binop(ps, '*', $1, $3, L(@2)); }
    | expr '/' expr { $$ = ast_binop(ps, '/', $1, $3, L(@2)); }
    | expr '%' expr { $$ = ast_binop(ps, '%', $1, $3, L(@2)); }
    | expr '@' expr { $$ = ast_binop(ps, '@', $1, $3, L(@2)); }
    | expr FLOORDIV expr { $$ = ast_binop(ps, 'f', $1, $3, L(@2)); }
    | expr EQ expr { $$ = ast_binop(ps, OP_EQ, $1, $3, L(@2)); }
    | expr NE expr { $$ = ast_binop(ps, OP_NE, $1, $3, L(@2)); }
    | expr '<' expr { $$ = ast_binop(ps, OP_LT, $1, $3, L(@2)); }
    | expr '>' expr { $$ = ast_binop(ps, OP_GT, $1, $3, L(@2)); }
    | expr LE expr { $$ = ast_binop(ps, OP_LE, $1, $3, L(@2)); }
    | expr GE expr { $$ = ast_binop(ps, OP_GE, $1, $3, L(@2)); }
    | expr IS expr { $$ = ast_binop(ps, OP_IS, $1, $3, L(@2)); }
    | expr ISNOT expr { $$ = ast_binop(ps, OP_ISNOT, $1, $3, L(@2)); }
    | expr AND expr { $$ = ast_binop(ps, OP_AND, $1, $3, L(@2)); }
    | expr OR expr { $$ = ast_binop(ps, OP_OR, $1, $3, L(@2)); }
    | expr '&' expr { $$ = ast_binop(ps, OP_BITAND, $1, $3, L(@2)); }
    | expr '|' expr { $$ = ast_binop(ps, OP_BITOR, $1, $3, L(@2)); }
    | '~' operator_open expr %prec UMINUS { $$ = ast_not(ps, $3, L(@1)); $$->op = OP_INVERT; ps->opnest--; }
    | NOT operator_open expr { $$ = ast_not(ps, $3, L(@1)); ps->opnest--; }
    | expr IF expr ELSE expr { $$ = ast_cond(ps, $3, $1, $5, L(@2)); }
    /* these three nest without brackets: operator_open counts them */
    | expr POW operator_open expr { $$ = ast_binop(ps, 'p', $1, $4, L(@2)); ps->opnest--; }
    | '-' operator_open expr %prec UMINUS { $$ = ast_unary(ps, $3, L(@1)); ps->opnest--; }
    | '+' operator_open expr %prec UMINUS { $$ = $3; ps->opnest--; }
    ;

operator_open
    : %empty { ps_open_operator(ps, L(@0)); }
    ;

postfix
    : primary
    | postfix '(' args ')' { $$ = ast_call(ps, $1, $3, L(@1)); }
    | postfix '[' subscripts ']' { $$ = ast_subscript(ps, $1, $3, L(@2)); }
    | postfix '.' IDENT { $$ = ast_attr(ps, $1, $3, L(@3)); }
    ;

primary
    : INT { $$ = ast_node(ps, ND_INT, L(@1)); $$->ival = $1; }
    | FLOAT { $$ = ast_node(ps, ND_FLOAT, L(@1)); $$->fval = $1; }
    | STRING { $$ = ast_node(ps, ND_STR, L(@1)); $$->str = $1; }
    | FSTRING { $$ = ast_node(ps, ND_FSTR, L(@1)); $$->str = $1; }
    | '{' dict_items '}' { $$ = ast_seq(ps, ND_DICT, $2, L(@1)); }
    | '{' dict_items ',' '}' { $$ = ast_seq(ps, ND_DICT, $2, L(@1)); }
    | '{' expr ':' expr FOR IDENT IN expr '}' { $$ = ast_dictcomp(ps, $2, $4, $6, $8, L(@1)); }
    | TRUE { $$ = ast_node(ps, ND_BOOL, L(@1)); $$->ival = 1; }
    | FALSE { $$ = ast_node(ps, ND_BOOL, L(@1)); $$->ival = 0; }
    | NONE { $$ = ast_node(ps, ND_NONE, L(@1)); }
    | IDENT { $$ = ast_node(ps, ND_NAME, L(@1)); $$->str = $1; }
    | '(' expr ')' { $$ = $2; }
    | '(' expr ',' ')' { $$ = ast_seq(ps, ND_TUPLE, vec1(ps, $2), L(@1)); }
    | '(' expr ',' exprs ')' {
        vec v = vec1(ps, $2);
        for (int i = 0; i < $4.len; i++) v = vadd(ps, v, $4.items[i]);
        $$ = ast_seq(ps, ND_TUPLE, v, L(@1));
      }
    | '(' expr ',' exprs ',' ')' {
        vec v = vec1(ps, $2);
        for (int i = 0; i < $4.len; i++) v = vadd(ps, v, $4.items[i]);
        $$ = ast_seq(ps, ND_TUPLE, v, L(@1));
      }
    | '[' ']' { $$ = ast_seq(ps, ND_LIST, (vec){0}, L(@1)); }
    | '[' exprs ']' { $$ = ast_seq(ps, ND_LIST, $2, L(@1)); }
    | '[' exprs ',' ']' { $$ = ast_seq(ps, ND_LIST, $2, L(@1)); }
    | '[' expr FOR IDENT IN expr ']' { $$ = ast_listcomp(ps, $2, $4, $6, L(@1)); }
    ;

dict_items
    : expr ':' expr { $$ = vec1(ps, $1); $$ = vadd(ps, $$, $3); }
    | dict_items ',' expr ':' expr { $$ = vadd(ps, $1, $3); $$ = vadd(ps, $$, $5); }
    ;

subscripts
    : subscript { $$ = vec1(ps, $1); }
    | subscripts ',' subscript { $$ = vadd(ps, $1, $3); }
    ;
subscript
    : expr
    | ELLIPSIS { $$ = ast_node(ps, ND_ELLIPSIS, L(@1)); }
    | expr_opt ':' expr_opt { $$ = ast_slice(ps, $1, $3, NULL, L(@2)); }
    | expr_opt ':' expr_opt ':' expr_opt { $$ = ast_slice(ps, $1, $3, $5, L(@2)); }
    ;
expr_opt
    : %empty { $$ = NULL; }
    | expr
    ;
args
    : %empty { $$ = (vec){0}; }
    | arglist
    | arglist ',' { $$ = $1; }
    ;

arglist
    : arg { $$ = vec1(ps, $1); }
    | arglist ',' arg { $$ = vadd(ps, $1, $3); }
    ;

arg
    : expr { $$ = ast_arg(ps, NULL, $1, $1->at); }
    | IDENT '=' expr { $$ = ast_arg(ps, $1, $3, L(@1)); }
    | '*' expr { $$ = ast_arg(ps, dp_splat, $2, L(@1)); }
    ;

%%

/* "unexpected X, expecting A, B or C", listing at most seven alternatives;
 * past that a summary reads better than a wall of tokens. If the error sits
 * on a later line than a still-open '(' or '[', the real mistake is most
 * likely that bracket, so a note points at it. */
static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, parser_state *ps) {
    (void)scanner;
    if (ps->too_deep)
        return 0;
    const DPLTYPE *l = yypcontext_location(ctx);
    if (l->first_line == ps->unterminated_line)
        return 0; /* the unterminated string said it all */
    enum { MAXEXP = 64 };
    yysymbol_kind_t exp[MAXEXP];
    int n = yypcontext_expected_tokens(ctx, exp, MAXEXP);
    yysymbol_kind_t got = yypcontext_token(ctx);
    /* a newline the scanner made up before a keyword: name the keyword */
    bool resync = got == YYSYMBOL_NL && ps->resync_nl;
    /* operators are summarised as "an operator", operands as "an expression" */
    const char *names[MAXEXP];
    int k = 0;
    bool op = false, operand = false;
    /* after an operand, `if` is the conditional expression's (an operator);
     * elsewhere it starts a statement */
    bool after_operand = false;
    for (int i = 0; i < n; i++) {
        operand |= exp[i] == YYSYMBOL_INT;
        after_operand |= exp[i] == YYSYMBOL_FLOORDIV;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = yysymbol_name(exp[i]);
        bool binary_only = strcmp(nm, "'*'") == 0 || strcmp(nm, "'/'") == 0 || strcmp(nm, "'%'") == 0 ||
                           strcmp(nm, "'@'") == 0 || strcmp(nm, "//") == 0 || strcmp(nm, "**") == 0 ||
                           exp[i] == YYSYMBOL_EQ || exp[i] == YYSYMBOL_NE || exp[i] == YYSYMBOL_LE ||
                           exp[i] == YYSYMBOL_GE || strcmp(nm, "'<'") == 0 || strcmp(nm, "'>'") == 0 ||
                           exp[i] == YYSYMBOL_IS || exp[i] == YYSYMBOL_ISNOT || exp[i] == YYSYMBOL_AND ||
                           exp[i] == YYSYMBOL_OR || strcmp(nm, "'.'") == 0 || strcmp(nm, "'&'") == 0 ||
                           strcmp(nm, "'|'") == 0 ||
                           (exp[i] == YYSYMBOL_IF && after_operand);
        bool either = strcmp(nm, "'+'") == 0 || strcmp(nm, "'-'") == 0 || strcmp(nm, "'('") == 0 ||
                      strcmp(nm, "'['") == 0;
        bool literal = exp[i] == YYSYMBOL_INT || exp[i] == YYSYMBOL_FLOAT || exp[i] == YYSYMBOL_STRING ||
                       exp[i] == YYSYMBOL_TRUE || exp[i] == YYSYMBOL_FALSE || exp[i] == YYSYMBOL_NONE ||
                       exp[i] == YYSYMBOL_NOT || exp[i] == YYSYMBOL_FSTRING || strcmp(nm, "'{'") == 0 ||
                       strcmp(nm, "'~'") == 0;
        if (binary_only)
            op = true;
        else if (either)
            op |= !operand;
        else if (!literal || !operand)
            names[k++] = nm;
    }
    if (operand)
        names[k++] = "an expression";
    if (op)
        names[k++] = "an operator";
    char msg[512];
    int len = snprintf(msg, sizeof msg, "syntax error, unexpected %s",
                       resync ? ps->resync_kw : got == YYSYMBOL_YYEMPTY ? "token" : yysymbol_name(got));
    if (k > 0 && k <= 7) {
        len += snprintf(msg + len, sizeof msg - (size_t)len, ", expecting ");
        for (int i = 0; i < k && len < (int)sizeof msg; i++)
            len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s",
                            i == 0 ? "" : i == k - 1 ? " or " : ", ", names[i]);
    }
    error_at(ps->c, L(*l), "%s", msg);
    /* a comparison where an operator could follow: the one before it is a
     * comparison too (they are non-associative) */
    bool cmp_got = !resync && (got == YYSYMBOL_EQ || got == YYSYMBOL_NE || got == YYSYMBOL_LE || got == YYSYMBOL_GE ||
                               got == YYSYMBOL_IS || got == YYSYMBOL_ISNOT ||
                               (got != YYSYMBOL_YYEMPTY && (strcmp(yysymbol_name(got), "'<'") == 0 ||
                                                            strcmp(yysymbol_name(got), "'>'") == 0)));
    if (cmp_got && op)
        note_at(ps->c, L(*l), "comparisons do not chain: write 'a < b and b < c'");
    if (resync && ps->resync_open_line > 0 && ps->resync_open_line < l->first_line)
        note_at(ps->c, ps_loc(ps, ps->resync_open_line, ps->resync_open_col), "'%c' opened here was never closed",
                ps->resync_open_char);
    else if (ps->paren > 0 && ps->open_line > 0 && ps->open_line < l->first_line)
        note_at(ps->c, ps_loc(ps, ps->open_line, ps->open_col), "'%c' opened here was never closed",
                ps->open_char);
    return 0;
}

static void dperror(DPLTYPE *l, void *scanner, parser_state *ps, const char *msg) {
    (void)scanner;
    if (ps->too_deep)
        return; /* the scanner already said why it stopped */
    if (strcmp(msg, "memory exhausted") == 0) {
        error_at(ps->c, L(*l), "expression nested too deeply (limit %d)", ps->c->max_depth);
        return;
    }
    error_at(ps->c, L(*l), "%s", msg);
}
