/* btl/tb5 module: endpoints, descriptors, send, and the core's upcalls
 * (delivery to the active-message callbacks; a dead peer ends the job). */
#include "btl_tb5.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/output.h"

mca_btl_base_module_error_cb_fn_t mca_btl_tb5_error_cb = NULL;
/* Set in finalize: the PML above is closed, descriptors acknowledged now
 * (its control fragments) are only freed, not handed back. */
static bool finalizing = false;

/* Connects the engine to rank `rank` of our job from its modex address and
 * makes its endpoint; false if it has no tb5 (disqualified), shares our
 * host, or no device reaches it. */
static bool connect_rank(mca_btl_tb5_component_t* c, uint32_t rank) {
  if (c->endpoints[rank]) return true;
  opal_process_name_t name = OPAL_PROC_MY_NAME;
  name.vpid = rank;
  uint8_t* addr = NULL;
  size_t size = 0;
  int rc;
  OPAL_MODEX_RECV(rc, &c->super.btl_version, &name, &addr, &size);
  if (OPAL_SUCCESS != rc) return false; /* the peer has no tb5: another BTL may reach it */
  char err[512] = "";
  const int ok = tb5_connect(c->handle, rank, addr, size, err, sizeof err);
  free(addr);
  if (ok != 0) {
    /* -1: no cable reaches it (the message names both hosts), 1: on this
     * host (btl/self's and sm's). Unreachable either way: Open MPI ends the
     * job in MPI_Init unless another BTL reaches the peer. (Exiting here
     * instead crashed mpiexec now and then: a rank gone during MPI_Init.) */
    if (ok < 0) opal_output(0, "btl tb5: %s", err);
    return false;
  }
  char* host = NULL;
  OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, TB5_KEY_HOSTNAME, &name, &host, TB5_TYPE_STRING);
  mca_btl_base_endpoint_t* ep = calloc(1, sizeof *ep);
  ep->rank = rank;
  ep->hostname = (OPAL_SUCCESS == rc && host) ? host : strdup("unknown host");
  c->endpoints[rank] = ep;
  return true;
}

static int module_add_procs(struct mca_btl_base_module_t* btl, size_t nprocs, struct opal_proc_t** procs,
                         struct mca_btl_base_endpoint_t** peers, opal_bitmap_t* reachable) {
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  /* Every peer of the job, at the first call. Open MPI adds procs lazily (at
   * a rank's first send to a peer), but the engine drops frames from a peer
   * it is not connected to: a rank whose first act is to receive (rank 0 of
   * the allreduce inside MPI_Comm_dup right after MPI_Init) would drop its
   * peer's messages and never send itself — a hang until the peer timeout.
   * The modex holds every rank's address once MPI_Init has exchanged it. */
  if (!c->connected_all) {
    c->connected_all = true;
    for (uint32_t r = 0; r < c->nranks; ++r)
      if (r != OPAL_PROC_MY_NAME.vpid) connect_rank(c, r);
  }
  for (size_t i = 0; i < nprocs; ++i) {
    opal_proc_t* p = procs[i];
    peers[i] = NULL;
    /* Our own job only (no dynamic processes), never ourselves (btl/self). */
    if (p->proc_name.jobid != OPAL_PROC_MY_NAME.jobid || p->proc_name.vpid == OPAL_PROC_MY_NAME.vpid) continue;
    const uint32_t rank = p->proc_name.vpid;
    if (rank >= c->nranks || !connect_rank(c, rank)) continue;
    mca_btl_base_endpoint_t* ep = c->endpoints[rank];
    ep->proc = p;
    peers[i] = ep;
    opal_bitmap_set_bit(reachable, (int)i);
  }
  return OPAL_SUCCESS;
}

static int module_del_procs(struct mca_btl_base_module_t* btl, size_t nprocs, struct opal_proc_t** procs,
                         struct mca_btl_base_endpoint_t** peers) {
  return OPAL_SUCCESS; /* endpoints live until finalize: late frames still find them */
}

