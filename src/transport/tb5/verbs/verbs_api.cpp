#include "transport/tb5/verbs/verbs_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>

#include "platform/verbs_library.hpp"

namespace trillion::tb5 {
namespace {

template <class F>
void resolve(const VerbsApi& api, F& fn, const char* name, bool required = true) {
  fn = reinterpret_cast<F>(dlsym(api.handle, name));
  if (!fn && required) throw std::runtime_error("no RDMA device: " + api.library + " lacks " + name);
}

}  // namespace

VerbsApi load_verbs(const std::string& library) {
  VerbsApi api;
  api.library = library;
  if (api.library.empty()) {
    const char* env = std::getenv("TB5_VERBS_LIBRARY");
    api.library = env && *env ? env : platform::default_verbs_library();
  }
  api.handle = dlopen(api.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api.handle) {
    const char* why = dlerror();
    throw std::runtime_error("no RDMA device: cannot load " + api.library + " (" + (why ? why : "?") + ")");
  }
  resolve(api, api.get_device_list, "ibv_get_device_list");
  resolve(api, api.free_device_list, "ibv_free_device_list");
  resolve(api, api.get_device_name, "ibv_get_device_name");
  resolve(api, api.open_device, "ibv_open_device");
  resolve(api, api.close_device, "ibv_close_device");
  resolve(api, api.query_device, "ibv_query_device", false);
  resolve(api, api.query_port, "ibv_query_port");
  resolve(api, api.query_gid, "ibv_query_gid");
  resolve(api, api.alloc_pd, "ibv_alloc_pd");
  resolve(api, api.dealloc_pd, "ibv_dealloc_pd");
  resolve(api, api.reg_mr, "ibv_reg_mr");
  resolve(api, api.dereg_mr, "ibv_dereg_mr");
  resolve(api, api.create_cq, "ibv_create_cq");
  resolve(api, api.destroy_cq, "ibv_destroy_cq");
  resolve(api, api.create_qp, "ibv_create_qp");
  resolve(api, api.destroy_qp, "ibv_destroy_qp");
  resolve(api, api.modify_qp, "ibv_modify_qp");
  resolve(api, api.post_send_fn, "ibv_post_send", false);
  resolve(api, api.post_recv_fn, "ibv_post_recv", false);
  resolve(api, api.poll_cq_fn, "ibv_poll_cq", false);
  resolve(api, api.device_ipv4, "tb5_verbs_device_ipv4", false);
  return api;
}

}  // namespace trillion::tb5
