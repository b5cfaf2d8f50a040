/* journal_lib.c - see journal_lib.h. */
#include "journal_lib.h"

#ifdef LD_HAVE_LIBSYSTEMD

#include "logdiff_config.h"

ld_journal_fns ld_sdj;

LD_DYNLIB_BINDER(bind_journal, ld_sdj, LD_JOURNAL_FUNCS)

static ld_dynlib lib = LD_DYNLIB_INIT(LD_SYSTEMD_SONAME, "journald's journals", bind_journal);

ld_status ld_journal_lib_need(ld_error *err)
{
    return ld_dynlib_need(&lib, err);
}

#else
typedef int ld_journal_lib_unused; /* built without libsystemd: nothing here */
#endif
