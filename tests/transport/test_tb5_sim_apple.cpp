// The verbs simulator's Apple profile (src/transport/tb5/sim/verbs_sim.hpp),
// each limit shown enforced through the verbs calls tb5 makes: queue pairs
// and memory regions per device, the send queue's depth on every post, 63
// posted receives, path MTU 1024 and 4 KiB SENDs, Apple's GID table (and an
// RTR from its link-local entry timing out), UC receives taken at arrival
// (a SEND that found no receive is gone even if one is posted before the
// next poll), cables that reach only their other end, error completions
// that break a queue pair, and the roce profile's table. argv[1]: the
// simulator. CTest runs it clean and again with TB5_SIM_SEND_ERROR=1 (only
// the case that needs it).
#define BOOST_TEST_MODULE tb5_sim_apple
#include <boost/test/unit_test.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/tb5/verbs/verbs_api.hpp"

using namespace trillion::tb5;
namespace utf = boost::unit_test;

namespace {

std::string sim_path() {
  const auto& m = utf::framework::master_test_suite();
  BOOST_REQUIRE_MESSAGE(m.argc > 1, "usage: test_tb5_sim_apple -- <path of libtb5_verbs_sim.so>");
  return m.argv[1];
}

VerbsApi& api() {
  static VerbsApi a = load_verbs(sim_path());
  return a;
}

uint64_t counter(const char* name) {
  auto f = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(api().handle, "tb5_sim_counter"));
  BOOST_REQUIRE(f);
  return f(name);
}

bool send_errors_on() { return std::getenv("TB5_SIM_SEND_ERROR") != nullptr; }

// One simulated device of the current host (TB5_SIM_HOST), with a protection
// domain, one completion queue and one registered buffer of 64 slots of 8 KiB.
struct Dev {
  explicit Dev(const std::string& name = "") {
    int n = 0;
    ibv_device** list = api().get_device_list(&n);
    BOOST_REQUIRE(n > 0);
    ibv_device* dev = list[0];
    for (int i = 0; i < n; ++i)
      if (name == api().get_device_name(list[i])) dev = list[i];
    ctx = api().open_device(dev);
    api().free_device_list(list);
    pd = api().alloc_pd(ctx);
    cq = api().create_cq(ctx, 1024, nullptr, nullptr, 0);
    buf.resize(64 * 8192);
    mr = api().reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    BOOST_REQUIRE(mr);
  }
  ~Dev() {
    for (ibv_qp* q : qps) api().destroy_qp(q);
    api().dereg_mr(mr);
    api().destroy_cq(cq);
    api().dealloc_pd(pd);
    api().close_device(ctx);
  }
  ibv_qp* qp(uint32_t send_wr = 32, uint32_t recv_wr = 32) {
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_UC;
    qa.cap.max_send_wr = send_wr;
    qa.cap.max_recv_wr = recv_wr;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    ibv_qp* q = api().create_qp(pd, &qa);
    if (!q) return nullptr;
    qps.push_back(q);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    BOOST_REQUIRE_EQUAL(api().modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    return q;
  }
  ibv_gid gid(int index) {
    ibv_gid g{};
    BOOST_REQUIRE_EQUAL(api().query_gid(ctx, 1, index, &g), 0);
    return g;
  }
  // RTR towards (to, their) and RTS; the RTR's error, if any.
  int connect(ibv_qp* q, Dev& to, ibv_qp* their, int sgid = 1, ibv_mtu mtu = IBV_MTU_1024) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = mtu;
    at.dest_qp_num = their->qp_num;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = to.gid(1);
    at.ah_attr.grh.sgid_index = uint8_t(sgid);
    at.ah_attr.port_num = 1;
    if (int e = api().modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
      return e;
    at = {};
    at.qp_state = IBV_QPS_RTS;
    return api().modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  int send(ibv_qp* q, size_t len, uint64_t id, int slot = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + slot * 8192), uint32_t(len), mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return api().post_send(q, &wr, &bad);
  }
  int recv(ibv_qp* q, uint64_t id, int slot = 32) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + slot * 8192), 8192, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return api().post_recv(q, &wr, &bad);
  }
  std::vector<ibv_wc> poll() {
    std::vector<ibv_wc> out;
    ibv_wc wc[16];
    for (int n; (n = api().poll_cq(cq, 16, wc)) > 0;) out.insert(out.end(), wc, wc + n);
    return out;
  }
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<uint8_t> buf;
  ibv_mr* mr = nullptr;
  std::vector<ibv_qp*> qps;
};

size_t count(const std::vector<ibv_wc>& wcs, ibv_wc_opcode op, ibv_wc_status st = IBV_WC_SUCCESS) {
  size_t n = 0;
  for (const auto& w : wcs) n += w.opcode == op && w.status == st;
  return n;
}

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

}  // namespace

