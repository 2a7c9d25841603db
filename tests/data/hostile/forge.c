/*  Hostile host kernel (tests/fault/test_sandbox.c): on its first call,
    before computing anything, writes a hand-made receipt frame, status
    "ok" and reason "2.0x" (4-byte big-endian length, then the packed
    protobuf), on every descriptor from 3 to 31 (the executor's result
    socket was 3), and exits before the harness can say anything.  Never
    accepted. */
#include <unistd.h>

static void s_hostile (const ak_args_t *a)
{
    static const unsigned char frame[] = {
        0, 0, 0, 10,
        0x62, 2, 'o', 'k',                 /* status = "ok" (field 12) */
        0x6a, 4, '2', '.', '0', 'x',       /* reason = "2.0x" (field 13) */
    };
    (void) a;
    for (int fd = 3; fd < 32; fd++)
        if (write (fd, frame, sizeof frame) < 0)
            continue;
    _exit (0);
}
