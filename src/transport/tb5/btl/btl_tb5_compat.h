/* btl/tb5: what differs between the Open MPI generations it builds for,
 * chosen at compile time from the installed headers (opal_config.h):
 *   4.1.x  BTL 3.1: receive callbacks (btl, tag, descriptor, cbdata);
 *          opal/mca/pmix/pmix.h with OPAL_PMIX_* keys and OPAL_* types.
 *   5.0.x  BTL 3.3: receive callbacks (btl, receive descriptor), whose
 *          endpoint and tag osc/rdma's active-message RDMA emulation reads;
 *          opal/mca/pmix/pmix-internal.h with PMIx's own keys and types.
 * The modex macros (OPAL_MODEX_SEND/RECV/RECV_VALUE) keep their names and
 * arguments in both; their status is 0 on success in both. */
#ifndef TRILLION_BTL_TB5_COMPAT_H
#define TRILLION_BTL_TB5_COMPAT_H

#include "opal_config.h"

#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/pmix/pmix-internal.h"
#define TB5_OMPI5 1
#define TB5_KEY_JOB_SIZE PMIX_JOB_SIZE
#define TB5_KEY_HOSTNAME PMIX_HOSTNAME
#define TB5_SCOPE_GLOBAL PMIX_GLOBAL
#define TB5_TYPE_UINT32 PMIX_UINT32
#define TB5_TYPE_STRING PMIX_STRING
#elif OPAL_MAJOR_VERSION == 4
#include "opal/mca/pmix/pmix.h"
#define TB5_OMPI5 0
#define TB5_KEY_JOB_SIZE OPAL_PMIX_JOB_SIZE
#define TB5_KEY_HOSTNAME OPAL_PMIX_HOSTNAME
#define TB5_SCOPE_GLOBAL OPAL_PMIX_GLOBAL
#define TB5_TYPE_UINT32 OPAL_UINT32
#define TB5_TYPE_STRING OPAL_STRING
/* The 4.1 modex macros call through the opal_pmix module and make
 * opal_value_t objects, which Open MPI 5 no longer has. Weak, so that this
 * plugin still loads into a 5.0 process and says which versions differ
 * (btl_tb5_version.c) instead of failing in dlopen with "undefined symbol:
 * opal_pmix"; neither is used there. (Functions are bound lazily.) */
#pragma weak opal_pmix
#pragma weak opal_value_t_class
#else
#error "btl/tb5 builds against Open MPI 4.1.x or 5.0.x"
#endif

/* OPAL_MODULE_DECLSPEC is gone in 5.0 and the plugin is built with hidden
 * visibility: the component struct is the one symbol Open MPI looks up. */
#define TB5_EXPORT __attribute__((visibility("default")))

#endif