BOOST_AUTO_TEST_CASE(the_device_reports_apples_limits, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  ibv_device_attr da{};
  BOOST_REQUIRE(api().query_device);
  BOOST_REQUIRE_EQUAL(api().query_device(d.ctx, &da), 0);
  BOOST_TEST(da.max_qp == 10);
  BOOST_TEST(da.max_mr == 8);
  ibv_port_attr pa{};
  BOOST_REQUIRE_EQUAL(api().query_port(d.ctx, 1, &pa), 0);
  BOOST_TEST(int(pa.active_mtu) == int(IBV_MTU_1024));
  BOOST_TEST(pa.max_msg_sz == 4096u);
  BOOST_TEST(pa.gid_tbl_len == 16);
}

BOOST_AUTO_TEST_CASE(queue_pairs_per_device_are_limited, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  for (int i = 0; i < 10; ++i) BOOST_REQUIRE(d.qp());
  errno = 0;
  BOOST_TEST(!d.qp());  // the eleventh
  BOOST_TEST(errno == ENOMEM);
  api().destroy_qp(d.qps.back());
  d.qps.pop_back();
  BOOST_TEST(d.qp());  // one freed, one made
}

BOOST_AUTO_TEST_CASE(memory_regions_per_device_are_limited, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;  // holds one
  std::vector<uint8_t> b(4096);
  std::vector<ibv_mr*> mrs;
  for (int i = 0; i < 7; ++i) {
    mrs.push_back(api().reg_mr(d.pd, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE));
    BOOST_REQUIRE(mrs.back());
  }
  errno = 0;
  BOOST_TEST(!api().reg_mr(d.pd, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE));  // the ninth
  BOOST_TEST(errno == ENOMEM);
  for (ibv_mr* m : mrs) api().dereg_mr(m);
}

BOOST_AUTO_TEST_CASE(the_send_queue_depth_is_checked_on_every_post, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  errno = 0;
  BOOST_TEST(!d.qp(33));  // more than 32 asked at creation
  BOOST_TEST(errno == EINVAL);
  ibv_qp* a = d.qp();
  ibv_qp* b = d.qp();
  BOOST_REQUIRE_EQUAL(d.connect(a, d, b), 0);
  // 32 sends outstanding (completions not polled): the 33rd is refused.
  for (int i = 0; i < 32; ++i) BOOST_REQUIRE_EQUAL(d.send(a, 100, uint64_t(i)), 0);
  BOOST_TEST(d.send(a, 100, 99) == ENOMEM);
  BOOST_TEST(counter("sq_full") > 0u);
  // Polling the completions frees the places.
  BOOST_TEST(count(d.poll(), IBV_WC_SEND) == 32u);
  BOOST_TEST(d.send(a, 100, 100) == 0);
}

BOOST_AUTO_TEST_CASE(receives_beyond_63_fail, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  errno = 0;
  BOOST_TEST(!d.qp(32, 64));
  ibv_qp* q = d.qp(32, 63);
  BOOST_REQUIRE(q);
  for (int i = 0; i < 63; ++i) BOOST_REQUIRE_EQUAL(d.recv(q, uint64_t(i), i), 0);
  BOOST_TEST(d.recv(q, 63, 63) == ENOMEM);
}

BOOST_AUTO_TEST_CASE(path_mtu_1024_and_sends_of_4_kib, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  ibv_qp* a = d.qp();
  ibv_qp* b = d.qp();
  BOOST_TEST(d.connect(a, d, b, 1, IBV_MTU_2048) == EINVAL);  // more than the path takes
  ibv_qp* c = d.qp();
  BOOST_REQUIRE_EQUAL(d.connect(c, d, b), 0);
  BOOST_TEST(d.send(c, 4096, 1) == 0);
  BOOST_TEST(d.send(c, 4097, 2) == EINVAL);
}

BOOST_AUTO_TEST_CASE(the_gid_table_is_apples, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  const ibv_gid g0 = d.gid(0), g1 = d.gid(1), g2 = d.gid(2);
  BOOST_TEST(g0.raw[0] == 0xfe);  // fe80::, link-local
  BOOST_TEST(g0.raw[1] == 0x80);
  const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  BOOST_TEST(std::memcmp(g1.raw, mapped, 12) == 0);  // ::ffff:a.b.c.d
  BOOST_TEST(std::all_of(g2.raw, g2.raw + 16, [](uint8_t b) { return b == 0; }));
  ibv_gid g{};
  BOOST_TEST(api().query_gid(d.ctx, 1, 16, &g) != 0);
  // An RTR from the link-local entry routes elsewhere: it times out.
  ibv_qp* a = d.qp();
  ibv_qp* b = d.qp();
  BOOST_TEST(d.connect(a, d, b, 0) == ETIMEDOUT);
}

