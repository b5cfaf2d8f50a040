/* backend.c - what every backend of backend.h shares. */
#include "backend.h"

void ld_backend_destroy(ld_backend *be)
{
    if (be) be->ops->destroy(be);
}

const char *ld_backend_name(const ld_backend *be)
{
    return be->ops->name;
}
