/* btl/tb5 component: parameters, opening the transport, the modex, progress. */
#include "btl_tb5.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/util/output.h"

static int component_register(void);
static int component_open(void);
static int component_close(void);
static mca_btl_base_module_t** component_init(int* num_btls, bool enable_progress_threads, bool enable_mpi_threads);
static int component_progress(void);

mca_btl_tb5_component_t mca_btl_tb5_component = {
    .super =
        {
            .btl_version =
                {
                    MCA_BTL_DEFAULT_VERSION("tb5"),
                    .mca_open_component = component_open,
                    .mca_close_component = component_close,
                    .mca_register_component_params = component_register,
                },
            .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_NONE},
            .btl_init = component_init,
            .btl_progress = component_progress,
        },
};

static void reg_string(const char* name, const char* help, const char* dflt, char** storage) {
  *storage = (char*)dflt;
  (void)mca_base_component_var_register(&mca_btl_tb5_component.super.btl_version, name, help,
                                        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4,
                                        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void reg_unsigned(const char* name, const char* help, unsigned dflt, unsigned* storage) {
  *storage = dflt;
  (void)mca_base_component_var_register(&mca_btl_tb5_component.super.btl_version, name, help,
                                        MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, 0, 0, OPAL_INFO_LVL_4,
                                        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void reg_double(const char* name, const char* help, double* storage) {
  *storage = 0;
  (void)mca_base_component_var_register(&mca_btl_tb5_component.super.btl_version, name, help,
                                        MCA_BASE_VAR_TYPE_DOUBLE, NULL, 0, 0, OPAL_INFO_LVL_5,
                                        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/* The transport's counters as MPI_T performance variables (btl_tb5_<name>,
 * class GENERIC: Open MPI reads a GENERIC variable's value as is, where a
 * COUNTER's handle would report only what accrued since it was bound, and
 * --metrics binds one at the end of the run). Tests assert from them that
 * the faults they asked for happened (a misspelled MCA name injects none). */
static const struct {
  const char* name;
  const char* help;
  size_t offset;
} tb5_pvars[] = {
    {"frames_sent", "frames sent, retransmissions included", offsetof(struct tb5_stats, frames_sent)},
    {"retransmissions", "frames sent again (lost, or acknowledged too late)", offsetof(struct tb5_stats, retransmissions)},
    {"duplicates_dropped", "frames received twice and dropped", offsetof(struct tb5_stats, duplicates_dropped)},
    {"reordered", "frames received ahead of a missing one", offsetof(struct tb5_stats, reordered)},
    {"bad_frames", "frames with a bad checksum or header", offsetof(struct tb5_stats, bad_frames)},
    {"injected_lost", "frames dropped by btl_tb5_inject_loss", offsetof(struct tb5_stats, injected_lost)},
    {"injected_duplicated", "frames sent twice by btl_tb5_inject_duplicate", offsetof(struct tb5_stats, injected_duplicated)},
    {"injected_reordered", "frames delayed by btl_tb5_inject_reorder", offsetof(struct tb5_stats, injected_reordered)},
    {"sim_lost", "verbs simulator: SENDs it dropped (TB5_SIM_LOSS)", offsetof(struct tb5_stats, sim_lost)},
    {"sim_duplicated", "verbs simulator: SENDs it duplicated (TB5_SIM_DUPLICATE)", offsetof(struct tb5_stats, sim_duplicated)},
    {"sim_reordered", "verbs simulator: SENDs it reordered (TB5_SIM_REORDER)", offsetof(struct tb5_stats, sim_reordered)},
    {"sim_stalls", "verbs simulator: stalls it injected (TB5_SIM_STALL)", offsetof(struct tb5_stats, sim_stalls)},
    {"puts_placed", "puts (ob1's RDMA protocol for large messages) received into place", offsetof(struct tb5_stats, puts_placed)},
};

static int pvar_get(const struct mca_base_pvar_t* pvar, void* value, void* obj) {
  (void)obj;
  struct tb5_stats s;
  memset(&s, 0, sizeof s);
  if (mca_btl_tb5_component.handle) tb5_get_stats(mca_btl_tb5_component.handle, &s);
  const size_t i = (size_t)(uintptr_t)pvar->ctx;
  uint64_t v = 0;
  memcpy(&v, (const char*)&s + tb5_pvars[i].offset, sizeof v);
  *(unsigned long long*)value = (unsigned long long)v;
  return OPAL_SUCCESS;
}

/* btl_tb5_stats_file (testing): the same counters written at finalize, one
 * "name value" line each, to the file named ("%r" becomes the rank), so a
 * test of any MPI program can check that its faults were injected. */
void mca_btl_tb5_write_stats(tb5_handle* h) {
  const char* pattern = mca_btl_tb5_component.stats_path;
  if (!pattern || !*pattern) return;
  char path[1024];
  size_t n = 0;
  for (const char* p = pattern; *p && n + 12 < sizeof path; ++p) {
    if (p[0] == '%' && p[1] == 'r') {
      n += (size_t)snprintf(path + n, sizeof path - n, "%u", (unsigned)OPAL_PROC_MY_NAME.vpid);
      ++p;
    } else {
      path[n++] = *p;
    }
  }
  path[n] = '\0';
  struct tb5_stats s;
  tb5_get_stats(h, &s);
  FILE* f = fopen(path, "w");
  if (!f) {
    opal_output(0, "btl tb5: cannot write btl_tb5_stats_file %s", path);
    return;
  }
  for (size_t i = 0; i < sizeof tb5_pvars / sizeof tb5_pvars[0]; ++i) {
    uint64_t v = 0;
    memcpy(&v, (const char*)&s + tb5_pvars[i].offset, sizeof v);
    fprintf(f, "btl_tb5_%s %llu\n", tb5_pvars[i].name, (unsigned long long)v);
  }
  fclose(f);
}

static void register_pvars(void) {
  for (size_t i = 0; i < sizeof tb5_pvars / sizeof tb5_pvars[0]; ++i)
    (void)mca_base_component_pvar_register(&mca_btl_tb5_component.super.btl_version, tb5_pvars[i].name,
                                           tb5_pvars[i].help, OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_GENERIC,
                                           MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
                                           MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, pvar_get,
                                           NULL, NULL, (void*)(uintptr_t)i);
}

static int component_register(void) {
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  /* First, before any call into Open MPI: a plugin built for another Open
   * MPI says so and is left out (silently, as far as Open MPI goes). */
  if (!mca_btl_tb5_version_ok()) return OPAL_ERR_NOT_AVAILABLE;
  mca_base_var_group_component_register(&c->super.btl_version, "RDMA over Thunderbolt 5 (verbs UC) or UDP, with its own reliability");
  reg_string("backend", "udp, verbs, or auto (verbs if an RDMA device opens, else udp)", "auto", &c->backend);
  reg_string("if_include", "udp: interface names, IPv4 addresses or subnets (a.b.c.d/n), comma-separated (empty: every non-loopback interface)", "",
             &c->if_include);
  reg_string("verbs_library", "verbs library to dlopen (empty: librdma.dylib on macOS, libibverbs.so.1 on Linux)",
             "", &c->verbs_library);
  reg_string("verbs_device", "RDMA device names, comma-separated, e.g. rdma_en2,rdma_en3 (empty: every device with an active port)", "", &c->verbs_device);
  reg_string("verbs_gid_index", "GID index on every device (empty: each device's IPv4-mapped entry)", "", &c->verbs_gid_index);
  reg_string("backend_in_use", "read-only: the backend this process uses (set at init)", "none",
             &c->backend_in_use);
  reg_unsigned("mtu", "largest frame in bytes, header included (0: 65507 for udp, 4096 for verbs, at most what a device takes)",
               0, &c->mtu);
  reg_unsigned("window", "frames in flight per peer, 1..64 (0: udp what the receive buffer holds, verbs 24)", 0, &c->window);
  reg_unsigned("rto_us", "first retransmission timeout, microseconds (doubles per try)", 2000, &c->rto_us);
  reg_unsigned("rto_max_ms", "retransmission timeout ceiling, milliseconds", 200, &c->rto_max_ms);
  reg_unsigned("heartbeat_ms", "interval of the heartbeat thread, milliseconds", 500, &c->heartbeat_ms);
  reg_unsigned("peer_timeout_ms", "a peer silent this long is dead and the job ends, milliseconds", 10000,
               &c->peer_timeout_ms);
  reg_double("inject_loss", "testing: probability of dropping each frame sent", &c->inject_loss);
  reg_double("inject_duplicate", "testing: probability of sending a frame twice", &c->inject_duplicate);
  reg_double("inject_reorder", "testing: probability of delaying a frame behind the next", &c->inject_reorder);
  reg_unsigned("inject_seed", "testing: seed of the fault injection (0: 1)", 0, &c->inject_seed);
  reg_unsigned("local_peers", "testing: reach ranks on the same host through tb5 too (0: leave them to btl/self and sm)", 0,
               &c->local_peers);
  reg_unsigned("payload_hash",
               "frame checksums cover payloads (XXH3): 0 unless the link checks them itself (verbs yes; udp no: "
               "UDP's checksum covers them, as TCP's covers btl/tcp), 1 always, 2 never",
               0, &c->payload_hash);
  reg_unsigned("initial_seq", "testing: first sequence number of every link (the same on every rank)", 0, &c->initial_seq);
  reg_string("stats_file", "testing: write the transport's counters here at finalize (%r: the rank)", "",
             &c->stats_file);
  register_pvars();

  mca_btl_base_module_t* m = &mca_btl_tb5_module;
  m->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT;
  m->btl_eager_limit = 32 * 1024;
  m->btl_rndv_eager_limit = 32 * 1024;
  /* 128 bytes under 64 KiB: a send and ob1's header fit one udp frame (65507
   * bytes with tb5's), so the receiver takes it without reassembly. */
  m->btl_max_send_size = 64 * 1024 - 128;
  m->btl_rdma_pipeline_send_length = 64 * 1024 - 128;
  /* Messages above the eager limit go by ob1's PUT protocol (module_put):
   * the receiver asks for its buffer in pieces of rdma_pipeline_frag_size,
   * a few at a time (pml_ob1_recv_pipeline_depth, 4): 1 MiB pieces keep a
   * whole window streaming. No registration (btl_register_mem is NULL), so
   * ob1 takes the RDMA protocol for any contiguous buffer. Not flagged
   * RDMA_REMOTE_COMPLETION: Open MPI 5's osc/rdma keeps its
   * active-message emulation over the send path. */
  m->btl_rdma_pipeline_frag_size = 1024 * 1024;
  m->btl_min_rdma_pipeline_size = 0;
  m->btl_put_limit = 1024 * 1024 * 1024;
  m->btl_put_alignment = 0;
  m->btl_put_local_registration_threshold = 0;
  m->btl_registration_handle_size = 0;
  m->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_PUT;
  m->btl_bandwidth = 9000;
  m->btl_latency = 5;
  return mca_btl_base_param_register(&c->super.btl_version, m);
}

static int component_open(void) {
  mca_btl_tb5_component.handle = NULL;
  mca_btl_tb5_component.endpoints = NULL;
  return OPAL_SUCCESS;
}

static int component_close(void) { return OPAL_SUCCESS; }

static mca_btl_base_module_t** component_init(int* num_btls, bool enable_progress_threads, bool enable_mpi_threads) {
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  *num_btls = 0;
  if (enable_mpi_threads) {
    opal_output(0, "btl tb5: MPI_THREAD_MULTIPLE is not supported (use MPI_THREAD_SERIALIZED); tb5 disabled");
    return NULL;
  }
  uint32_t nprocs = 0, *u32 = &nprocs;
  int rc;
  /* The job's size (ranks are vpids 0..size-1 of our job). */
  opal_process_name_t wildcard = {.jobid = OPAL_PROC_MY_NAME.jobid, .vpid = OPAL_VPID_WILDCARD};
  OPAL_MODEX_RECV_VALUE(rc, TB5_KEY_JOB_SIZE, &wildcard, &u32, TB5_TYPE_UINT32);
  if (OPAL_SUCCESS != rc || nprocs == 0 || OPAL_PROC_MY_NAME.vpid >= nprocs) {
    opal_output(0, "btl tb5: cannot learn the job size; tb5 disabled");
    return NULL;
  }
  struct tb5_options o = {
      .backend = c->backend,
      .if_include = c->if_include,
      .verbs_library = c->verbs_library,
      .verbs_device = c->verbs_device,
      .mtu = c->mtu,
      .window = c->window,
      .rto = c->rto_us * 1e-6,
      .rto_max = c->rto_max_ms * 1e-3,
      .heartbeat = c->heartbeat_ms * 1e-3,
      .peer_timeout = c->peer_timeout_ms * 1e-3,
      .loss = c->inject_loss,
      .duplicate = c->inject_duplicate,
      .reorder = c->inject_reorder,
      .seed = c->inject_seed,
      .verbs_gid_index = c->verbs_gid_index,
      .local_peers = c->local_peers,
      .initial_seq = c->initial_seq,
      .payload_hash = c->payload_hash,
  };
  char err[512] = "";
  const uint32_t self = OPAL_PROC_MY_NAME.vpid;
  c->handle = tb5_open(&o, self, nprocs, mca_btl_tb5_deliver, mca_btl_tb5_peer_dead, NULL, err, sizeof err);
  if (!c->handle) {
    /* Disqualify, saying why: "no RDMA device", a bad btl_tb5_if_include... */
    opal_output(0, "btl tb5 on %s: %s; tb5 disabled", opal_process_info.nodename, err);
    return NULL;
  }
  tb5_set_sent_callback(c->handle, mca_btl_tb5_sent, NULL);
  /* A copy: at finalize the variable's own string is already freed (its
   * registration ends first), and that is when the counters are written. */
  c->stats_path = c->stats_file && *c->stats_file ? strdup(c->stats_file) : NULL;
  c->nranks = nprocs;
  c->endpoints = calloc(nprocs, sizeof(mca_btl_base_endpoint_t*));
  c->connected_all = false;
  c->backend_in_use = strdup(tb5_backend(c->handle));
  opal_output_verbose(10, opal_btl_base_framework.framework_output, "btl tb5: rank %u on %s", self,
                      tb5_describe(c->handle));
  uint8_t addr[4096];
  const size_t len = tb5_address(c->handle, addr, sizeof addr);
  OPAL_MODEX_SEND(rc, TB5_SCOPE_GLOBAL, &c->super.btl_version, addr, len);
  if (OPAL_SUCCESS != rc || len == 0) {
    opal_output(0, "btl tb5: cannot publish the address; tb5 disabled");
    tb5_close(c->handle);
    c->handle = NULL;
    return NULL;
  }
  mca_btl_base_module_t** btls = malloc(sizeof(mca_btl_base_module_t*));
  btls[0] = &mca_btl_tb5_module;
  *num_btls = 1;
  return btls;
}

static int component_progress(void) {
  if (!mca_btl_tb5_component.handle) return 0;
  char err[512] = "";
  const int n = tb5_progress(mca_btl_tb5_component.handle, err, sizeof err);
  if (n < 0) mca_btl_tb5_fatal(err);
  return n < 0 ? 0 : n;
}
