/*  discover/nvtx_probe.c: akd-nvtx-probe, a program that speaks NVTX and
    never touches CUDA, for the tests of libakdiscover.so on hosts without
    a GPU (tests/integration/test_discover.c).

    usage: akd-nvtx-probe STEPS [ok|fail|crash|threads|cupti|bench]

    Each step is an outermost range "step" holding a PyTorch-shaped range
    (pushed with nvtxRangePushA) and a registered-string range of a domain
    (nvtxDomainRangePushEx).  `fail` exits 3 after the steps, `crash`
    aborts inside the last step, `threads` runs the steps on two threads.
    `cupti` plays cuInit: it calls $CUDA_INJECTION64_PATH's
    InitializeInjection, and in each step launches through the stand-in
    CUPTI (discover/testing/fake_cupti.c, on LD_LIBRARY_PATH): a 20 us
    kernel in the aten::mm range, a 3 us one in the registered range and a
    1 us one outside any range ($AKD_PROBE_AFTER_MS: one more launch that
    long after the steps, outside any range).  `bench` times STEPS pushes and pops of
    emit_nvtx-like texts (each one new, as emit_nvtx's seq and op_id make
    them) inside one "step" range and prints the mean host cost of a
    push + pop: the injection's hot path measured on a CPU (no CUDA). */
#include <dlfcn.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nvtx3/nvToolsExt.h>

static int s_steps;
static void (*s_launch) (uint32_t, const char *, uint64_t);
static uint32_t s_corr = 100;

static void s_kernel (const char *name, uint64_t ns)
{
    if (s_launch)
        s_launch (s_corr++, name, ns);
}

static int s_cuda_init (void)
{
    const char *lib = getenv ("CUDA_INJECTION64_PATH");
    void *h = lib ? dlopen (lib, RTLD_NOW) : NULL;
    int (*init) (void) = h ? (int (*) (void)) dlsym (h, "InitializeInjection") : NULL;
    if (!init || init () != 1) {
        fprintf (stderr, "akd-nvtx-probe: no InitializeInjection in %s\n", lib ? lib : "(CUDA_INJECTION64_PATH unset)");
        return -1;
    }
    void *c = dlopen ("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    s_launch = c ? (void (*) (uint32_t, const char *, uint64_t)) dlsym (c, "akd_fake_launch") : NULL;
    return 0;
}

static void *s_run (void *arg)
{
    const char *mode = arg;
    nvtxDomainHandle_t dom = nvtxDomainCreateA ("akd-probe");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA (dom, "registered range");
    for (int i = 0; i < s_steps; i++) {
        nvtxRangePushA ("step");
        char text[128];
        snprintf (text, sizeof text, "aten::mm, seq = %d, sizes = [[8, 16], [16, 32]], dtypes = [float32]", i);
        nvtxRangePushA (text);
        s_kernel ("gemm_kernel", 20000);
        nvtxRangePop ();
        nvtxEventAttributes_t a;
        memset (&a, 0, sizeof a);
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = reg;
        nvtxDomainRangePushEx (dom, &a);
        s_kernel ("other_kernel", 3000);
        nvtxDomainRangePop (dom);
        if (strcmp (mode, "crash") == 0 && i == s_steps - 1)
            abort ();
        nvtxRangePop ();
        s_kernel ("loose_kernel", 1000);
    }
    return NULL;
}

static double s_secs (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static int s_bench (int n)
{
    char text[256];
    nvtxRangePushA ("step");
    double t0 = s_secs ();
    for (int i = 0; i < n; i++) {
        snprintf (text, sizeof text, "aten::mm, seq = %d, op_id = %d, sizes = [[512, 2048], [2048, 6144]], "
                  "input_op_ids = [(%d,0), (%d,0)]", i, i + 7, i + 3, i + 5);
        nvtxRangePushA (text);
        nvtxRangePop ();
    }
    double t1 = s_secs ();
    for (int i = 0; i < n; i++) {
        nvtxRangePushA ("aten::view");                /* a repeated text */
        nvtxRangePop ();
    }
    double t2 = s_secs ();
    nvtxRangePop ();
    printf ("push+pop: %.1f ns with a new text, %.1f ns with a repeated one (%d each)\n",
            (t1 - t0) * 1e9 / n, (t2 - t1) * 1e9 / n, n);
    return 0;
}

int main (int argc, char **argv)
{
    if (argc < 2 || (s_steps = atoi (argv[1])) <= 0) {
        fprintf (stderr, "usage: akd-nvtx-probe STEPS [ok|fail|crash|threads|cupti|bench]\n");
        return 2;
    }
    const char *mode = argc > 2 ? argv[2] : "ok";
    if (strcmp (mode, "bench") == 0)
        return s_bench (s_steps);
    if (strcmp (mode, "cupti") == 0 && s_cuda_init () != 0)
        return 1;
    if (strcmp (mode, "threads") == 0) {
        pthread_t t;
        if (pthread_create (&t, NULL, s_run, (void *) mode) != 0)
            return 1;
        s_run ((void *) mode);
        pthread_join (t, NULL);
    }
    else
        s_run ((void *) mode);
    /* $AKD_PROBE_AFTER_MS: a program that goes on after its steps (one more
       launch that long after them, outside any range) */
    const char *after_env = getenv ("AKD_PROBE_AFTER_MS");
    const int after = after_env ? atoi (after_env) : 0;
    if (after > 0) {
        struct timespec ts = { after / 1000, (long) (after % 1000) * 1000000L };
        nanosleep (&ts, NULL);
        s_kernel ("after_kernel", 1000);
    }
    return strcmp (mode, "fail") == 0 ? 3 : 0;
}