static int module_finalize(struct mca_btl_base_module_t* btl) {
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  if (!c->handle) return OPAL_SUCCESS;
  /* Everything sent must be acknowledged before we say bye and go. */
  finalizing = true;
  if (!tb5_flush(c->handle, c->peer_timeout_ms * 1e-3))
    opal_output(0, "btl tb5: rank %u: some messages were not acknowledged before finalize", OPAL_PROC_MY_NAME.vpid);
  tb5_handle* h = c->handle;
  mca_btl_tb5_write_stats(h);
  free(c->stats_path);
  c->stats_path = NULL;
  c->handle = NULL;
  tb5_close(h);
  for (uint32_t r = 0; r < c->nranks; ++r)
    if (c->endpoints[r]) {
      free(c->endpoints[r]->hostname);
      free(c->endpoints[r]);
    }
  free(c->endpoints);
  c->endpoints = NULL;
  return OPAL_SUCCESS;
}

static int module_register_error(struct mca_btl_base_module_t* btl, mca_btl_base_module_error_cb_fn_t cb) {
  mca_btl_tb5_error_cb = cb;
  return OPAL_SUCCESS;
}

static mca_btl_base_descriptor_t* module_alloc(struct mca_btl_base_module_t* btl,
                                            struct mca_btl_base_endpoint_t* endpoint, uint8_t order, size_t size,
                                            uint32_t flags) {
  if (size > btl->btl_max_send_size) return NULL;
  mca_btl_tb5_frag_t* f = malloc(sizeof(mca_btl_tb5_frag_t) + size);
  if (!f) return NULL;
  OBJ_CONSTRUCT(&f->base, mca_btl_base_descriptor_t);
  f->segments[0].seg_addr.pval = (void*)(f + 1);
  f->segments[0].seg_len = size;
  f->endpoint = endpoint;
  f->base.des_segments = f->segments;
  f->base.des_segment_count = 1;
  f->base.des_flags = flags;
  f->base.order = MCA_BTL_NO_ORDER;
  return &f->base;
}

static int module_free(struct mca_btl_base_module_t* btl, mca_btl_base_descriptor_t* des) {
  mca_btl_tb5_frag_t* f = (mca_btl_tb5_frag_t*)des;
  OBJ_DESTRUCT(&f->base);
  free(f);
  return OPAL_SUCCESS;
}

/* Contiguous data is not packed (as btl/tcp does): the descriptor holds
 * ob1's header and points at the user's data, which the core copies once
 * for retransmission (module_send); only data the convertor must gather is
 * packed here. */
static mca_btl_base_descriptor_t* module_prepare_src(struct mca_btl_base_module_t* btl,
                                                  struct mca_btl_base_endpoint_t* endpoint,
                                                  struct opal_convertor_t* convertor, uint8_t order, size_t reserve,
                                                  size_t* size, uint32_t flags) {
  size_t max_data = *size;
  if (reserve + max_data > btl->btl_max_send_size) max_data = btl->btl_max_send_size - reserve;
  const bool in_place = !opal_convertor_need_buffers(convertor);
  mca_btl_base_descriptor_t* des = module_alloc(btl, endpoint, order, in_place ? reserve : reserve + max_data, flags);
  if (!des) return NULL;
  struct iovec iov = {.iov_base = in_place ? NULL : (char*)des->des_segments[0].seg_addr.pval + reserve,
                      .iov_len = max_data};
  uint32_t iov_count = 1;
  if (opal_convertor_pack(convertor, &iov, &iov_count, &max_data) < 0) {
    module_free(btl, des);
    return NULL;
  }
  *size = max_data;
  if (in_place) {
    mca_btl_tb5_frag_t* f = (mca_btl_tb5_frag_t*)des;
    f->segments[1].seg_addr.pval = iov.iov_base;
    f->segments[1].seg_len = max_data;
    des->des_segment_count = 2;
  } else {
    des->des_segments[0].seg_len = reserve + max_data;
  }
  return des;
}

static int send_pieces(struct mca_btl_base_endpoint_t* ep, mca_btl_base_tag_t tag, const struct tb5_piece* p,
                       size_t n) {
  char err[512] = "";
  if (tb5_send(mca_btl_tb5_component.handle, ep->rank, tag, p, n, err, sizeof err) != 0) {
    mca_btl_tb5_fatal(err);
    return OPAL_ERROR;
  }
  return OPAL_SUCCESS;
}

