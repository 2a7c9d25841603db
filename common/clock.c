/*  common/clock.c: monotonic and wall clocks. */
#include "clock.h"

#include <stdio.h>
#include <time.h>

static uint64_t s_clock_ns (clockid_t id)
{
    struct timespec ts;
    if (clock_gettime (id, &ts) != 0)
        return 0;
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

uint64_t ak_clock_mono_ns (void)
{
    return s_clock_ns (CLOCK_MONOTONIC);
}

uint64_t ak_clock_mono_ms (void)
{
    return s_clock_ns (CLOCK_MONOTONIC) / 1000000ull;
}

uint64_t ak_clock_wall_ms (void)
{
    return s_clock_ns (CLOCK_REALTIME) / 1000000ull;
}

/*  Formats wall_ms as "YYYY-MM-DDTHH:MM:SSZ" (UTC, seconds precision) into
    buf and returns buf; an empty string when buf is too small. */
const char *ak_clock_iso (uint64_t wall_ms, char *buf, int len)
{
    if (!buf || len <= 0)
        return "";
    buf[0] = '\0';
    time_t secs = (time_t) (wall_ms / 1000);
    struct tm tm;
    if (!gmtime_r (&secs, &tm))
        return buf;
    if (strftime (buf, (size_t) len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        buf[0] = '\0';
    return buf;
}
