/* The four compute programs of `weir-bench interp` (the .s files beside this one) in C: the anchor a
 * C compiler sets for weir's proven JIT. weir-bench builds this file with clang at the
 * flags it names in its table, runs it on the bench's own buffer (read from argv[1]) and
 * checks each result against its own before using a time.
 *
 * Like with like: each call gets the buffer through an empty asm, so the compiler cannot
 * hoist the work out of the timing loop; stack-copy's buffer is passed to an empty asm
 * after each round, so its stores happen, as weir's must (the guest stack is memory a run
 * leaves behind, which an eBPF engine cannot drop). Without that barrier clang deletes the
 * copy and sums the source with SSE2, which measures nothing weir could do.
 *
 * usage: compute BUFFER_FILE ROUNDS  ->  one line per program: NAME RESULT NS_MEDIAN
 *        compute BUFFER_FILE serve   ->  one line per program: NAME RESULT; then, for each
 *            program NAME read from stdin (one a line), INNER untimed calls and INNER timed
 *            ones, and one line back: the timed calls' NS per call. weir-bench times its
 *            own row between two such samples, so both rows are sampled at the same
 *            moments of a shared, noisy machine, each sample after the other side ran.
 * built with -shared -fPIC, weir-bench loads it into its own process and calls
 * weir_compute_calls (below) for its interleaved goal rows: the C row and weir's rows take
 * turns on one thread, each turn timed by that thread's CPU time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEN 1500
#define INNER 200

__attribute__((noinline)) static uint64_t byte_sum(const uint8_t *p) {
    uint64_t sum = 0;
    for (int i = 0; i < LEN; i++) sum += p[i];
    return sum;
}

__attribute__((noinline)) static uint64_t inet_checksum(const uint8_t *p) {
    uint64_t sum = 0;
    for (int i = 0; i < LEN; i += 2) sum += (uint64_t)((p[i] << 8) | p[i + 1]);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return sum ^ 0xffff;
}

__attribute__((noinline)) static uint64_t fnv1a_hash(const uint8_t *p) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < LEN; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

__attribute__((noinline)) static uint64_t stack_copy(const uint8_t *p) {
    uint64_t buf[32];
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 32; i++) memcpy(&buf[i], p + 8 * i, 8);
        __asm__ volatile("" : : "r"(buf) : "memory");
    }
    uint64_t sum = 0;
    for (int i = 0; i < 32; i++) sum += buf[i];
    return sum;
}

/* The programs in the order of `weir-bench interp`'s PROGRAMS table. */
static const struct {
    const char *name;
    uint64_t (*fn)(const uint8_t *);
} programs[] = {
    {"byte-sum", byte_sum},
    {"inet-checksum", inet_checksum},
    {"fnv1a-hash", fnv1a_hash},
    {"stack-copy", stack_copy},
};
#define COUNT (sizeof programs / sizeof programs[0])

/* `calls` runs of program `k` on `p` (LEN + 8 readable bytes), each through the empty asm as
 * in the timed loops below; returns how many gave `expect` (weir-bench checks every turn's
 * count), or 0 for a `k` past the table. */
__attribute__((visibility("default"))) uint64_t weir_compute_calls(uint32_t k, const uint8_t *p,
                                                                   uint64_t calls, uint64_t expect) {
    if (k >= COUNT) return 0;
    uint64_t (*fn)(const uint8_t *) = programs[k].fn;
    uint64_t hits = 0;
    for (uint64_t i = 0; i < calls; i++) {
        __asm__ volatile("" : "+r"(p));
        hits += fn(p) == expect;
    }
    return hits;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BUFFER_FILE ROUNDS\n", argv[0]);
        return 2;
    }
    static uint8_t buf[LEN + 64];
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(buf, 1, LEN + 8, f) < LEN + 8) {
        fprintf(stderr, "%s: cannot read %d bytes\n", argv[1], LEN + 8);
        return 2;
    }
    fclose(f);
    int serve = strcmp(argv[2], "serve") == 0;
    int rounds = serve ? 1 : atoi(argv[2]);
    if (rounds < 1 || rounds > 100000) {
        fprintf(stderr, "ROUNDS must be 1..100000\n");
        return 2;
    }
    size_t count = COUNT;
    volatile uint64_t sink = 0;
    if (serve) {
        for (size_t k = 0; k < count; k++)
            printf("%s %llu\n", programs[k].name, (unsigned long long)programs[k].fn(buf));
        fflush(stdout);
        char line[64];
        while (fgets(line, sizeof line, stdin)) {
            line[strcspn(line, "\n")] = 0;
            size_t k = 0;
            while (k < count && strcmp(programs[k].name, line) != 0) k++;
            if (k == count) {
                fprintf(stderr, "no program %s\n", line);
                return 2;
            }
            const uint8_t *p = buf;
            for (int w = 0; w < INNER; w++) {
                __asm__ volatile("" : "+r"(p));
                sink += programs[k].fn(p);
            }
            double start = now_ns();
            for (int i = 0; i < INNER; i++) {
                __asm__ volatile("" : "+r"(p));
                sink += programs[k].fn(p);
            }
            printf("%.1f\n", (now_ns() - start) / INNER);
            fflush(stdout);
        }
        return 0;
    }
    double *samples = calloc((size_t)rounds, sizeof(double));
    if (!samples) return 2;
    for (size_t k = 0; k < count; k++) {
        const uint8_t *p = buf;
        uint64_t result = programs[k].fn(p);
        for (int w = 0; w < INNER; w++) {
            __asm__ volatile("" : "+r"(p));
            sink += programs[k].fn(p);
        }
        for (int r = 0; r < rounds; r++) {
            double start = now_ns();
            for (int i = 0; i < INNER; i++) {
                __asm__ volatile("" : "+r"(p));
                sink += programs[k].fn(p);
            }
            samples[r] = (now_ns() - start) / INNER;
        }
        qsort(samples, (size_t)rounds, sizeof(double), cmp);
        printf("%s %llu %.1f\n", programs[k].name, (unsigned long long)result, samples[rounds / 2]);
    }
    free(samples);
    (void)sink;
    return 0;
}
