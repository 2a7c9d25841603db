/*  Planted for tests: never returns.  The loop reads a volatile flag, so it
    is a real infinite loop (an empty side-effect-free loop may be removed). */
void ak_kernel (const ak_args_t *a)
{
    volatile int spin = 1;
    (void) a;
    while (spin)
        ;
}
