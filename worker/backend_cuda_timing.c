/*  worker/backend_cuda_timing.c: the CUDA backend's timing, run by an
    executor child: timing samples, untraced timing and the event floor,
    the device's measured peaks and the comparison timers of tests/bench
    (device-side inputs and comparisons: backend_cuda_data.c).

    A timing sample queues the L2 flush, a blocking kernel that spins on a
    host-mapped flag, the events around the launch and a clock probe, then
    releases the flag: the events see the launch already queued (no
    submission latency), and clock64 against %globaltimer over the region
    tells a throttled SM clock.

    Never: keep a sample taken under a throttled SM clock as good, or let
    the blocking kernel spin past its time limit. */
#include "backend_cuda_impl.h"
#include "clock.h"
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if AK_HAVE_CUDA

/* ================================================================ timing */

/*  The helper kernels of timing samples, as PTX the driver compiles at
    open (a few milliseconds; no NVRTC in the executor).  The CUDA C they
    were written from:

        ak_block_stream (const volatile unsigned *flag, u64 timeout_ns, u64 *rec)
            t0 = %globaltimer; to = 0
            while (*flag == 0) if (%globaltimer - t0 > timeout_ns) { to = 1; break; }
            rec[0] = clock64 (); rec[1] = %globaltimer; rec[2] = %smid; rec[3] = to;
        ak_clock_probe (u64 *slots, unsigned nslots, u64 seq)      (one block per SM or more)
            if (threadIdx.x == 0 && %smid < nslots)
                slots[3 smid .. 3 smid + 2] = { clock64 (), %globaltimer, seq }
        ak_timer_tick (u64 *out)
            out[0] = the smallest non-zero step of %globaltimer over 16 steps
                     (at most 10^6 reads)
        ak_l2_flush (const uint4 *buf, u64 n, unsigned *sink)     (grid-stride)
            acc ^= every word of __ldcg (buf + i), i < n
            if (acc == 0x9E3779B9) *sink = acc     (never: buf is zeros; keeps the loads)

    The blocking kernel's wait is bounded by timeout_ns: a mistake (a
    module loading behind it, a host thread that never releases the flag)
    costs one slow sample, never a hang. */
