/* cmd_show.c - the verbs that show a model without running it: print (the
 * PyTorch repr), ir (the graph IR, parsed or fused), source (the generated
 * C or CUDA) and graph (Graphviz text, or SVG through `dot`). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int cmd_print(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "");
    dpc_unit *u;
    /* up to the IR, as `dpc ir`: a model whose forward does not compile is
     * an error here too, and nothing is printed */
    if (rc || (rc = cli_front(o.model, DPC_STAGE_IR, &u)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit_print(u, &out);
    dpc_unit_free(u);
    return cli_emit(&out);
}

int cmd_ir(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "sB");
    if (rc)
        return rc;
    bool fused = false;
    if (o.stage && strcmp(o.stage, "fused") == 0)
        fused = true;
    else if (o.stage && strcmp(o.stage, "parsed") != 0)
        return cli_usage("unknown stage '%s' (parsed or fused)", o.stage);
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit *u;
    if ((rc = cli_graph_unit(&o, fused ? DPC_STAGE_FUSED : DPC_STAGE_IR, &u)))
        return rc;
    dpc_unit_ir(u, fused, &out);
    dpc_unit_free(u);
    return cli_emit(&out);
}

int cmd_source(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "tDB");
    if (rc)
        return rc;
    const char *t = o.target ? o.target : "cpu";
    if (strcmp(t, "cpu") != 0 && strcmp(t, "cuda") != 0)
        return cli_usage("unknown target '%s' (cpu or cuda)", t);
    kprec prec;
    if ((rc = cli_dtype_opt(&o, &prec)))
        return rc;
    if (prec != KP_F32 && strcmp(t, "cuda") != 0)
        return cli_usage("--dtype %s applies to --target cuda (the CPU backend computes in f32)", o.dtype);
    dpc_unit *u;
    if ((rc = cli_graph_unit(&o, DPC_STAGE_FUSED, &u)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_unit_source(u, strcmp(t, "cpu") == 0 ? DPC_DIALECT_C : DPC_DIALECT_CUDA, prec, &out);
    dpc_unit_free(u);
    return cli_emit(&out);
}

/* Writes all of b to fd; false on an error. */
static bool write_all(int fd, const dpc_buf *b) {
    for (size_t off = 0; off < b->len;) {
        ssize_t w = write(fd, b->data + off, b->len - off);
        if (w < 0 && errno != EINTR)
            return false;
        off += w > 0 ? (size_t)w : 0;
    }
    return true;
}

/* Graphviz's `dot -Tsvg` on the text in dot: its standard output read into
 * svg, so that the SVG is written like every other output (no shell, no
 * temporary name next to the output). Its standard input is an anonymous
 * in-memory file holding the text: no name on disk that a signal could
 * leave behind, and no pipe to keep full while reading the other. Its
 * stderr is the user's. */
static dpc_status render_svg(const dpc_buf *dot, dpc_buf *svg, dpc_err *e) {
    int fd = memfd_create("dpc-graph", MFD_CLOEXEC), p[2] = {-1, -1};
    bool ok = fd >= 0 && write_all(fd, dot) && lseek(fd, 0, SEEK_SET) == 0;
    if (!ok || pipe2(p, O_CLOEXEC) != 0) {
        ok = false;
        dpc_errf(e, DPC_EIO, "cannot hold the graph for Graphviz: %s", strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[] = {"dot", "-Tsvg", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        ok = false;
        dpc_errf(e, DPC_EIO, "cannot run Graphviz 'dot' (is graphviz installed?): %s", strerror(rc));
        goto out;
    }
    char chunk[65536];
    for (ssize_t r; (r = read(p[0], chunk, sizeof chunk)) != 0;)
        if (r > 0)
            dpc_buf_put(svg, chunk, (size_t)r);
        else if (errno != EINTR)
            break;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && svg->len && !svg->oom;
    if (!ok)
        dpc_errf(e, DPC_EIO, "Graphviz 'dot' failed to render the graph%s", svg->oom ? ": out of memory" : "");
out:
    if (p[0] >= 0)
        close(p[0]);
    if (fd >= 0)
        close(fd);
    return ok ? DPC_OK : e->code;
}

int cmd_graph(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "oB");
    if (rc)
        return rc;
    if (o.nout > 1)
        return cli_usage("%s", "graph writes one file: give -o once");
    if ((rc = cli_check_outputs(&o, o.out, o.nout)))
        return rc;
    dpc_unit *u;
    if ((rc = cli_graph_unit(&o, DPC_STAGE_FUSED, &u)))
        return rc;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_dot(u, &b);
    dpc_unit_free(u);
    if (o.nout == 0)
        return cli_emit(&b);
    dpc_err e;
    const char *path = o.out[0];
    size_t len = strlen(path);
    dpc_status s = DPC_OK;
    if (len > 4 && strcmp(path + len - 4, ".svg") == 0) {
        dpc_buf svg;
        dpc_buf_init(&svg);
        s = render_svg(&b, &svg, &e);
        dpc_buf_free(&b);
        b = svg;
    }
    if (s == DPC_OK)
        s = dpc_write_file_atomic(path, b.data, b.len, &e);
    dpc_buf_free(&b);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}
