// The backends under the engine: udp over loopback, verbs over the verbs
// simulator (libtb5_verbs_sim.so, path in argv[1]: the same dlopen path the
// BTL takes), the simulator's Apple constraints, and the clean "no RDMA
// device" failure. CTest runs this twice: clean, and with the simulator's
// loss, duplication, reordering and stalls switched on (TB5_SIM_*).
#define BOOST_TEST_MODULE tb5_links
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/faulty_link.hpp"
#include "transport/tb5/udp/udp_link.hpp"
#include "transport/tb5/verbs/verbs_api.hpp"
#include "transport/tb5/verbs/verbs_link.hpp"

using namespace trillion::tb5;
namespace utf = boost::unit_test;

namespace {

std::string sim_path() {
  const auto& m = utf::framework::master_test_suite();
  BOOST_REQUIRE_MESSAGE(m.argc > 1, "usage: test_tb5_links <path of libtb5_verbs_sim.so>");
  return m.argv[1];
}

bool sim_faults_on() { return std::getenv("TB5_SIM_LOSS") != nullptr; }

std::vector<uint8_t> content(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  for (auto& b : v) b = uint8_t(g());
  return v;
}

// Two engines over two connected links; every message each way must arrive
// once, in order, intact. Real sockets and a real clock: the loop gives up
// after 60 s (a hang), it asserts nothing about time.
void exchange(Link& l0, Link& l1, int count, EngineConfig cfg = {}) {
  Link* link[2] = {&l0, &l1};
  l0.connect(1, l1.address());
  l1.connect(0, l0.address());
  std::vector<std::vector<uint8_t>> got[2];
  std::vector<uint32_t> dead;
  std::unique_ptr<Engine> e[2];
  for (uint32_t r = 0; r < 2; ++r) {
    e[r] = std::make_unique<Engine>(
        *link[r], r, 2, cfg,
        [&got, r](uint32_t, uint8_t, std::span<const uint8_t> m) { got[r].emplace_back(m.begin(), m.end()); },
        [&dead](uint32_t p, double) { dead.push_back(p); });
    e[r]->add_peer(1 - r);
  }
  std::vector<std::vector<uint8_t>> sent[2];
  const size_t sizes[] = {1, 500, 975, 976, 977, 4000, 64 * 1024};
  for (int i = 0; i < count; ++i)
    for (uint32_t r = 0; r < 2; ++r) {
      sent[r].push_back(content(sizes[i % 7], 100 * r + i));
      std::span<const uint8_t> piece(sent[r].back());
      e[r]->send(1 - r, 9, {&piece, 1});
      e[0]->progress();
      e[1]->progress();
    }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((got[0].size() < size_t(count) || got[1].size() < size_t(count) || !e[0]->all_acknowledged() ||
          !e[1]->all_acknowledged()) &&
         std::chrono::steady_clock::now() < give_up) {
    e[0]->progress();
    e[1]->progress();
  }
  BOOST_TEST(dead.empty());
  for (uint32_t r = 0; r < 2; ++r) {
    BOOST_REQUIRE_EQUAL(got[r].size(), size_t(count));
    for (int i = 0; i < count; ++i) BOOST_TEST((got[r][i] == sent[1 - r][i]), "message " << i << " to " << r);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(udp_over_loopback) {
  const in_addr lo = choose_ipv4("lo");
  UdpLink a(lo, 1024, 2), b(lo, 1024, 2);
  exchange(a, b, 60);
}

BOOST_AUTO_TEST_CASE(udp_with_injected_faults) {
  const in_addr lo = choose_ipv4("127.0.0.1");
  FaultyLink a(std::make_unique<UdpLink>(lo, 1024, 2), {0.05, 0.05, 0.05, 3});
  FaultyLink b(std::make_unique<UdpLink>(lo, 1024, 2), {0.05, 0.05, 0.05, 4});
  exchange(a, b, 60);
  BOOST_TEST(a.counts().lost > 0u);
  BOOST_TEST(b.counts().duplicated > 0u);
}

// A datagram from a socket that is no connected peer never reaches the
// engine (frames can carry puts); the peer's frames still do.
BOOST_AUTO_TEST_CASE(udp_takes_frames_from_its_peers_only) {
  const in_addr lo = choose_ipv4("lo");
  UdpLink a(lo, 1024, 2), b(lo, 1024, 2);
  a.connect(1, b.address());
  b.connect(0, a.address());
  const int stranger = socket(AF_INET, SOCK_DGRAM, 0);
  BOOST_REQUIRE(stranger >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = lo;
  std::memcpy(&to.sin_port, b.address().data(), 2);
  const uint8_t junk[100] = {7};
  BOOST_REQUIRE(sendto(stranger, junk, sizeof junk, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == 100);
  const uint8_t hello[5] = {1, 2, 3, 4, 5};
  a.send(1, hello);  // after the stranger's: the socket hands them over in that order
  std::vector<std::vector<uint8_t>> got;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.empty() && std::chrono::steady_clock::now() < give_up)
    b.poll([&](std::span<const uint8_t> f) { got.emplace_back(f.begin(), f.end()); }, 10);
  ::close(stranger);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST((got[0] == std::vector<uint8_t>(hello, hello + 5)));
  BOOST_TEST(b.strangers() == 1u);
}

BOOST_AUTO_TEST_CASE(udp_names_a_bad_interface) {
  try {
    choose_ipv4("no_such_if9");
    BOOST_FAIL("no error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("'no_such_if9'") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(verbs_backend_over_the_simulator) {
  auto a = open_verbs_link(sim_path(), "", 1024, 0, 2);
  auto b = open_verbs_link(sim_path(), "sim_rdma0", 1024, 1, 2);
  BOOST_TEST(a->mtu() == 1024u);
  BOOST_TEST(a->describe().find("verbs sim_rdma0 (UC, MTU 1024") == 0, a->describe());
  EngineConfig cfg;
  cfg.window = verbs_window;  // what tb5_open gives the verbs backend
  exchange(*a, *b, 60, cfg);
  uint64_t c[6];
  auto counters = reinterpret_cast<void (*)(uint64_t*)>(dlsym(RTLD_DEFAULT, "tb5_sim_counters"));
  if (!counters) {
    void* h = dlopen(sim_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
    counters = reinterpret_cast<void (*)(uint64_t*)>(dlsym(h, "tb5_sim_counters"));
  }
  BOOST_REQUIRE(counters);
  counters(c);
  BOOST_TEST(c[0] > 0u);  // SENDs went through the simulator
  if (sim_faults_on()) {
    BOOST_TEST(c[1] > 0u);  // lost
    BOOST_TEST(c[2] > 0u);  // duplicated
    BOOST_TEST(c[3] > 0u);  // reordered
    BOOST_TEST(c[4] > 0u);  // stalls
  }
}

BOOST_AUTO_TEST_CASE(simulator_enforces_apples_limits) {
  VerbsApi api = load_verbs(sim_path());
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  BOOST_REQUIRE_EQUAL(n, 1);
  ibv_context* ctx = api.open_device(list[0]);
  api.free_device_list(list);
  ibv_pd* pd = api.alloc_pd(ctx);
  ibv_cq* cq = api.create_cq(ctx, 128, nullptr, nullptr, 0);
  std::vector<uint8_t> buf(70 * 2048);
  ibv_mr* mr = api.reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = 32;
  qa.cap.max_recv_wr = 63;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_RC;
  errno = 0;
  BOOST_TEST(!api.create_qp(pd, &qa));  // UC only
  BOOST_TEST(errno == EOPNOTSUPP);
  qa.qp_type = IBV_QPT_UC;
  ibv_qp* qp = api.create_qp(pd, &qa);
  BOOST_REQUIRE(qp);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  BOOST_REQUIRE_EQUAL(api.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  // 63 receives post; the 64th fails with ENOMEM, as users report of Apple's stack.
  int rc = 0, posted = 0;
  for (; posted < 64 && rc == 0; ++posted) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + posted * 1024), 1024, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = uint64_t(posted);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    rc = api.post_recv(qp, &wr, &bad);
  }
  BOOST_TEST(posted == 64);
  BOOST_TEST(rc == ENOMEM);
  // Connect to itself, then: RDMA WRITE refused, a SEND over the MTU refused.
  ibv_gid gid;
  BOOST_REQUIRE_EQUAL(api.query_gid(ctx, 1, 1, &gid), 0);
  at = {};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = IBV_MTU_1024;
  at.dest_qp_num = qp->qp_num;
  at.ah_attr.is_global = 1;
  at.ah_attr.grh.dgid = gid;
  at.ah_attr.grh.sgid_index = 1;  // Apple's IPv4-mapped entry (0 is link-local: RTR times out)
  at.ah_attr.port_num = 1;
  BOOST_REQUIRE_EQUAL(api.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN), 0);
  at = {};
  at.qp_state = IBV_QPS_RTS;
  BOOST_REQUIRE_EQUAL(api.modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  // (SENDs of up to 4 KiB: the path MTU of 1024 is per packet.)
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + 65 * 1024), 4097, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  BOOST_TEST(api.post_send(qp, &wr, &bad) == EINVAL);  // over the largest SEND
  sge.length = 100;
  wr.opcode = IBV_WR_RDMA_WRITE;
  BOOST_TEST(api.post_send(qp, &wr, &bad) == EOPNOTSUPP);  // SEND/RECV only
  api.destroy_qp(qp);
  api.dereg_mr(mr);
  api.destroy_cq(cq);
  api.dealloc_pd(pd);
  api.close_device(ctx);
}

BOOST_AUTO_TEST_CASE(no_rdma_device_is_a_clean_error) {
  auto expect_no_device = [](const std::string& lib) {
    try {
      open_verbs_link(lib, "", 1024, 0, 2);
      BOOST_FAIL("opened " << lib);
    } catch (const std::runtime_error& e) {
      BOOST_TEST(std::string(e.what()).rfind("no RDMA device", 0) == 0, e.what());
    }
  };
  expect_no_device("/nonexistent/librdma.dylib");
  setenv("TB5_SIM_DEVICES", "0", 1);  // a verbs library with no device: a Mac with RDMA off
  expect_no_device(sim_path());
  unsetenv("TB5_SIM_DEVICES");
}