static const char s_helper_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry ak_empty (.param .align 8 .b8 p_args[216])\n"
    "{\n"
    "    ret;\n"
    "}\n"
    ".visible .entry ak_block_stream (.param .u64 p_flag, .param .u64 p_timeout, .param .u64 p_rec)\n"
    "{\n"
    "    .reg .pred %p<3>;\n"
    "    .reg .b32 %r<3>;\n"
    "    .reg .b64 %rd<17>;\n"
    "    ld.param.u64 %rd7, [p_flag];\n"
    "    ld.param.u64 %rd5, [p_timeout];\n"
    "    ld.param.u64 %rd8, [p_rec];\n"
    "    cvta.to.global.u64 %rd1, %rd8;\n"
    "    cvta.to.global.u64 %rd2, %rd7;\n"
    "    mov.u64 %rd6, %globaltimer;\n"
    "WAIT:\n"
    "    mov.u64 %rd16, 0;\n"
    "    ld.volatile.global.u32 %r1, [%rd2];\n"
    "    setp.ne.s32 %p1, %r1, 0;\n"
    "    @%p1 bra DONE;\n"
    "    mov.u64 %rd10, %globaltimer;\n"
    "    sub.s64 %rd12, %rd10, %rd6;\n"
    "    setp.le.u64 %p2, %rd12, %rd5;\n"
    "    mov.u64 %rd16, 1;\n"
    "    @%p2 bra WAIT;\n"
    "DONE:\n"
    "    mov.u64 %rd13, %clock64;\n"
    "    mov.u64 %rd14, %globaltimer;\n"
    "    mov.u32 %r2, %smid;\n"
    "    cvt.u64.u32 %rd15, %r2;\n"
    "    st.volatile.global.u64 [%rd1], %rd13;\n"
    "    st.volatile.global.u64 [%rd1+8], %rd14;\n"
    "    st.volatile.global.u64 [%rd1+16], %rd15;\n"
    "    st.volatile.global.u64 [%rd1+24], %rd16;\n"
    "    ret;\n"
    "}\n"
    ".visible .entry ak_clock_probe (.param .u64 p_slots, .param .u32 p_nslots, .param .u64 p_seq)\n"
    "{\n"
    "    .reg .pred %p<3>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<12>;\n"
    "    ld.param.u64 %rd1, [p_slots];\n"
    "    ld.param.u32 %r2, [p_nslots];\n"
    "    ld.param.u64 %rd2, [p_seq];\n"
    "    mov.u32 %r3, %tid.x;\n"
    "    setp.ne.s32 %p1, %r3, 0;\n"
    "    @%p1 bra OUT;\n"
    "    mov.u32 %r4, %smid;\n"
    "    setp.ge.u32 %p2, %r4, %r2;\n"
    "    @%p2 bra OUT;\n"
    "    cvta.to.global.u64 %rd5, %rd1;\n"
    "    mov.u64 %rd3, %clock64;\n"
    "    mov.u64 %rd4, %globaltimer;\n"
    "    mul.lo.s32 %r5, %r4, 24;\n"
    "    cvt.u64.u32 %rd6, %r5;\n"
    "    add.s64 %rd7, %rd5, %rd6;\n"
    "    st.volatile.global.u64 [%rd7], %rd3;\n"
    "    st.volatile.global.u64 [%rd7+8], %rd4;\n"
    "    st.volatile.global.u64 [%rd7+16], %rd2;\n"
    "OUT:\n"
    "    ret;\n"
    "}\n"
    ".visible .entry ak_timer_tick (.param .u64 p_out)\n"
    "{\n"
    "    .reg .pred %p<7>;\n"
    "    .reg .b32 %r<10>;\n"
    "    .reg .b64 %rd<14>;\n"
    "    ld.param.u64 %rd9, [p_out];\n"
    "    cvta.to.global.u64 %rd1, %rd9;\n"
    "    mov.u64 %rd13, %globaltimer;\n"
    "    mov.u32 %r8, 0;\n"
    "    mov.u64 %rd12, -1;\n"
    "    mov.u32 %r9, %r8;\n"
    "LOOP:\n"
    "    mov.u64 %rd10, %globaltimer;\n"
    "    setp.ne.s64 %p1, %rd10, %rd13;\n"
    "    sub.s64 %rd11, %rd10, %rd13;\n"
    "    setp.lt.u64 %p2, %rd11, %rd12;\n"
    "    selp.u32 %r7, 1, 0, %p1;\n"
    "    add.s32 %r9, %r9, %r7;\n"
    "    and.pred %p3, %p1, %p2;\n"
    "    selp.b64 %rd12, %rd11, %rd12, %p3;\n"
    "    add.s32 %r8, %r8, 1;\n"
    "    setp.lt.u32 %p4, %r8, 1000000;\n"
    "    setp.lt.u32 %p5, %r9, 16;\n"
    "    and.pred %p6, %p5, %p4;\n"
    "    mov.u64 %rd13, %rd10;\n"
    "    @%p6 bra LOOP;\n"
    "    st.volatile.global.u64 [%rd1], %rd12;\n"
    "    ret;\n"
    "}\n"
    ".visible .entry ak_l2_flush (.param .u64 p_buf, .param .u64 p_n, .param .u64 p_sink)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<17>;\n"
    "    .reg .b64 %rd<16>;\n"
    "    ld.param.u64 %rd7, [p_buf];\n"
    "    ld.param.u64 %rd8, [p_n];\n"
    "    ld.param.u64 %rd9, [p_sink];\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    cvt.u64.u32 %rd1, %r3;\n"
    "    mov.u32 %r4, %ctaid.x;\n"
    "    mul.wide.u32 %rd10, %r4, %r3;\n"
    "    mov.u32 %r5, %tid.x;\n"
    "    cvt.u64.u32 %rd11, %r5;\n"
    "    add.s64 %rd15, %rd10, %rd11;\n"
    "    setp.ge.u64 %p1, %rd15, %rd8;\n"
    "    @%p1 bra FEND;\n"
    "    mov.u32 %r7, %nctaid.x;\n"
    "    cvt.u64.u32 %rd12, %r7;\n"
    "    mul.lo.s64 %rd3, %rd12, %rd1;\n"
    "    cvta.to.global.u64 %rd4, %rd9;\n"
    "    mov.u32 %r16, 0;\n"
    "FLOOP:\n"
    "    shl.b64 %rd14, %rd15, 4;\n"
    "    add.s64 %rd13, %rd7, %rd14;\n"
    "    ld.global.cg.v4.u32 {%r8, %r9, %r10, %r11}, [%rd13];\n"
    "    xor.b32 %r12, %r9, %r16;\n"
    "    xor.b32 %r13, %r12, %r8;\n"
    "    xor.b32 %r14, %r13, %r10;\n"
    "    xor.b32 %r16, %r14, %r11;\n"
    "    add.s64 %rd15, %rd15, %rd3;\n"
    "    setp.lt.u64 %p2, %rd15, %rd8;\n"
    "    @%p2 bra FLOOP;\n"
    "    setp.ne.s32 %p3, %r16, -1640531527;\n"
    "    @%p3 bra FEND;\n"
    "    mov.u32 %r15, -1640531527;\n"
    "    st.global.u32 [%rd4], %r15;\n"
    "FEND:\n"
    "    ret;\n"
    "}\n";

/*  Host-mapped words (dev->words, the device sees dev->words_dev):
    [0] the blocker's flag (low 32 bits), [1..4] the blocker's record
    (clock64, %globaltimer, %smid, timed out) written as it leaves,
    [5] the timer step, [6] the flush kernel's sink, [8 + 3 s .. 10 + 3 s]
    the probe slot of SM s (clock64, %globaltimer, sample number). */
enum { S_W_FLAG = 0, S_W_BLK_CLK = 1, S_W_BLK_GT = 2, S_W_BLK_SM = 3, S_W_BLK_TO = 4,
       S_W_TICK = 5, S_W_SINK = 6, S_W_SLOTS = 8 };

static void s_flag_set (ak_dev_t *dev, uint32_t v)
{
    __atomic_store_n ((volatile uint32_t *) &dev->words[S_W_FLAG], v, __ATOMIC_SEQ_CST);
}

/*  Launches one of the helper kernels (no CUPTI correlation: they are not
    what is measured). */
static int s_help_launch (ak_dev_t *dev, CUfunction fn, uint32_t grid, uint32_t block, void **params,
                          const char *what, ak_err_t *err)
{
    int rc = ak_cuda_be_cu (dev, dev->drv->cuLaunchKernel (fn, grid, 1, 1, block, 1, 1, 0,
                                                           dev->stream, params, NULL),
                            "cuLaunchKernel", err);
    if (rc)
        ak_err_prefix (err, "%s", what);
    return rc;
}

