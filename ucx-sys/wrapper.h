#include <uct/api/uct.h>
#include <ucp/api/ucp.h>
#include <ucm/api/ucm.h>
#include <ucs/config/global_opts.h>
