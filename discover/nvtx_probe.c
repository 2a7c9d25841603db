/*  discover/nvtx_probe.c: akd-nvtx-probe, a program that speaks NVTX and
    never touches CUDA, for the tests of libakdiscover.so on hosts without
    a GPU (tests/integration/test_discover.c).

    usage: akd-nvtx-probe STEPS [ok|fail|crash|threads]

    Each step is an outermost range "step" holding a PyTorch-shaped range
    (pushed with nvtxRangePushA) and a registered-string range of a domain
    (nvtxDomainRangePushEx).  `fail` exits 3 after the steps, `crash`
    aborts inside the last step, `threads` runs the steps on two threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvtx3/nvToolsExt.h>

static int s_steps;

static void *s_run (void *arg)
{
    const char *mode = arg;
    nvtxDomainHandle_t dom = nvtxDomainCreateA ("akd-probe");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA (dom, "registered range");
    for (int i = 0; i < s_steps; i++) {
        nvtxRangePushA ("step");
        char text[128];
        snprintf (text, sizeof text, "aten::mm, seq = %d, sizes = [[8, 16], [16, 32]]", i);
        nvtxRangePushA (text);
        nvtxRangePop ();
        nvtxEventAttributes_t a;
        memset (&a, 0, sizeof a);
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = reg;
        nvtxDomainRangePushEx (dom, &a);
        nvtxDomainRangePop (dom);
        if (strcmp (mode, "crash") == 0 && i == s_steps - 1)
            abort ();
        nvtxRangePop ();
    }
    return NULL;
}

int main (int argc, char **argv)
{
    if (argc < 2 || (s_steps = atoi (argv[1])) <= 0) {
        fprintf (stderr, "usage: akd-nvtx-probe STEPS [ok|fail|crash|threads]\n");
        return 2;
    }
    const char *mode = argc > 2 ? argv[2] : "ok";
    if (strcmp (mode, "threads") == 0) {
        pthread_t t;
        if (pthread_create (&t, NULL, s_run, (void *) mode) != 0)
            return 1;
        s_run ((void *) mode);
        pthread_join (t, NULL);
    }
    else
        s_run ((void *) mode);
    return strcmp (mode, "fail") == 0 ? 3 : 0;
}