/*  Queues the L2 flush on dev's stream: a read of the flush buffer (twice
    the L2) with ak_l2_flush, which leaves the L2 full of clean lines of
    that buffer.  A write (cuMemsetD8Async, the fallback where the helper
    module is missing) leaves it full of dirty lines instead, and the
    measured kernel then pays for writing them back: on an H200 a 200 us
    copy read 11% slower after a memset flush than under Nsight Compute's
    own cache flush. */
static int s_flush (ak_dev_t *dev, ak_err_t *err)
{
    if (!dev->read_flush)
        return ak_cuda_be_cu (dev, dev->drv->cuMemsetD8Async (dev->flush, ++dev->flush_value,
                                                              dev->flush_bytes,
                                                              dev->stream), "cuMemsetD8Async (L2 flush)", err);
    CUdeviceptr buf = dev->flush, sink = dev->words_dev + S_W_SINK * sizeof (uint64_t);
    unsigned long long n = dev->flush_bytes / 16;
    void *pf[] = { &buf, &n, &sink };
    return s_help_launch (dev, dev->fn_flush, (uint32_t) dev->sm_count * 4, 512, pf, "ak_l2_flush (L2 flush)", err);
}

/*  Sets up the blocking kernel, the clock probe and the reading L2 flush:
    host-mapped words, the helper module, one run of each (which also
    makes sure the module is loaded before anything can wait behind the
    blocker) and the timer step.  Where that cannot be had (no mapped host
    memory, no PTX JIT in this driver installation), samples go on
    without the blocker and the clock check, flushing with a memset, and
    dev->blocker_why says why; AK_CUDA_BLOCKER=0 turns the blocker (and
    so the clock check) off on purpose.  Only a sticky error fails (the
    context is gone). */
int ak_cuda_be_timing_open (ak_dev_t *dev, ak_err_t *err)
{
    const ak_cuda_driver_t *drv = dev->drv;
    ak_err_t e = { 0 };
    int rc = 0;
    int khz = 0;
    if (ak_cuda_be_attr (drv, dev->cudev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate",
                         &khz, &e) == 0 && khz > 0)
        dev->clock_mhz = (uint32_t) (khz / 1000);
    void *host = NULL;
    size_t bytes = AK_CUDA_WORDS * sizeof (uint64_t);
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemHostAlloc (&host, bytes,
                                                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
                             "cuMemHostAlloc (DEVICEMAP)", &e)) != 0)
        goto off;
    dev->words = host;
    memset (host, 0, bytes);
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemHostGetDevicePointer (&dev->words_dev, host, 0),
                             "cuMemHostGetDevicePointer", &e)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuModuleLoadData (&dev->help_mod, s_helper_ptx),
                                "cuModuleLoadData (timing helpers, PTX)", &e)) != 0)
        goto off;
    if ((rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&dev->fn_block, dev->help_mod, "ak_block_stream"),
                             "cuModuleGetFunction (ak_block_stream)", &e)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&dev->fn_probe, dev->help_mod,
                                                               "ak_clock_probe"),
                                "cuModuleGetFunction (ak_clock_probe)", &e)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&dev->fn_tick, dev->help_mod, "ak_timer_tick"),
                                "cuModuleGetFunction (ak_timer_tick)", &e)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&dev->fn_flush, dev->help_mod, "ak_l2_flush"),
                                "cuModuleGetFunction (ak_l2_flush)", &e)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&dev->fn_empty, dev->help_mod, "ak_empty"),
                                "cuModuleGetFunction (ak_empty)", &e)) != 0)
        goto off;

    /* One run of each, the flag already up: the blocker leaves at once. */
    s_flag_set (dev, 1);
    unsigned long long timeout = AK_CUDA_BLOCK_NS, seq = 0;
    unsigned nslots = AK_CUDA_PROBE_SLOTS;
    CUdeviceptr flag = dev->words_dev, rec = dev->words_dev + S_W_BLK_CLK * sizeof (uint64_t);
    CUdeviceptr tick = dev->words_dev + S_W_TICK * sizeof (uint64_t);
    CUdeviceptr slots = dev->words_dev + S_W_SLOTS * sizeof (uint64_t);
    void *pb[] = { &flag, &timeout, &rec };
    void *pp[] = { &slots, &nslots, &seq };
    void *pt[] = { &tick };
    /* The flush buffer holds zeros, so the flush kernel never stores. */
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemsetD8Async (dev->flush, 0, dev->flush_bytes, dev->stream),
                             "cuMemsetD8Async (flush buffer)", &e)) != 0
        || (rc = s_help_launch (dev, dev->fn_block, 1, 1, pb, "ak_block_stream", &e)) != 0
        || (rc = s_help_launch (dev, dev->fn_probe, (uint32_t) dev->sm_count * 2, 32, pp, "ak_clock_probe", &e)) != 0
        || (rc = s_help_launch (dev, dev->fn_tick, 1, 1, pt, "ak_timer_tick", &e)) != 0
        || (rc = ak_cuda_be_sync (dev, &e)) != 0)
        goto off;
    dev->read_flush = true;
    if ((rc = s_flush (dev, &e)) != 0 || (rc = ak_cuda_be_sync (dev, &e)) != 0) {
        dev->read_flush = false;
        goto off;
    }
    dev->tick_ns = dev->words[S_W_TICK];
    if (dev->tick_ns == UINT64_MAX)
        dev->tick_ns = 0;                       /* never moved: no clock check */
    const char *env = getenv ("AK_CUDA_BLOCKER");
    if (env && strcmp (env, "0") == 0) {
        snprintf (dev->blocker_why, sizeof dev->blocker_why, "blocking kernel off (AK_CUDA_BLOCKER=0)");
        return 0;
    }
    dev->blocker_on = true;
    ak_debug ("cuda device %d: timing with a blocking kernel; %%globaltimer step %" PRIu64 " ns, "
              "default SM clock %u MHz", dev->ordinal, dev->tick_ns, dev->clock_mhz);
    return 0;

