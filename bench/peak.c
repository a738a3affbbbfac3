/* peak.c - the measured FP32 FMA peak of one core and of all cores, and the
 * copy bandwidth: the hardware limits bench/zoo_bench.py reports against.
 *
 *     cc -O2 -std=c11 -pthread -o peak bench/peak.c && ./peak [--quick] [--isa NAME] [THREADS]
 *
 * Built without -march: the FMA loop is chosen at run time from what the
 * CPU says it has (__builtin_cpu_supports): AVX-512F (16 floats a vector)
 * where present, else AVX2+FMA (8 floats), else plain SSE multiply and add
 * (no FMA; reported as isa "sse2"), each compiled for its ISA with a target
 * attribute. The all-cores peak runs THREADS copies of the loop at once
 * (default: the CPUs this process may run on) and divides the FLOPs of all
 * by the slowest thread's time. --isa avx2+fma (or sse2) measures a
 * narrower loop than the widest this CPU has, to compare them (one the CPU
 * lacks is refused). --quick: fewer, shorter runs (the tests). Prints one
 * JSON object. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEAK_X86 1
#endif

#define CHAINS 12 /* independent accumulators: more than latency x FMA units on current cores */
static long iters = 20000000L; /* per run of the loop; --quick: a tenth */
static int reps = 5;            /* the best of (all cores: 3); --quick: 1 */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const char *isa;
    int floats;                       /* per vector */
    int flops_per_lane;               /* 2 for an FMA, 2 for a multiply and an add */
    float (*loop)(long iters, float seed);
} fma_kind;

/* Each loop: twelve accumulators in named registers (an array would be
 * kept in memory and make the loop latency-bound); the result is returned
 * so that the compiler cannot drop the work. */
