// Built without <infiniband/verbs.h>: the verbs backend reports itself absent.
#include <stdexcept>

#include "transport/tb5/verbs/verbs_link.hpp"

namespace trillion::tb5 {

std::unique_ptr<Link> open_verbs_link(const VerbsOptions&, uint32_t, uint32_t) {
  throw std::runtime_error("no RDMA device: built without <infiniband/verbs.h>");
}

std::unique_ptr<Link> open_verbs_link(const std::string&, const std::string&, size_t, uint32_t, uint32_t) {
  throw std::runtime_error("no RDMA device: built without <infiniband/verbs.h>");
}

}  // namespace trillion::tb5