static int module_send(struct mca_btl_base_module_t* btl, struct mca_btl_base_endpoint_t* endpoint,
                    struct mca_btl_base_descriptor_t* des, mca_btl_base_tag_t tag) {
  struct tb5_piece p[2];
  size_t n = des->des_segment_count > 2 ? 2 : des->des_segment_count;
  for (size_t i = 0; i < n; ++i) {
    p[i].data = des->des_segments[i].seg_addr.pval;
    p[i].len = des->des_segments[i].seg_len;
  }
  /* The descriptor is ours until its callback: the core may send from it
   * and hand it back once acknowledged (mca_btl_tb5_sent), or copy it and
   * let us complete it now (by default: ob1 waits for a completion before
   * sending more of a message; tb5's engine.hpp, borrow_min). */
  char err[512] = "";
  const int rc = tb5_send_borrowed(mca_btl_tb5_component.handle, endpoint->rank, tag, p, n, des, err, sizeof err);
  if (rc < 0) {
    mca_btl_tb5_fatal(err);
    return OPAL_ERROR;
  }
  if (rc == 0) return OPAL_SUCCESS;
  /* Copied into the core: complete now, as btl/self does. */
  const int owned = des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
  if (des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK) des->des_cbfunc(btl, endpoint, des, OPAL_SUCCESS);
  if (owned) module_free(btl, des);
  return 1;
}

static int module_sendi(struct mca_btl_base_module_t* btl, struct mca_btl_base_endpoint_t* endpoint,
                     struct opal_convertor_t* convertor, void* header, size_t header_size, size_t payload_size,
                     uint8_t order, uint32_t flags, mca_btl_base_tag_t tag, mca_btl_base_descriptor_t** descriptor) {
  if (descriptor) *descriptor = NULL;
  if (header_size + payload_size > btl->btl_eager_limit) return OPAL_ERR_OUT_OF_RESOURCE;
  struct tb5_piece p[2] = {{header, header_size}, {NULL, 0}};
  size_t n = 1;
  char packed[32 * 1024];
  if (payload_size) {
    if (!opal_convertor_need_buffers(convertor)) {
      void* ptr = NULL;
      opal_convertor_get_current_pointer(convertor, &ptr);
      p[1].data = ptr;
      p[1].len = payload_size;
    } else {
      if (payload_size > sizeof packed) return OPAL_ERR_OUT_OF_RESOURCE;
      struct iovec iov = {.iov_base = packed, .iov_len = payload_size};
      uint32_t iov_count = 1;
      size_t max_data = payload_size;
      if (opal_convertor_pack(convertor, &iov, &iov_count, &max_data) < 0) return OPAL_ERROR;
      p[1].data = packed;
      p[1].len = max_data;
    }
    n = 2;
  }
  return send_pieces(endpoint, tag, p, n);
}

/* An emulated RDMA write: ob1's PUT protocol names the receiver's buffer
 * (no registration: tb5 has none), and the core carries the bytes there in
 * frames the receiver copies straight into place, sent from the caller's
 * memory with no copy (the data stays untouched until the completion). What
 * this saves against the send pipeline: the sender's copy into the core,
 * the receiver's unpacking by ob1, and ob1's wait for each 64 KiB fragment's
 * completion before the next (the whole put streams at the window's rate).
 * The completion runs once every frame is acknowledged, i.e. the bytes are
 * in place at the peer. A put request is told apart from a descriptor in
 * mca_btl_tb5_sent by the low bit of its cookie (both are malloc'd). */
typedef struct {
  mca_btl_base_endpoint_t* endpoint;
  void* local_address;
  mca_btl_base_registration_handle_t* local_handle;
  mca_btl_base_rdma_completion_fn_t cbfunc;
  void *cbcontext, *cbdata;
} tb5_put_request;

static int module_put(struct mca_btl_base_module_t* btl, struct mca_btl_base_endpoint_t* endpoint,
                      void* local_address, uint64_t remote_address,
                      struct mca_btl_base_registration_handle_t* local_handle,
                      struct mca_btl_base_registration_handle_t* remote_handle, size_t size, int flags, int order,
                      mca_btl_base_rdma_completion_fn_t cbfunc, void* cbcontext, void* cbdata) {
  (void)remote_handle, (void)flags, (void)order;
  if (size > btl->btl_put_limit) return OPAL_ERR_BAD_PARAM;
  tb5_put_request* r = malloc(sizeof *r);
  if (!r) return OPAL_ERR_OUT_OF_RESOURCE;
  *r = (tb5_put_request){endpoint, local_address, local_handle, cbfunc, cbcontext, cbdata};
  char err[512] = "";
  const int rc = tb5_put(mca_btl_tb5_component.handle, endpoint->rank, remote_address, local_address, size,
                         (void*)((uintptr_t)r | 1), err, sizeof err);
  if (rc == 0) return OPAL_SUCCESS;
  free(r);
  if (rc < 0) {
    mca_btl_tb5_fatal(err);
    return OPAL_ERROR;
  }
  return OPAL_ERR_UNREACH; /* the peer said bye */
}

