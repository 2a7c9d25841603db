/*  ops/akctl/signals.c: how watch, submit --wait, verify --wait and demo
    learn that they should stop (akctl_stop, akctl.h). */
#include "akctl.h"

#include <signal.h>
#include <string.h>

volatile sig_atomic_t akctl_stop = 0;

static void s_on_signal (int sig)
{
    (void) sig;
    akctl_stop = 1;
}

/*  Without SA_RESTART, so a blocking wait returns and sees the flag. */
void akctl_catch_signals (void)
{
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGHUP, &sa, NULL);
    /* A closed stdout (akctl demo | head) must still stop the children. */
    sigaction (SIGPIPE, &sa, NULL);
}
