/*  Planted for tests: dies with SIGSEGV on every call.  Both the pointer and
    what it points to are volatile: the compiler must load the pointer (so it
    cannot prove it is NULL and turn the store into a trap) and must keep the
    store (a store to non-volatile memory may be dropped as dead). */
void ak_kernel (const ak_args_t *a)
{
    volatile float *volatile target = NULL;
    (void) a;
    *target = 1.0f;
}