off:
    if (rc == AK_ECRASH) {
        ak_err_set (err, rc, "%s", e.msg);
        return rc;
    }
    snprintf (dev->blocker_why, sizeof dev->blocker_why, "%.250s", e.msg);
    ak_info ("cuda device %d: timing without the blocking kernel (events carry the launch latency): %s",
             dev->ordinal, dev->blocker_why);
    return 0;
}

/*  The SM clock over the region from the blocker's exit to the clock
    probe of sample seq, in MHz, from the same SM's clock64 and
    %globaltimer; 0 when it cannot be told (no probe block on that SM, a
    span under four timer steps, a timer that does not move). */
static double s_region_mhz (ak_dev_t *dev, uint64_t seq)
{
    volatile uint64_t *w = dev->words;
    uint64_t sm = w[S_W_BLK_SM];
    if (sm >= AK_CUDA_PROBE_SLOTS || dev->tick_ns == 0)
        return 0;
    volatile uint64_t *slot = &w[S_W_SLOTS + 3 * sm];
    if (slot[2] != seq)
        return 0;
    uint64_t c0 = w[S_W_BLK_CLK], g0 = w[S_W_BLK_GT], c1 = slot[0], g1 = slot[1];
    if (g1 <= g0 || c1 <= c0 || g1 - g0 < 4 * dev->tick_ns)
        return 0;
    return (double) (c1 - c0) * 1000.0 / (double) (g1 - g0);
}

/*  One sample (the contract of sample() in backend.h).  In stream order:
    the L2 flush (cold), the blocking kernel, start event, the launch,
    stop event, the clock probe; then the host releases the flag.  All of
    it is queued before the blocker lets go, so the events bracket the
    kernel and not its submission.  The first sample of a kernel runs it
    once without the blocker first (its module fully loaded before
    anything waits).  with_cupti: read the launch's CUPTI record (a plain
    flush) into cupti_us and info. */
static int s_sample_impl (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                          bool with_cupti, ak_sample_t *out, ak_err_t *err)
{
    if (!kernel || !args || !out)
        return ak_err_set (err, AK_EINVAL, "cuda sample: bad arguments");
    memset (out, 0, sizeof *out);
    out->cupti_us = -1;
    out->clock_ok = true;
    ak_cuda_be_params_t params;
    int rc = ak_cuda_be_begin_launch (dev, kernel, args, &params, err);
    if (rc)
        return rc;
    const ak_cuda_driver_t *drv = dev->drv;
    /* A library call may launch several kernels: its CUPTI record would
       be one of them, so it is timed by events alone (and so is the other
       side: timing.c uses CUPTI only where every sample has it). */
    with_cupti = with_cupti && !kernel->lib;
    /* A library call picks kernels per shape, loaded on first use: each new
       shape runs once without the blocker too. */
    if (!kernel->warm || (kernel->lib && !ak_cuda_lib_ready (kernel->lib, args))) {
        if ((rc = ak_cuda_be_enqueue_kernel (dev, kernel, args, &params, true, err)) != 0
            || (rc = ak_cuda_be_sync (dev, err)) != 0)
            return rc;
        kernel->warm = true;
    }
    if (cold && (rc = s_flush (dev, err)) != 0)
        return rc;

    bool blocked = dev->blocker_on;
    uint64_t seq = ++dev->sample_seq;
    if (blocked) {
        unsigned long long timeout = AK_CUDA_BLOCK_NS;
        CUdeviceptr flag = dev->words_dev, rec = dev->words_dev + S_W_BLK_CLK * sizeof (uint64_t);
        void *pb[] = { &flag, &timeout, &rec };
        s_flag_set (dev, 0);
        dev->words[S_W_BLK_TO] = 1;
        dev->words[S_W_BLK_SM] = UINT64_MAX;
        if ((rc = s_help_launch (dev, dev->fn_block, 1, 1, pb, "ak_block_stream", err)) != 0) {
            s_flag_set (dev, 1);
            return rc;
        }
    }
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_start, dev->stream), "cuEventRecord", err)) != 0
        || (rc = ak_cuda_be_enqueue_kernel (dev, kernel, args, &params, true, err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_stop, dev->stream), "cuEventRecord",
                                err)) != 0)
        goto release;
    if (blocked) {
        unsigned nslots = AK_CUDA_PROBE_SLOTS;
        unsigned long long seq_a = seq;
        CUdeviceptr slots = dev->words_dev + S_W_SLOTS * sizeof (uint64_t);
        void *pp[] = { &slots, &nslots, &seq_a };
        rc = s_help_launch (dev, dev->fn_probe, (uint32_t) dev->sm_count * 2, 32, pp, "ak_clock_probe", err);
    }

