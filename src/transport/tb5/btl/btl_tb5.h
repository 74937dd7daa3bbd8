/* btl/tb5: the Open MPI glue over the tb5 transport (src/transport/tb5/api),
 * for Open MPI 4.1 (BTL API 3.1) and 5.0 (BTL API 3.3): btl_tb5_compat.h
 * holds what differs. Send/receive, and put for ob1's large messages
 * (an emulated RDMA write, module_put); no get or atomics, so one-sided
 * windows run on osc/pt2pt (4.1) or on osc/rdma's active-message RDMA
 * emulation over the send path (5.0). Everything below the descriptors —
 * frames, reliability, fragmentation, liveness — lives in the C++ core. */
#ifndef TRILLION_BTL_TB5_H
#define TRILLION_BTL_TB5_H

#include "opal_config.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/proc.h"

#include "btl_tb5_compat.h"

#include "transport/tb5/api/tb5_api.h"

BEGIN_C_DECLS

struct mca_btl_base_endpoint_t {
  uint32_t rank;        /* the peer's vpid: its rank in the job */
  opal_proc_t* proc;
  char* hostname;
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;

typedef struct {
  mca_btl_base_descriptor_t base;
  mca_btl_base_segment_t segments[2]; /* [1]: the user's data, sent in place */
  mca_btl_base_endpoint_t* endpoint;
  /* data follows */
} mca_btl_tb5_frag_t;

typedef struct {
  mca_btl_base_component_3_0_0_t super;
  /* MCA parameters (docs/tb5.md) */
  char* backend;
  char* if_include;
  char* verbs_library;
  char* verbs_device;
  char* backend_in_use; /* set at init, read by --metrics through MPI_T */
  unsigned mtu, window, rto_us, rto_max_ms, heartbeat_ms, peer_timeout_ms;
  double inject_loss, inject_duplicate, inject_reorder;
  unsigned inject_seed;
  char* verbs_gid_index;
  unsigned payload_hash;
  unsigned local_peers, initial_seq; /* testing */
  char* stats_file;                  /* testing: counters written at finalize */
  char* stats_path;                  /* its copy, taken at init */
  /* state */
  tb5_handle* handle;
  uint32_t nranks;
  mca_btl_base_endpoint_t** endpoints; /* by rank */
  bool connected_all;                  /* every peer connected (first add_procs) */
} mca_btl_tb5_component_t;

TB5_EXPORT extern mca_btl_tb5_component_t mca_btl_tb5_component;
extern mca_btl_base_module_t mca_btl_tb5_module;
extern mca_btl_base_module_error_cb_fn_t mca_btl_tb5_error_cb;

/* Whether the Open MPI running this process is the one whose headers built
 * this plugin (btl_tb5_version.c); if not, prints why, naming both versions,
 * and returns false. Calls nothing of Open MPI's before it knows. */
bool mca_btl_tb5_version_ok(void);

/* The core's upcalls (btl_tb5_module.c). */
void mca_btl_tb5_deliver(void* ctx, uint32_t peer, uint8_t tag, const void* data, size_t len);
void mca_btl_tb5_peer_dead(void* ctx, uint32_t peer, double silent_seconds, const char* detail);
void mca_btl_tb5_sent(void* ctx, void* descriptor);
void mca_btl_tb5_fatal(const char* what);
/* btl_tb5_stats_file: the counters (MPI_T's btl_tb5_* variables) to a file. */
void mca_btl_tb5_write_stats(tb5_handle* h);

END_C_DECLS
#endif