mca_btl_base_module_t mca_btl_tb5_module = {
    .btl_component = &mca_btl_tb5_component.super,
    .btl_add_procs = module_add_procs,
    .btl_del_procs = module_del_procs,
    .btl_finalize = module_finalize,
    .btl_alloc = module_alloc,
    .btl_free = module_free,
    .btl_prepare_src = module_prepare_src,
    .btl_send = module_send,
    .btl_sendi = module_sendi,
    .btl_put = module_put,
    .btl_dump = mca_btl_base_dump,
    .btl_register_error = module_register_error,
};

void mca_btl_tb5_deliver(void* ctx, uint32_t peer, uint8_t tag, const void* data, size_t len) {
  mca_btl_base_segment_t seg = {.seg_addr.pval = (void*)data, .seg_len = len};
  mca_btl_active_message_callback_t* reg = mca_btl_base_active_message_trigger + tag;
  if (!reg->cbfunc) return;
#if TB5_OMPI5
  /* The sender's endpoint: osc/rdma's active-message RDMA emulation answers
   * a request on it (and aborts if it is NULL); the tag, as btl/tcp does. */
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  const mca_btl_base_receive_descriptor_t des = {
      .endpoint = peer < c->nranks ? c->endpoints[peer] : NULL,
      .des_segments = &seg,
      .des_segment_count = 1,
      .tag = tag,
      .cbdata = reg->cbdata,
  };
  reg->cbfunc(&mca_btl_tb5_module, &des);
#else
  mca_btl_base_descriptor_t des;
  memset(&des, 0, sizeof des);
  des.des_segments = &seg;
  des.des_segment_count = 1;
  reg->cbfunc(&mca_btl_tb5_module, tag, &des, reg->cbdata);
#endif
}

void mca_btl_tb5_sent(void* ctx, void* descriptor) {
  if ((uintptr_t)descriptor & 1) { /* a put (module_put) */
    tb5_put_request* r = (tb5_put_request*)((uintptr_t)descriptor & ~(uintptr_t)1);
    if (r->cbfunc && !finalizing)
      r->cbfunc(&mca_btl_tb5_module, r->endpoint, r->local_address, r->local_handle, r->cbcontext, r->cbdata,
                OPAL_SUCCESS);
    free(r);
    return;
  }
  mca_btl_base_descriptor_t* des = descriptor;
  mca_btl_tb5_frag_t* f = descriptor;
  const int owned = des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
  if (des->des_cbfunc && !finalizing) des->des_cbfunc(&mca_btl_tb5_module, f->endpoint, des, OPAL_SUCCESS);
  if (owned) module_free(&mca_btl_tb5_module, des);
}

void mca_btl_tb5_peer_dead(void* ctx, uint32_t peer, double silent_seconds, const char* detail) {
  mca_btl_tb5_component_t* c = &mca_btl_tb5_component;
  mca_btl_base_endpoint_t* ep = peer < c->nranks ? c->endpoints[peer] : NULL;
  char msg[1024];
  snprintf(msg, sizeof msg,
           "btl tb5: rank %u (%s) is dead: no frame from it for %.1f s (btl_tb5_peer_timeout_ms=%u; %s); ending the job",
           peer, ep ? ep->hostname : "unknown host", silent_seconds, c->peer_timeout_ms, detail ? detail : "");
  fprintf(stderr, "[rank %u on %s] %s\n", OPAL_PROC_MY_NAME.vpid, opal_process_info.nodename, msg);
  fflush(stderr);
  /* An error exit, not the PML's error handler: ob1's aborts with 255, which
   * reads as death by a signal; mpirun, seeing a rank exit non-zero without
   * MPI_Finalize, ends the whole job (and reports the exit). */
  _exit(1);
}

void mca_btl_tb5_fatal(const char* what) {
  fprintf(stderr, "[rank %u on %s] btl tb5: %s; ending the job\n", OPAL_PROC_MY_NAME.vpid,
          opal_process_info.nodename, what);
  fflush(stderr);
  _exit(1); /* as in mca_btl_tb5_peer_dead */
}