release:
    if (blocked)
        s_flag_set (dev, 1);
    if (rc) {
        ak_err_t e = { 0 };
        if (blocked && ak_cuda_be_sync (dev, &e) != 0)
            ak_debug ("cuda sample: %s", e.msg);
        return rc;
    }
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventSynchronize (dev->ev_stop), "cuEventSynchronize", err)) != 0
        || (rc = ak_cuda_be_sync (dev, err)) != 0)
        return rc;
    float ms = 0;
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventElapsedTime (&ms, dev->ev_start, dev->ev_stop),
                             "cuEventElapsedTime", err)) != 0)
        return rc;
    out->event_us = (double) ms * 1000.0;
    if (blocked) {
        out->blocked = dev->words[S_W_BLK_TO] == 0;
        if (!out->blocked)
            ak_debug ("cuda sample: the blocking kernel timed out (the host took over %llu ms to queue "
                      "the launch): this sample's events carry the launch latency",
                      AK_CUDA_BLOCK_NS / 1000000ull);
        out->sm_clock_mhz = s_region_mhz (dev, seq);
        if (out->sm_clock_mhz > 0 && dev->clock_mhz > 0
            && out->sm_clock_mhz < AK_CUDA_THROTTLE * (double) dev->clock_mhz)
            out->clock_ok = false;
    }
    if (with_cupti && dev->cupti_on && !dev->kernel_trace_off) {
        ak_cuda_kernel_record_t r;
        ak_err_t e = { 0 };
        if (ak_cuda_last_kernel (dev, &r, &e) == 0) {
            out->cupti_us = r.us;
            out->has_info = true;
            ak_kernel_info_t *ki = &out->info;
            snprintf (ki->name, sizeof ki->name, "%s", r.name[0] ? r.name : kernel->symbol);
            ki->registers = r.registers;
            ki->static_shared = r.static_shared;
            ki->dynamic_shared = r.dynamic_shared;
            memcpy (ki->grid, r.grid, sizeof ki->grid);
            memcpy (ki->block, r.block, sizeof ki->block);
            ki->duration_us = r.us;
        }
        else
            ak_debug ("cuda sample: %s", e.msg);
    }
    return 0;
}

int ak_cuda_be_sample (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                       ak_sample_t *out, ak_err_t *err)
{
    return s_sample_impl (dev, kernel, args, cold, true, out, err);
}

/*  One sample in microseconds of CUDA event time (backend.h): the same
    queue as sample() (blocking kernel included), without reading CUPTI,
    so ak_cuda_last_kernel can still be asked about this launch. */
int ak_cuda_be_time (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                     double *us, ak_err_t *err)
{
    if (!us)
        return ak_err_set (err, AK_EINVAL, "cuda time: bad arguments");
    ak_sample_t smp;
    int rc = s_sample_impl (dev, kernel, args, cold, false, &smp, err);
    if (rc == 0)
        *us = smp.event_us;
    return rc;
}

/* ------------------------------------------- untraced timing (backend.h) */

