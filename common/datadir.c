/*  common/datadir.c: see datadir.h. */
#include "datadir.h"
#include "util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *ak_datadir_bindir (void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    return ak_dirname (exe);
}

char *ak_datadir_find (const char *src_rel, const char *inst_rel, int amode, char **tried_p)
{
    if (!inst_rel)
        inst_rel = src_rel;
    char *tried[4] = { NULL, NULL, NULL, NULL };
    const char *env = getenv ("AK_SOURCE_DIR");
    if (env && *env)
        tried[0] = ak_sprintf ("%s/%s", env, src_rel);
    char *bindir = ak_datadir_bindir ();
    if (bindir)
        tried[1] = ak_sprintf ("%s/../share/akfleet/%s", bindir, inst_rel);
#ifdef AK_SOURCE_DIR
    tried[2] = ak_sprintf ("%s/%s", AK_SOURCE_DIR, src_rel);
#endif
    if (bindir)
        tried[3] = ak_sprintf ("%s/../../%s", bindir, src_rel);
    free (bindir);
    char *found = NULL;
    for (int i = 0; i < 4 && !found; i++)
        if (tried[i] && access (tried[i], amode) == 0)
            found = realpath (tried[i], NULL);
    if (tried_p) {
        *tried_p = NULL;
        if (!found) {
            char *list = ak_strdup ("");
            for (int i = 0; i < 4; i++)
                if (tried[i]) {
                    char *next = ak_sprintf ("%s%s%s", list, *list ? ", " : "", tried[i]);
                    free (list);
                    list = next;
                }
            *tried_p = list;
        }
    }
    for (int i = 0; i < 4; i++)
        free (tried[i]);
    return found;
}