BOOST_AUTO_TEST_CASE(a_send_that_found_no_receive_is_gone, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  Dev d;
  ibv_qp* a = d.qp();
  ibv_qp* b = d.qp();
  BOOST_REQUIRE_EQUAL(d.connect(a, d, b), 0);
  BOOST_REQUIRE_EQUAL(d.connect(b, d, a), 0);
  const uint64_t dropped = counter("no_receive_posted");
  BOOST_REQUIRE_EQUAL(d.send(a, 64, 1), 0);  // b has no receive posted
  settle();                                   // it has arrived
  BOOST_REQUIRE_EQUAL(d.recv(b, 7), 0);      // posted after it arrived, before anything polled
  settle();
  auto wcs = d.poll();
  BOOST_TEST(count(wcs, IBV_WC_RECV) == 0u);  // UC: it was dropped on arrival
  BOOST_TEST(counter("no_receive_posted") == dropped + 1);
  BOOST_REQUIRE_EQUAL(d.send(a, 64, 2), 0);  // the next one finds the receive
  settle();
  wcs = d.poll();
  BOOST_TEST(count(wcs, IBV_WC_RECV) == 1u);
}

BOOST_AUTO_TEST_CASE(a_device_reaches_only_its_cables_other_end,
                     *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  // Three hosts in a full mesh: h0's rdma_en1 leads to h1, rdma_en2 to h2.
  setenv("TB5_SIM_WIRING", "mesh:3", 1);
  setenv("TB5_SIM_HOST", "h0", 1);
  Dev h0_to_h1("rdma_en1"), h0_to_h2("rdma_en2");
  setenv("TB5_SIM_HOST", "h2", 1);
  Dev h2_to_h0("rdma_en0");
  unsetenv("TB5_SIM_WIRING");
  unsetenv("TB5_SIM_HOST");
  ibv_qp* wrong = h0_to_h1.qp();
  ibv_qp* right = h0_to_h2.qp();
  ibv_qp* there = h2_to_h0.qp();
  BOOST_REQUIRE_EQUAL(h2_to_h0.connect(there, h0_to_h2, right), 0);
  BOOST_REQUIRE_EQUAL(h2_to_h0.recv(there, 1), 0);
  BOOST_REQUIRE_EQUAL(h2_to_h0.recv(there, 2, 33), 0);
  // The cable to h1 cannot carry a frame to h2: the RTR takes the address,
  // the frames vanish.
  const uint64_t misrouted = counter("misrouted");
  BOOST_REQUIRE_EQUAL(h0_to_h1.connect(wrong, h2_to_h0, there), 0);
  BOOST_REQUIRE_EQUAL(h0_to_h1.send(wrong, 64, 1), 0);
  settle();
  BOOST_TEST(count(h2_to_h0.poll(), IBV_WC_RECV) == 0u);
  BOOST_TEST(counter("misrouted") == misrouted + 1);
  // The cable to h2 does.
  BOOST_REQUIRE_EQUAL(h0_to_h2.connect(right, h2_to_h0, there), 0);
  BOOST_REQUIRE_EQUAL(h0_to_h2.send(right, 64, 2), 0);
  settle();
  BOOST_TEST(count(h2_to_h0.poll(), IBV_WC_RECV) == 1u);
}

BOOST_AUTO_TEST_CASE(the_roce_profile_puts_ipv4_at_index_2, *utf::precondition([](utf::test_unit_id) { return !send_errors_on(); })) {
  setenv("TB5_SIM_PROFILE", "roce", 1);
  Dev d;
  unsetenv("TB5_SIM_PROFILE");
  const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  BOOST_TEST(std::memcmp(d.gid(1).raw, mapped, 12) != 0);
  BOOST_TEST(std::memcmp(d.gid(2).raw, mapped, 12) == 0);
  ibv_device_attr da{};
  api().query_device(d.ctx, &da);
  BOOST_TEST(da.max_qp > 1000);
}

// With TB5_SIM_SEND_ERROR=1: every SEND completes in error and breaks its
// queue pair, which then flushes what is posted until it is reset.
BOOST_AUTO_TEST_CASE(an_error_completion_breaks_the_queue_pair,
                     *utf::precondition([](utf::test_unit_id) { return send_errors_on(); })) {
  Dev d;
  ibv_qp* a = d.qp();
  ibv_qp* b = d.qp();
  BOOST_REQUIRE_EQUAL(d.connect(a, d, b), 0);
  BOOST_REQUIRE_EQUAL(d.recv(a, 5), 0);
  BOOST_REQUIRE_EQUAL(d.send(a, 64, 1), 0);
  auto wcs = d.poll();
  BOOST_TEST(count(wcs, IBV_WC_SEND, IBV_WC_GENERAL_ERR) == 1u);
  BOOST_TEST(count(wcs, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR) == 1u);  // the posted receive, flushed
  BOOST_REQUIRE_EQUAL(d.recv(a, 6), 0);  // accepted, and flushed at once
  BOOST_REQUIRE_EQUAL(d.send(a, 64, 2), 0);
  wcs = d.poll();
  BOOST_TEST(count(wcs, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR) == 1u);
  BOOST_TEST(count(wcs, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR) == 1u);
  BOOST_TEST(counter("send_errors") == 1u);
}