static int s_cmp_dbl (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double s_median (double *x, size_t n)
{
    qsort (x, n, sizeof *x, s_cmp_dbl);
    return (n & 1) ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/*  Calibrates dev's event floor (backend.h, event_floor): AK_CUDA_FLOOR_SAMPLES
    samples of the helper module's empty kernel (one block of 32 threads,
    cold, behind the blocker: exactly the sample() path) with kernel
    records on, whose CUPTI durations give the kernel's device time, then
    as many with them off, whose events give what an untraced sample
    reads for it; the floor is the difference of the medians.  Both
    passes are in the same state as the samples they stand for, and the
    empty kernel's own duration (~0.6 us on an H200) is taken out, so
    only the event overhead remains.  The tracing state is restored. */
static int s_floor_calibrate (ak_dev_t *dev, ak_err_t *err)
{
    if (!dev->cupti_on || !(dev->cupti_kinds & 1u))
        return ak_err_set (err, AK_EUNAVAIL, "no CUPTI kernel records: %s",
                           dev->cupti_why[0] ? dev->cupti_why : "kernel kind not enabled");
    if (!dev->fn_empty)
        return ak_err_set (err, AK_EUNAVAIL, "no helper module: %s", dev->blocker_why);
    ak_kernel_t k;
    memset (&k, 0, sizeof k);
    k.fn = dev->fn_empty;
    k.max_threads = 1024;
    snprintf (k.symbol, sizeof k.symbol, "ak_empty");
    ak_launch_t l;
    memset (&l, 0, sizeof l);
    l.grid[0] = l.grid[1] = l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = l.block[2] = 1;
    bool was_off = dev->kernel_trace_off;
    double cu[AK_CUDA_FLOOR_SAMPLES], ev[AK_CUDA_FLOOR_SAMPLES];
    size_t ncu = 0;
    int rc = ak_cuda_kernel_trace (dev, true, err);
    for (int i = 0; rc == 0 && i < AK_CUDA_FLOOR_SAMPLES; i++) {
        ak_sample_t smp;
        rc = s_sample_impl (dev, &k, &l, true, true, &smp, err);
        if (rc == 0 && smp.cupti_us >= 0)
            cu[ncu++] = smp.cupti_us;
    }
    if (rc == 0)
        rc = ak_cuda_kernel_trace (dev, false, err);
    for (int i = 0; rc == 0 && i < AK_CUDA_FLOOR_SAMPLES; i++) {
        ak_sample_t smp;
        rc = s_sample_impl (dev, &k, &l, true, false, &smp, err);
        ev[i] = smp.event_us;
    }
    ak_err_t e = { 0 };
    int rc2 = ak_cuda_kernel_trace (dev, !was_off, rc ? &e : err);
    if (rc)
        return rc;
    if (rc2)
        return rc2;
    if (ncu < AK_CUDA_FLOOR_SAMPLES / 2)
        return ak_err_set (err, AK_ENOTFOUND, "event floor: only %zu of %d empty-kernel launches had a "
                           "CUPTI record", ncu, AK_CUDA_FLOOR_SAMPLES);
    double mcu = s_median (cu, ncu), mev = s_median (ev, AK_CUDA_FLOOR_SAMPLES);
    dev->floor_us = mev > mcu ? mev - mcu : 0.0;
    ak_info ("cuda device %d: event floor %.3f us (empty kernel: events untraced %.3f us, CUPTI %.3f us; "
             "medians of %d)", dev->ordinal, dev->floor_us, mev, mcu, AK_CUDA_FLOOR_SAMPLES);
    return 0;
}

int ak_cuda_event_floor (ak_dev_t *dev, double *us, ak_err_t *err)
{
    if (!dev || !us)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_event_floor: bad arguments");
    *us = 0;
    if (!dev->floor_done) {
        ak_err_t e = { 0 };
        int rc = ak_cuda_be_enter (dev, &e);
        if (rc == 0)
            rc = s_floor_calibrate (dev, &e);
        if (rc == AK_ECRASH)
            return ak_err_set (err, rc, "%s", e.msg);
        dev->floor_done = true;
        dev->floor_rc = rc;
        snprintf (dev->floor_why, sizeof dev->floor_why, "%.250s", e.msg);
        if (rc)
            ak_info ("cuda device %d: no event floor (untraced timing off): %s", dev->ordinal, e.msg);
    }
    if (dev->floor_rc)
        return ak_err_set (err, dev->floor_rc, "%s", dev->floor_why);
    *us = dev->floor_us;
    return 0;
}

/* ========================================================= device peaks */

/*  The FP32 FMA peak kernel, PTX (the CUDA C it was written from):

        ak_fma_peak (unsigned iters, float a, float b, float *sink)
            float x[8] = { tid + a, tid + 2a, ... tid + 8a }     (8 independent chains)
            for (i = 0; i < iters; i++)
                4 times: x[k] = fma (x[k], a, b) for k < 8        (32 FMAs per iteration)
            if (sum x == -1234.5f) *sink = sum                      (never; keeps the FMAs)

    a and b are parameters, so nothing folds; every thread does 32 iters
    FMAs, 2 FLOPs each. */
static const char s_peak_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry ak_fma_peak (.param .u32 p_iters, .param .f32 p_a, .param .f32 p_b, .param .u64 p_sink)\n"
    "{\n"
    "    .reg .pred %p<3>;\n"
    "    .reg .b32 %r<4>;\n"
    "    .reg .f32 %f<16>;\n"
    "    .reg .b64 %rd<3>;\n"
    "    ld.param.u32 %r1, [p_iters];\n"
    "    ld.param.f32 %f8, [p_a];\n"
    "    ld.param.f32 %f9, [p_b];\n"
    "    ld.param.u64 %rd1, [p_sink];\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    cvt.rn.f32.u32 %f10, %r2;\n"
    "    add.f32 %f0, %f10, %f8;\n"
    "    add.f32 %f1, %f0, %f8;\n"
    "    add.f32 %f2, %f1, %f8;\n"
    "    add.f32 %f3, %f2, %f8;\n"
    "    add.f32 %f4, %f3, %f8;\n"
    "    add.f32 %f5, %f4, %f8;\n"
    "    add.f32 %f6, %f5, %f8;\n"
    "    add.f32 %f7, %f6, %f8;\n"
    "    setp.eq.u32 %p1, %r1, 0;\n"
    "    @%p1 bra PEND;\n"
    "PLOOP:\n"
#define S_FMA8 \
    "    fma.rn.f32 %f0, %f0, %f8, %f9;\n" \
    "    fma.rn.f32 %f1, %f1, %f8, %f9;\n" \
    "    fma.rn.f32 %f2, %f2, %f8, %f9;\n" \
    "    fma.rn.f32 %f3, %f3, %f8, %f9;\n" \
    "    fma.rn.f32 %f4, %f4, %f8, %f9;\n" \
    "    fma.rn.f32 %f5, %f5, %f8, %f9;\n" \
    "    fma.rn.f32 %f6, %f6, %f8, %f9;\n" \
    "    fma.rn.f32 %f7, %f7, %f8, %f9;\n"
    S_FMA8 S_FMA8 S_FMA8 S_FMA8
#undef S_FMA8
    "    sub.u32 %r1, %r1, 1;\n"
    "    setp.ne.u32 %p1, %r1, 0;\n"
    "    @%p1 bra PLOOP;\n"
    "PEND:\n"
    "    add.f32 %f11, %f0, %f1;\n"
    "    add.f32 %f11, %f11, %f2;\n"
    "    add.f32 %f11, %f11, %f3;\n"
    "    add.f32 %f11, %f11, %f4;\n"
    "    add.f32 %f11, %f11, %f5;\n"
    "    add.f32 %f11, %f11, %f6;\n"
    "    add.f32 %f11, %f11, %f7;\n"
    "    setp.neu.f32 %p2, %f11, 0fC49A5000;\n"
    "    @%p2 bra POUT;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    st.global.f32 [%rd2], %f11;\n"
    "POUT:\n"
    "    ret;\n"
    "}\n";

#define AK_PEAK_REPS      5u                    /* timed repetitions, best of */
#define AK_PEAK_FMA_ITERS 16384u                /* x 32 FMAs per thread */
#define AK_PEAK_BLOCK     256u

/*  Milliseconds between dev->ev_start and dev->ev_stop after the stream
    work queued between them. */
static int s_peak_elapsed (ak_dev_t *dev, float *ms, ak_err_t *err)
{
    const ak_cuda_driver_t *drv = dev->drv;
    int rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_stop, dev->stream), "cuEventRecord", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventSynchronize (dev->ev_stop), "cuEventSynchronize", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventElapsedTime (ms, dev->ev_start, dev->ev_stop),
                                "cuEventElapsedTime", err)) != 0)
        return rc;
    return 0;
}

