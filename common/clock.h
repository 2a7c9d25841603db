/*  common/clock.h: monotonic and wall clocks. */
#ifndef AK_CLOCK_H
#define AK_CLOCK_H
#include <stdint.h>

uint64_t ak_clock_mono_ns (void);   /* CLOCK_MONOTONIC */
uint64_t ak_clock_mono_ms (void);
uint64_t ak_clock_wall_ms (void);   /* CLOCK_REALTIME, ms since the epoch */
/* ISO-8601 UTC "2026-11-29T18:31:13Z" of a wall-clock ms value into buf. */
const char *ak_clock_iso (uint64_t wall_ms, char *buf, int len);

#endif
