/* archive_lib.c - see archive_lib.h. */
#include "archive_lib.h"

#include "logdiff_config.h"

ld_archive_fns ld_la;

LD_DYNLIB_BINDER(bind_archive, ld_la, LD_ARCHIVE_FUNCS)

static ld_dynlib lib = LD_DYNLIB_INIT(LD_ARCHIVE_SONAME, "compressed and archived inputs", bind_archive);

ld_status ld_archive_lib_need(ld_error *err)
{
    return ld_dynlib_need(&lib, err);
}