/*  Copy bandwidth: cuMemcpyDtoDAsync of one buffer into another, both
    well beyond L2 (1 GiB each where free memory allows, else 4x L2 and at
    least 512 MiB), counting read + write bytes (2 x size), best of
    AK_PEAK_REPS after one warm-up copy. */
static int s_peak_copy (ak_dev_t *dev, ak_cuda_peaks_t *pk, ak_err_t *err)
{
    const ak_cuda_driver_t *drv = dev->drv;
    size_t freeb = 0, total = 0;
    int rc = ak_cuda_be_cu (dev, drv->cuMemGetInfo (&freeb, &total), "cuMemGetInfo", err);
    if (rc)
        return rc;
    size_t l2x4 = dev->flush_bytes * 2;        /* flush_bytes: 2x L2, at least 64 MiB */
    size_t lo = l2x4 > (512u << 20) ? l2x4 : (size_t) 512u << 20;
    size_t margin = (size_t) 256u << 20;
    size_t size = (size_t) 1 << 30;
    if (freeb < 2 * size + margin)
        size = lo;
    if (freeb < 2 * size + margin)
        return ak_err_set (err, AK_EUNAVAIL, "copy peak: %zu MiB free, need 2 x %zu MiB",
                           freeb >> 20, size >> 20);
    CUdeviceptr a = 0, b = 0;
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemAlloc (&a, size), "cuMemAlloc (copy peak)", err)) != 0)
        return rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemAlloc (&b, size), "cuMemAlloc (copy peak)", err)) != 0)
        goto out;
    if ((rc = ak_cuda_be_cu (dev, drv->cuMemsetD8Async (a, 0x5A, size, dev->stream),
                             "cuMemsetD8Async", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuMemcpyDtoDAsync (b, a, size, dev->stream),
                                "cuMemcpyDtoDAsync", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuStreamSynchronize (dev->stream), "cuStreamSynchronize",
                                err)) != 0)
        goto out;
    float best = 0;
    for (unsigned i = 0; i < AK_PEAK_REPS; i++) {
        float ms = 0;
        if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_start, dev->stream),
                                 "cuEventRecord", err)) != 0
            || (rc = ak_cuda_be_cu (dev, drv->cuMemcpyDtoDAsync (i & 1 ? a : b, i & 1 ? b : a, size,
                                                                 dev->stream),
                                    "cuMemcpyDtoDAsync", err)) != 0
            || (rc = s_peak_elapsed (dev, &ms, err)) != 0)
            goto out;
        if (ms > 0 && (best == 0 || ms < best))
            best = ms;
    }
    pk->copy_bytes = (double) size;
    pk->copy_ms = best;
    pk->copy_gbps = best > 0 ? 2.0 * (double) size / ((double) best * 1e6) : 0;
out:;
    ak_err_t e = { 0 };
    if (a && ak_cuda_check (drv->cuMemFree (a), "cuMemFree", &e))
        ak_warn ("copy peak: %s", e.msg);
    if (b && ak_cuda_check (drv->cuMemFree (b), "cuMemFree", &e))
        ak_warn ("copy peak: %s", e.msg);
    return rc;
}

/*  FP32 FMA peak: ak_fma_peak over 8 blocks of 256 threads per SM,
    best of AK_PEAK_REPS after one warm-up launch. */
static int s_peak_fma (ak_dev_t *dev, ak_cuda_peaks_t *pk, ak_err_t *err)
{
    const ak_cuda_driver_t *drv = dev->drv;
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUdeviceptr sink = 0;
    int rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuModuleLoadData (&mod, s_peak_ptx),
                             "cuModuleLoadData (FMA peak, PTX)", err)) != 0)
        return rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuModuleGetFunction (&fn, mod, "ak_fma_peak"),
                             "cuModuleGetFunction (ak_fma_peak)", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuMemAlloc (&sink, 64), "cuMemAlloc (FMA peak sink)", err)) != 0)
        goto out;
    unsigned iters = AK_PEAK_FMA_ITERS;
    float fa = 0.999999f, fb = 1e-6f;
    void *params[] = { &iters, &fa, &fb, &sink };
    uint32_t grid = (uint32_t) (dev->sm_count > 0 ? dev->sm_count : 1) * 8u;
    float best = 0;
    for (unsigned i = 0; i <= AK_PEAK_REPS; i++) {
        float ms = 0;
        if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_start, dev->stream),
                                 "cuEventRecord", err)) != 0
            || (rc = ak_cuda_be_cu (dev, drv->cuLaunchKernel (fn, grid, 1, 1, AK_PEAK_BLOCK, 1, 1, 0,
                                                              dev->stream, params, NULL),
                                    "cuLaunchKernel (ak_fma_peak)", err)) != 0
            || (rc = s_peak_elapsed (dev, &ms, err)) != 0)
            goto out;
        if (i > 0 && ms > 0 && (best == 0 || ms < best))     /* i == 0: warm-up */
            best = ms;
    }
    pk->fma_flops = 2.0 * 32.0 * iters * (double) grid * AK_PEAK_BLOCK;
    pk->fma_ms = best;
    pk->fp32_gflops = best > 0 ? pk->fma_flops / ((double) best * 1e6) : 0;
