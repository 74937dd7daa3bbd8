// The verbs entry points the backend calls, resolved with dlsym from the
// library opened at run time. Struct layouts come from <infiniband/verbs.h>
// (header only: nothing links against libibverbs).
#pragma once
#include <infiniband/verbs.h>

#include <string>

namespace trillion::tb5 {

struct VerbsApi {
  void* handle = nullptr;
  std::string library;
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;  // optional: the limits, when exported
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  // Exported by some stacks; rdma-core has them only as inline functions
  // through context->ops, which post_send() etc. below fall back to.
  int (*post_send_fn)(ibv_qp*, ibv_send_wr*, ibv_send_wr**) = nullptr;
  int (*post_recv_fn)(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**) = nullptr;
  int (*poll_cq_fn)(ibv_cq*, int, ibv_wc*) = nullptr;
  // Not verbs: a library may say which IPv4 address and prefix a device's
  // port has (addr in network order; 0 on success). The simulator does, since
  // its devices on one host are not kernel interfaces; elsewhere the address
  // comes from the GID table and the prefix from the interface holding it.
  int (*device_ipv4)(ibv_context*, uint32_t* addr, uint8_t* prefix) = nullptr;

  int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) const {
    return post_send_fn ? post_send_fn(qp, wr, bad) : qp->context->ops.post_send(qp, wr, bad);
  }
  int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) const {
    return post_recv_fn ? post_recv_fn(qp, wr, bad) : qp->context->ops.post_recv(qp, wr, bad);
  }
  int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) const {
    return poll_cq_fn ? poll_cq_fn(cq, n, wc) : cq->context->ops.poll_cq(cq, n, wc);
  }
};

// Opens `library` ("" = the platform default) and resolves every entry
// point; throws std::runtime_error("no RDMA device: ...") when it cannot.
// The handle stays open for the life of the process (a provider may keep
// threads or atexit handlers in it).
VerbsApi load_verbs(const std::string& library);

}  // namespace trillion::tb5
