/* What zapping a 2 MiB block's host PTEs costs (uvm.unmap_us, uvm.unmap_per_page_us).
 *
 * madvise(MADV_DONTNEED) on a MAP_SHARED memfd mapping takes the zap path that
 * the UVM driver's unmap_mapping_range() takes, without freeing the pages.
 * With SPINNER=1 a second thread of the process spins on CPU 1 while CPU 0
 * unmaps, so the zap needs a TLB shootdown IPI (uvm.unmap_per_thread_us).
 * Same measurement as measure_host_unmap.py, without the interpreter's
 * per-call overhead.
 *
 *   cc -O2 -o /tmp/unmap scripts/measure_host_unmap.c -lpthread
 *   for s in 0 1; do for k in 0 1 64 512; do /tmp/unmap $s $k; done; done
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (2u << 20)
#define REPEATS 500

static volatile int stop;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *spin(void *arg) {
    (void)arg;
    pin(1);
    while (!stop) {
    }
    return 0;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SPINNER(0|1) PAGES(0..512)\n", argv[0]);
        return 2;
    }
    int spinner = atoi(argv[1]), pages = atoi(argv[2]);
    pin(0);
    pthread_t th;
    if (spinner) pthread_create(&th, 0, spin, 0);
    int fd = memfd_create("uvmsim-unmap", 0);
    if (fd < 0 || ftruncate(fd, BLOCK) != 0) return 1;
    static double t[REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        char *m = mmap(0, BLOCK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int step = pages ? 512 / pages : 0;
        for (int k = 0; k < pages; k++) m[(size_t)k * step * 4096] = 1; /* a write fault maps the page */
        double t0 = now_us();
        madvise(m, BLOCK, MADV_DONTNEED);
        t[i] = now_us() - t0;
        munmap(m, BLOCK);
    }
    qsort(t, REPEATS, sizeof t[0], cmp);
    printf("spinner=%d pages=%d median %.2f us p10 %.2f p90 %.2f\n", spinner, pages, t[REPEATS / 2], t[REPEATS / 10],
           t[REPEATS * 9 / 10]);
    stop = 1;
    if (spinner) pthread_join(th, 0);
    return 0;
}