out:;
    ak_err_t e = { 0 };
    if (sink && ak_cuda_check (drv->cuMemFree (sink), "cuMemFree", &e))
        ak_warn ("FMA peak: %s", e.msg);
    if (mod && ak_cuda_check (drv->cuModuleUnload (mod), "cuModuleUnload", &e))
        ak_warn ("FMA peak: %s", e.msg);
    return rc;
}

int ak_cuda_device_peaks (ak_dev_t *dev, ak_cuda_peaks_t *peaks, ak_err_t *err)
{
    if (!dev || !peaks)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_device_peaks: bad arguments");
    memset (peaks, 0, sizeof *peaks);
    if (!dev->peaks_done) {
        ak_err_t e = { 0 };
        ak_cuda_peaks_t pk;
        memset (&pk, 0, sizeof pk);
        int rc = ak_cuda_be_enter (dev, &e);
        if (rc == 0)
            rc = s_peak_copy (dev, &pk, &e);
        if (rc == 0)
            rc = s_peak_fma (dev, &pk, &e);
        if (rc == AK_ECRASH)
            return ak_err_set (err, rc, "%s", e.msg);
        dev->peaks_done = true;
        dev->peaks_rc = rc;
        dev->peaks = pk;
        snprintf (dev->peaks_why, sizeof dev->peaks_why, "%.250s", e.msg);
        if (rc)
            ak_info ("cuda device %d: no measured peaks: %s", dev->ordinal, e.msg);
        else
            ak_info ("cuda device %d: measured peaks: copy %.1f GB/s (read+write, 2 x %.0f MiB), "
                     "FP32 FMA %.1f GFLOP/s", dev->ordinal, pk.copy_gbps, pk.copy_bytes / 1048576.0,
                     pk.fp32_gflops);
    }
    if (dev->peaks_rc)
        return ak_err_set (err, dev->peaks_rc, "%s", dev->peaks_why);
    *peaks = dev->peaks;
    return 0;
}

int ak_cuda_time_plain (ak_dev_t *dev, ak_kernel_t *kernel, const ak_launch_t *args, bool cold,
                        uint32_t reps, double *us, ak_err_t *err)
{
    if (!kernel || !args || !us || reps == 0)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_time_plain: bad arguments");
    ak_cuda_be_params_t params;
    int rc = ak_cuda_be_begin_launch (dev, kernel, args, &params, err);
    if (rc)
        return rc;
    const ak_cuda_driver_t *drv = dev->drv;
    if (cold && (rc = s_flush (dev, err)) != 0)
        return rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_start, dev->stream), "cuEventRecord",
                             err)) != 0)
        return rc;
    for (uint32_t i = 0; i < reps; i++)
        if ((rc = ak_cuda_be_enqueue_kernel (dev, kernel, args, &params, false, err)) != 0)
            return rc;
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventRecord (dev->ev_stop, dev->stream), "cuEventRecord", err)) != 0
        || (rc = ak_cuda_be_cu (dev, drv->cuEventSynchronize (dev->ev_stop), "cuEventSynchronize", err)) != 0
        || (rc = ak_cuda_be_sync (dev, err)) != 0)
        return rc;
    float ms = 0;
    if ((rc = ak_cuda_be_cu (dev, drv->cuEventElapsedTime (&ms, dev->ev_start, dev->ev_stop),
                             "cuEventElapsedTime", err)) != 0)
        return rc;
    *us = (double) ms * 1000.0 / (double) reps;
    return 0;
}

int ak_cuda_blocker_selftest (ak_dev_t *dev, double *waited_ms, bool *timed_out, ak_err_t *err)
{
    if (!waited_ms || !timed_out)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_blocker_selftest: bad arguments");
    *waited_ms = 0;
    *timed_out = false;
    int rc = ak_cuda_be_enter (dev, err);
    if (rc)
        return rc;
    if (!dev->blocker_on)
        return ak_err_set (err, AK_EUNAVAIL, "no blocking kernel: %s", dev->blocker_why);
    unsigned long long timeout = AK_CUDA_BLOCK_NS;
    CUdeviceptr flag = dev->words_dev, rec = dev->words_dev + S_W_BLK_CLK * sizeof (uint64_t);
    void *pb[] = { &flag, &timeout, &rec };
    s_flag_set (dev, 0);
    dev->words[S_W_BLK_TO] = 0;
    uint64_t t0 = ak_clock_mono_ns ();
    rc = s_help_launch (dev, dev->fn_block, 1, 1, pb, "ak_block_stream", err);
    if (rc == 0)
        rc = ak_cuda_be_sync (dev, err);
    *waited_ms = (double) (ak_clock_mono_ns () - t0) / 1e6;
    s_flag_set (dev, 1);
    if (rc == 0)
        *timed_out = dev->words[S_W_BLK_TO] != 0;
    return rc;
}

int ak_cuda_timing_info (ak_dev_t *dev, ak_cuda_timing_info_t *info, ak_err_t *err)
{
    if (!dev || !info)
        return ak_err_set (err, AK_EINVAL, "ak_cuda_timing_info: bad arguments");
    memset (info, 0, sizeof *info);
    info->blocker = dev->blocker_on;
    info->blocker_why = dev->blocker_why;
    info->clock_check = dev->blocker_on && dev->tick_ns > 0 && dev->clock_mhz > 0;
    info->timer_tick_ns = dev->tick_ns;
    info->default_clock_mhz = dev->clock_mhz;
    info->cupti = dev->cupti_on;
    return 0;
}

#endif
