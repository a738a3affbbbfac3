/* replay.c - a plain main() for the fuzz targets: feeds every file named on
 * the command line, and every file inside each directory named, to
 * LLVMFuzzerTestOneInput, so that any compiler (gcc in CI) can replay the
 * seed corpus and past crashers as a regression test. Each input lives in
 * a buffer of exactly its size, so ASan sees any read past its end. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return 0; /* not a regular file: nothing to replay */
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        fprintf(stderr, "%s: read failed\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}


/* Replays a directory's files in name order, so runs are reproducible. */
static int run_dir(const char *dir) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) {
        perror(dir);
        return -1;
    }
    int count = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.') {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            int r = run_file(path);
            if (r < 0)
                bad = 1;
            else
                count += r;
        }
        free(list[i]);
    }
    free(list);
    return bad ? -1 : count;
}

int main(int argc, char **argv) {
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int r = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        if (r < 0)
            return 1;
        total += r;
    }
    printf("replayed %d inputs\n", total);
    /* An empty or missing corpus would make this test pass vacuously. */
    return total > 0 ? 0 : 1;
}
