/*  Hostile host kernel (tests/fault/test_sandbox.c): includes a file
    outside the compiler's include paths, so that a compile error would
    quote it in the compile log.  Refused before any compiler runs. */
#include "@SECRET@"

void ak_kernel (const ak_args_t *a)
{
    (void) a;
}
