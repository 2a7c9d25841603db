/*  coordinator/commit.c: the participant protocol of the group commit
    (see commit.h). */
#include "commit.h"

int ak_commit_flush (const ak_commit_part_t *parts, size_t n, ak_txn_t *txn, ak_err_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (parts[i].ops->clear)
            parts[i].ops->clear (parts[i].self);
    for (size_t i = 0; i < n; i++) {
        int rc = parts[i].ops->flush ? parts[i].ops->flush (parts[i].self, txn, err) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

void ak_commit_rollback (const ak_commit_part_t *parts, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (parts[i].ops->rollback)
            parts[i].ops->rollback (parts[i].self);
}

void ak_commit_flushed (const ak_commit_part_t *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (parts[i].ops->flushed)
            parts[i].ops->flushed (parts[i].self);
}