#ifdef PEAK_X86
__attribute__((target("avx512f"))) static float loop_avx512(long iters, float seed) {
    __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f * seed);
    __m512 c0 = _mm512_set1_ps(1), c1 = _mm512_set1_ps(2), c2 = _mm512_set1_ps(3), c3 = _mm512_set1_ps(4);
    __m512 c4 = _mm512_set1_ps(5), c5 = _mm512_set1_ps(6), c6 = _mm512_set1_ps(7), c7 = _mm512_set1_ps(8);
    __m512 c8 = _mm512_set1_ps(9), c9 = _mm512_set1_ps(10), c10 = _mm512_set1_ps(11), c11 = _mm512_set1_ps(12);
    for (long i = 0; i < iters; i++) {
        c0 = _mm512_fmadd_ps(c0, a, b), c1 = _mm512_fmadd_ps(c1, a, b), c2 = _mm512_fmadd_ps(c2, a, b);
        c3 = _mm512_fmadd_ps(c3, a, b), c4 = _mm512_fmadd_ps(c4, a, b), c5 = _mm512_fmadd_ps(c5, a, b);
        c6 = _mm512_fmadd_ps(c6, a, b), c7 = _mm512_fmadd_ps(c7, a, b), c8 = _mm512_fmadd_ps(c8, a, b);
        c9 = _mm512_fmadd_ps(c9, a, b), c10 = _mm512_fmadd_ps(c10, a, b), c11 = _mm512_fmadd_ps(c11, a, b);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float loop_avx2(long iters, float seed) {
    __m256 a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f * seed);
    __m256 c0 = _mm256_set1_ps(1), c1 = _mm256_set1_ps(2), c2 = _mm256_set1_ps(3), c3 = _mm256_set1_ps(4);
    __m256 c4 = _mm256_set1_ps(5), c5 = _mm256_set1_ps(6), c6 = _mm256_set1_ps(7), c7 = _mm256_set1_ps(8);
    __m256 c8 = _mm256_set1_ps(9), c9 = _mm256_set1_ps(10), c10 = _mm256_set1_ps(11), c11 = _mm256_set1_ps(12);
    for (long i = 0; i < iters; i++) {
        c0 = _mm256_fmadd_ps(c0, a, b), c1 = _mm256_fmadd_ps(c1, a, b), c2 = _mm256_fmadd_ps(c2, a, b);
        c3 = _mm256_fmadd_ps(c3, a, b), c4 = _mm256_fmadd_ps(c4, a, b), c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b), c7 = _mm256_fmadd_ps(c7, a, b), c8 = _mm256_fmadd_ps(c8, a, b);
        c9 = _mm256_fmadd_ps(c9, a, b), c10 = _mm256_fmadd_ps(c10, a, b), c11 = _mm256_fmadd_ps(c11, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
#endif

/* Any CPU: GCC vector extensions of 4 floats, a multiply then an add. */
typedef float v4 __attribute__((vector_size(16)));
static float loop_generic(long iters, float seed) {
    v4 a = {1.0000001f, 1.0000001f, 1.0000001f, 1.0000001f}, b = a * (0.9999999f * seed);
    v4 c0 = a, c1 = a * 2, c2 = a * 3, c3 = a * 4, c4 = a * 5, c5 = a * 6;
    v4 c6 = a * 7, c7 = a * 8, c8 = a * 9, c9 = a * 10, c10 = a * 11, c11 = a * 12;
    for (long i = 0; i < iters; i++) {
        c0 = c0 * a + b, c1 = c1 * a + b, c2 = c2 * a + b, c3 = c3 * a + b;
        c4 = c4 * a + b, c5 = c5 * a + b, c6 = c6 * a + b, c7 = c7 * a + b;
        c8 = c8 * a + b, c9 = c9 * a + b, c10 = c10 * a + b, c11 = c11 * a + b;
    }
    v4 s = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
    return s[0] + s[1] + s[2] + s[3];
}

/* The widest loop the CPU runs, or the one named by want (NULL: widest);
 * .isa is NULL when want names one this CPU cannot run. */
static fma_kind pick(const char *want) {
    fma_kind k[3];
    int n = 0;
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        k[n++] = (fma_kind){"avx512f", 16, 2, loop_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        k[n++] = (fma_kind){"avx2+fma", 8, 2, loop_avx2};
    k[n++] = (fma_kind){"sse2", 4, 2, loop_generic};
#else
    k[n++] = (fma_kind){"generic", 4, 2, loop_generic};
#endif
    for (int i = 0; i < n; i++)
        if (!want || strcmp(want, k[i].isa) == 0)
            return k[i];
    return (fma_kind){NULL, 0, 0, NULL};
}

static fma_kind K;
static volatile float sink;

/* GFLOP/s of one run of the loop on this thread. */
static double one_run(long iters) {
    double t0 = now();
    sink = K.loop(iters, 1.0f);
    double t = now() - t0;
    return (double)iters * CHAINS * K.floats * K.flops_per_lane / t * 1e-9;
}

static double core_peak(void) {
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double gf = one_run(iters);
        if (gf > best)
            best = gf;
    }
    return best;
}

typedef struct {
    pthread_barrier_t *start;
    double t0, t1;
} worker;

static void *work(void *p) {
    worker *w = p;
    pthread_barrier_wait(w->start);
    w->t0 = now();
    sink = K.loop(iters, 1.0f);
    w->t1 = now();
    return NULL;
}

/* All n threads at once: total FLOPs over the time from the first start to
 * the last finish; the best of three runs. 0 if threads cannot be made. */
static double machine_peak(int n) {
    double best = 0;
    worker *w = calloc((size_t)n, sizeof *w);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (!w || !th) {
        free(w);
        free(th);
        return 0;
    }
    for (int rep = 0; rep < (reps < 3 ? reps : 3); rep++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)n);
        int made = 0;
        for (; made < n; made++) {
            w[made].start = &start;
            if (pthread_create(&th[made], NULL, work, &w[made]) != 0)
                break;
        }
        if (made < n) { /* cannot happen short of resource limits: report none */
            for (int i = 0; i < made; i++)
                pthread_cancel(th[i]);
            best = 0;
            break;
        }
        double first = 1e300, last = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(th[i], NULL);
            first = w[i].t0 < first ? w[i].t0 : first;
            last = w[i].t1 > last ? w[i].t1 : last;
        }
        pthread_barrier_destroy(&start);
        double gf = (double)n * (double)iters * CHAINS * K.floats * K.flops_per_lane / (last - first) * 1e-9;
        if (gf > best)
            best = gf;
    }
    free(w);
    free(th);
    return best;
}

static double copy_bw(void) {
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now();
        memcpy(b, a, n);
        double t = now() - t0;
        double gbs = 2.0 * (double)n / t * 1e-9; /* read + write */
        if (gbs > best)
            best = gbs;
    }
    free(a);
    free(b);
    return best;
}

static int cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int main(int argc, char **argv) {
    int n = cpus();
    const char *want = NULL;
    if (argc >= 2 && strcmp(argv[1], "--quick") == 0) {
        iters /= 10, reps = 1;
        argc--, argv++;
    }
    if (argc >= 3 && strcmp(argv[1], "--isa") == 0) {
        want = argv[2];
        argc -= 2, argv += 2;
    }
    char *end = NULL;
    if (argc > 2 || (argc == 2 && ((n = (int)strtol(argv[1], &end, 10)) < 1 || n > 4096 || *end))) {
        fprintf(stderr, "usage: peak [--quick] [--isa avx512f|avx2+fma|sse2] [THREADS]  (1 <= THREADS <= 4096; default: "
                        "the CPUs this process may use)\n");
        return 2;
    }
    K = pick(want);
    if (!K.isa) {
        fprintf(stderr, "peak: this CPU cannot run the %s loop\n", want);
        return 2;
    }
    double core = core_peak();
    double all = machine_peak(n);
    printf("{\"isa\": \"%s\", \"vector_bits\": %d, \"fma_gflops_per_core\": %.1f, \"threads\": %d, "
           "\"fma_gflops_all_cores\": %.1f, \"copy_gbytes_per_s\": %.1f}\n",
           K.isa, K.floats * 32, core, n, all, copy_bw());
    return 0;
}
