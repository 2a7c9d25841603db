/*  lib/akprofile/akp_cuda.c: the current CUDA device's class, through
    libcuda and libnvrtc opened with dlopen (no CUDA headers needed: the
    few entry points are declared here with the driver API's plain C
    types), so a program linked with libakprofile runs on hosts without a
    GPU and simply gets AKP_EUNAVAIL. */
#include "akprofile.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_CC_MAJOR 75       /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
#define S_CC_MINOR 76

static int s_fail (char *err, size_t len, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
static int s_fail (char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err, len, fmt, ap);
        va_end (ap);
    }
    return AKP_EUNAVAIL;
}

/* The kernel driver's release major from /proc/driver/nvidia/version (the
   worker's "drvN"), 0 when unknown. */
static int s_driver_major (void)
{
    FILE *f = fopen ("/proc/driver/nvidia/version", "r");
    if (!f)
        return 0;
    char line[512] = "";
    int major = 0;
    if (fgets (line, sizeof line, f)) {
        char *save = NULL;
        for (char *tok = strtok_r (line, " \t\n", &save); tok; tok = strtok_r (NULL, " \t\n", &save)) {
            if (isdigit ((unsigned char) tok[0]) && strchr (tok, '.')) {
                bool digits = true;
                for (char *c = tok; *c; c++)
                    digits &= isdigit ((unsigned char) *c) || *c == '.';
                if (digits) {
                    major = atoi (tok);
                    break;
                }
            }
        }
    }
    fclose (f);
    return major;
}

int akp_device_from_cuda (int ordinal, akp_device_t *dev, char *name_buf, size_t name_len,
                          char *nvrtc_buf, size_t nvrtc_len, char *class_buf, size_t class_len,
                          char *err, size_t errlen)
{
    if (!dev || !name_buf || !nvrtc_buf || !class_buf || name_len < 2 || nvrtc_len < 8)
        return s_fail (err, errlen, "akp_device_from_cuda: missing buffer");
    memset (dev, 0, sizeof *dev);
    void *cu = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu)
        return s_fail (err, errlen, "no CUDA driver: %s", dlerror ());
    int (*cuInit) (unsigned) = (int (*) (unsigned)) dlsym (cu, "cuInit");
    int (*cuDeviceGetCount) (int *) = (int (*) (int *)) dlsym (cu, "cuDeviceGetCount");
    int (*cuDeviceGet) (int *, int) = (int (*) (int *, int)) dlsym (cu, "cuDeviceGet");
    int (*cuDeviceGetName) (char *, int, int) = (int (*) (char *, int, int)) dlsym (cu, "cuDeviceGetName");
    int (*cuDeviceGetAttribute) (int *, int, int) = (int (*) (int *, int, int)) dlsym (cu, "cuDeviceGetAttribute");
    int rc = AKP_OK, count = 0, d = 0, ccmaj = 0, ccmin = 0;
    if (!cuInit || !cuDeviceGetCount || !cuDeviceGet || !cuDeviceGetName || !cuDeviceGetAttribute)
        rc = s_fail (err, errlen, "libcuda.so.1 lacks a driver entry point");
    else if (cuInit (0) != 0)
        rc = s_fail (err, errlen, "cuInit failed: no usable GPU");
    else if (cuDeviceGetCount (&count) != 0 || ordinal < 0 || ordinal >= count)
        rc = s_fail (err, errlen, "no CUDA device %d (%d present)", ordinal, count);
    else if (cuDeviceGet (&d, ordinal) != 0 || cuDeviceGetName (name_buf, (int) name_len - 1, d) != 0
             || cuDeviceGetAttribute (&ccmaj, S_CC_MAJOR, d) != 0 || cuDeviceGetAttribute (&ccmin, S_CC_MINOR, d) != 0)
        rc = s_fail (err, errlen, "CUDA device %d: its properties could not be read", ordinal);
    name_buf[name_len - 1] = '\0';
    /* libcuda stays loaded: the caller is about to use it */
    if (rc)
        return rc;

    const char *nvrtc_names[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL };
    void *nv = NULL;
    for (int i = 0; nvrtc_names[i] && !nv; i++)
        nv = dlopen (nvrtc_names[i], RTLD_NOW | RTLD_LOCAL);
    int (*nvrtcVersion) (int *, int *) = nv ? (int (*) (int *, int *)) dlsym (nv, "nvrtcVersion") : NULL;
    int vmaj = 0, vmin = 0;
    if (!nvrtcVersion || nvrtcVersion (&vmaj, &vmin) != 0)
        return s_fail (err, errlen, "no NVRTC (libnvrtc.so.13/.12): kernels cannot be compiled here");
    snprintf (nvrtc_buf, nvrtc_len, "%d.%d", vmaj, vmin);
    dev->name = name_buf;
    dev->cc_major = ccmaj;
    dev->cc_minor = ccmin;
    dev->driver_major = s_driver_major ();
    dev->nvrtc_version = nvrtc_buf;
    if (akp_device_class (dev, class_buf, class_len) != AKP_OK)
        return s_fail (err, errlen, "device class does not fit in %zu bytes", class_len);
    return AKP_OK;
}
