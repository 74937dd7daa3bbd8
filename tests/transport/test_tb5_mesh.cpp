// One device per peer: which local device or interface reaches a peer (the
// subnet its cable shares), four hosts cabled as a full mesh on the verbs
// simulator in one process (each pair over its own cable, nothing
// misrouted), a missing cable named at connect, the GID index forced, the C
// API leaving ranks of one host to other BTLs and refusing mixed backends,
// and the engine's borrowed (zero-copy) sends. argv[1]: the simulator.
#define BOOST_TEST_MODULE tb5_mesh
#include <boost/test/unit_test.hpp>

#include <dlfcn.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>

#include "memory_link.hpp"
#include "transport/tb5/api/tb5_api.h"
#include "transport/tb5/core/checksum.hpp"
#include "transport/tb5/core/engine.hpp"
#include "transport/tb5/core/frame.hpp"
#include "transport/tb5/core/subnet.hpp"
#include "transport/tb5/udp/udp_link.hpp"
#include "transport/tb5/verbs/verbs_link.hpp"

using namespace trillion::tb5;
namespace utf = boost::unit_test;

namespace {

std::string sim_path() {
  const auto& m = utf::framework::master_test_suite();
  BOOST_REQUIRE_MESSAGE(m.argc > 1, "usage: test_tb5_mesh -- <path of libtb5_verbs_sim.so>");
  return m.argv[1];
}

uint64_t sim_counter(const char* name) {
  void* h = dlopen(sim_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  BOOST_REQUIRE(h);
  auto f = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(h, "tb5_sim_counter"));
  BOOST_REQUIRE(f);
  return f(name);
}

Ipv4Net net(const char* s, const char* name = "") {
  auto n = parse_ipv4_net(s);
  BOOST_REQUIRE(n);
  n->name = name;
  return *n;
}

std::vector<uint8_t> content(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  for (auto& b : v) b = uint8_t(g());
  return v;
}

// Opens host `host`'s verbs link (rank `rank` of n) on the simulator.
std::unique_ptr<Link> open_host(const std::string& host, uint32_t rank, uint32_t n, const std::string& gid_index = "") {
  setenv("TB5_SIM_HOST", host.c_str(), 1);
  VerbsOptions o;
  o.library = sim_path();
  o.gid_index = gid_index;
  auto l = open_verbs_link(o, rank, n);
  unsetenv("TB5_SIM_HOST");
  return l;
}

struct EnvGuard {
  EnvGuard(const char* k, const std::string& v) : key(k) { setenv(k, v.c_str(), 1); }
  ~EnvGuard() { unsetenv(key); }
  const char* key;
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_cable_is_the_subnet_both_ends_share) {
  const std::vector<Ipv4Net> here = {net("192.168.1.10/24", "en0"), net("10.0.0.1/30", "en2"), net("10.0.0.5/30", "en3")};
  // Rank 2 on the LAN and at the far end of en3's cable: the cable wins.
  const std::vector<Ipv4Net> there = {net("192.168.1.12/24"), net("10.0.0.6/30")};
  const Path p = choose_path(here, there, "rank 2");
  BOOST_TEST(p.local == 2u);
  BOOST_TEST(p.remote == 1u);
  // Only the LAN: the LAN.
  BOOST_TEST(choose_path(here, std::vector<Ipv4Net>{net("192.168.1.12/24")}, "rank 1").local == 0u);
}

BOOST_AUTO_TEST_CASE(no_shared_subnet_names_both_sides) {
  const std::vector<Ipv4Net> here = {net("10.0.0.1/30", "rdma_en2")}, there = {net("10.0.0.9/30", "rdma_en4")};
  try {
    choose_path(here, there, "rank 3 (studio-d)");
    BOOST_FAIL("no error");
  } catch (const NoPath& e) {
    const std::string w = e.what();
    BOOST_TEST(w.find("rank 3 (studio-d)") != std::string::npos, w);
    BOOST_TEST(w.find("rdma_en2 10.0.0.1/30") != std::string::npos, w);
    BOOST_TEST(w.find("10.0.0.9/30") != std::string::npos, w);
  }
}

BOOST_AUTO_TEST_CASE(two_cables_in_one_subnet_are_refused) {
  // Self-assigned 169.254/16 on every port: which cable leads where cannot be told.
  const std::vector<Ipv4Net> here = {net("169.254.1.1/16", "rdma_en2"), net("169.254.2.1/16", "rdma_en3")};
  const std::vector<Ipv4Net> there = {net("169.254.9.9/16")};
  try {
    choose_path(here, there, "rank 1");
    BOOST_FAIL("no error");
  } catch (const NoPath&) {
    BOOST_FAIL("not a missing cable");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("its own subnet") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(interfaces_by_name_address_or_subnet) {
  const auto lo = ipv4_interfaces("lo");
  BOOST_REQUIRE_EQUAL(lo.size(), 1u);
  BOOST_TEST(lo[0].name == "lo");
  BOOST_TEST(lo[0].prefix == 8);
  BOOST_TEST(ipv4_interfaces("127.0.0.1")[0].name == "lo");
  BOOST_TEST(ipv4_interfaces("127.0.0.0/8")[0].name == "lo");
  BOOST_TEST(ipv4_interfaces("lo,127.0.0.0/8").size() == 1u);  // one interface, named twice
  BOOST_CHECK_THROW(ipv4_interfaces("no_such_if9"), std::runtime_error);
  BOOST_CHECK_THROW(ipv4_interfaces("10.0.0.0/33"), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_payload_hashed_in_two_parts_is_hashed_as_one) {
  const auto b = content(70000, 5);
  for (size_t len : {0, 1, 100, 240, 241, 1000, 65459})
    for (size_t cut : {size_t(0), size_t(1), len / 3, len})
      if (cut <= len)
        BOOST_TEST(hash64_2(b.data(), cut, b.data() + cut, len - cut) == hash64(b.data(), len, 0),
                   "len " << len << " cut " << cut);
}

// Four hosts, every pair cabled (TB5_SIM_WIRING=mesh:4): each rank opens
// three devices, reaches each peer through the one on their cable, and
// every pair exchanges messages both ways.
BOOST_AUTO_TEST_CASE(four_hosts_as_a_full_mesh) {
  EnvGuard wiring("TB5_SIM_WIRING", "mesh:4");
  constexpr uint32_t n = 4;
  std::unique_ptr<Link> link[n];
  for (uint32_t r = 0; r < n; ++r) {
    link[r] = open_host("h" + std::to_string(r), r, n);
    BOOST_TEST(link[r]->describe().find("rdma_en") != std::string::npos, link[r]->describe());
    BOOST_TEST(link[r]->mtu() == 4096u);  // SENDs of 4 KiB (path MTU 1024)
  }
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = 0; b < n; ++b)
      if (a != b) link[a]->connect(b, link[b]->address());
  const uint64_t misrouted = sim_counter("misrouted");
  std::vector<std::vector<uint8_t>> got[n][n];
  std::unique_ptr<Engine> eng[n];
  EngineConfig cfg;
  cfg.window = verbs_window;
  for (uint32_t r = 0; r < n; ++r) {
    eng[r] = std::make_unique<Engine>(
        *link[r], r, n, cfg,
        [&got, r](uint32_t from, uint8_t, std::span<const uint8_t> m) { got[r][from].emplace_back(m.begin(), m.end()); },
        [](uint32_t, double) {});
    for (uint32_t p = 0; p < n; ++p)
      if (p != r) eng[r]->add_peer(p);
  }
  const int count = 20;
  for (int i = 0; i < count; ++i)
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t b = 0; b < n; ++b)
        if (a != b) {
          const auto m = content(1 + (i * 3001) % 20000, 1000 * a + 10 * b + i);
          std::span<const uint8_t> piece(m);
          eng[a]->send(b, 1, {&piece, 1});
        }
  auto done = [&] {
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t b = 0; b < n; ++b)
        if (a != b && got[a][b].size() < size_t(count)) return false;
    return true;
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < give_up)
    for (auto& e : eng) e->progress();
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = 0; b < n; ++b) {
      if (a == b) continue;
      BOOST_REQUIRE_EQUAL(got[a][b].size(), size_t(count));
      for (int i = 0; i < count; ++i)
        BOOST_TEST((got[a][b][i] == content(1 + (i * 3001) % 20000, 1000 * b + 10 * a + i)));
    }
  BOOST_TEST(sim_counter("misrouted") == misrouted);  // every frame on its own cable
}

BOOST_AUTO_TEST_CASE(a_missing_cable_is_named_at_connect) {
  const std::string file = "/tmp/tb5_wiring_" + std::to_string(getpid());
  std::ofstream(file) << "# h0 - h1 - h2 in a line: no cable between h0 and h2\n"
                         "h0 rdma_en1 127.22.0.1/30  h1 rdma_en0 127.22.0.2/30\n"
                         "h1 rdma_en2 127.22.0.5/30  h2 rdma_en1 127.22.0.6/30\n";
  EnvGuard wiring("TB5_SIM_WIRING", file);
  auto h0 = open_host("h0", 0, 3), h1 = open_host("h1", 1, 3), h2 = open_host("h2", 2, 3);
  h0->connect(1, h1->address());
  h2->connect(1, h1->address());
  try {
    h0->connect(2, h2->address());
    BOOST_FAIL("connected without a cable");
  } catch (const NoPath& e) {
    const std::string w = e.what();
    BOOST_TEST(w.find("rdma_en1 127.22.0.1/30") != std::string::npos, w);  // here
    BOOST_TEST(w.find("127.22.0.6/30") != std::string::npos, w);           // there
  }
  std::remove(file.c_str());
}

BOOST_AUTO_TEST_CASE(the_gid_index_can_be_forced) {
  EnvGuard wiring("TB5_SIM_WIRING", "mesh:2");
  // Index 0 is Apple's link-local entry: the queue pair's RTR times out.
  auto a = open_host("h0", 0, 2, "0"), b = open_host("h1", 1, 2, "0");
  try {
    a->connect(1, b->address());
    BOOST_FAIL("connected from a link-local GID");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("RTR") != std::string::npos, e.what());
  }
  auto c = open_host("h0", 0, 2, "1"), d = open_host("h1", 1, 2, "1");
  c->connect(1, d->address());
  BOOST_CHECK_THROW(open_host("h0", 0, 2, "x"), std::runtime_error);
}

namespace {

void no_deliver(void*, uint32_t, uint8_t, const void*, size_t) {}
void no_death(void*, uint32_t, double, const char*) {}

tb5_handle* open_api(const char* backend, uint32_t self, uint32_t n, unsigned local_peers) {
  const std::string sim = sim_path();
  tb5_options o{};
  o.backend = backend;
  o.if_include = "lo";
  o.verbs_library = sim.c_str();
  o.rto = 0.002, o.rto_max = 0.2, o.heartbeat = 0.5, o.peer_timeout = 60;
  o.local_peers = local_peers;
  char err[512] = "";
  tb5_handle* h = tb5_open(&o, self, n, no_deliver, no_death, nullptr, err, sizeof err);
  BOOST_REQUIRE_MESSAGE(h, err);
  return h;
}

std::vector<uint8_t> address_of(tb5_handle* h) {
  std::vector<uint8_t> a(4096);
  a.resize(tb5_address(h, a.data(), a.size()));
  BOOST_REQUIRE(!a.empty());
  return a;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ranks_of_one_host_are_left_to_other_btls) {
  char err[512] = "";
  tb5_handle *a = open_api("udp", 0, 2, 0), *b = open_api("udp", 1, 2, 0);
  const auto addr = address_of(b);
  BOOST_TEST(tb5_connect(a, 1, addr.data(), addr.size(), err, sizeof err) == 1);  // btl/self's and sm's
  tb5_handle* c = open_api("udp", 0, 2, 1);                                         // btl_tb5_local_peers
  BOOST_TEST(tb5_connect(c, 1, addr.data(), addr.size(), err, sizeof err) == 0, err);
  // A rank on another backend (its host has no RDMA, say): an error naming both.
  tb5_handle* v = open_api("verbs", 0, 2, 1);
  BOOST_TEST(tb5_connect(v, 1, addr.data(), addr.size(), err, sizeof err) == -1);
  BOOST_TEST(std::string(err).find("btl_tb5_backend") != std::string::npos, err);
  for (tb5_handle* h : {a, b, c, v}) tb5_close(h);
}

BOOST_AUTO_TEST_CASE(a_peer_no_cable_reaches_is_an_error_naming_both_hosts) {
  const std::string file = "/tmp/tb5_wiring_api_" + std::to_string(getpid());
  std::ofstream(file) << "h0 rdma_en1 127.23.0.1/30  h1 rdma_en0 127.23.0.2/30\n";
  EnvGuard wiring("TB5_SIM_WIRING", file);
  setenv("TB5_SIM_HOST", "h0", 1);
  tb5_handle* a = open_api("verbs", 0, 3, 1);
  setenv("TB5_SIM_HOST", "h1", 1);
  tb5_handle* b = open_api("verbs", 1, 3, 1);
  unsetenv("TB5_SIM_HOST");
  // Rank 2's address names a device on a subnet no cable of rank 0 reaches.
  std::vector<uint8_t> addr = address_of(b);
  char err[1024] = "";
  BOOST_TEST(tb5_connect(a, 1, addr.data(), addr.size(), err, sizeof err) == 0, err);
  const std::vector<uint8_t> addr0 = address_of(a);
  BOOST_TEST(tb5_connect(b, 0, addr0.data(), addr0.size(), err, sizeof err) == 0, err);
  // Rank 1's address offered as rank 2's: rank 1's device is on rank 0's
  // cable, so turn its subnet into one nobody here shares.
  const size_t at = 5 + addr[4] + 1 + 1 + addr[5 + addr[4] + 1] + 16 + 2;  // envelope, count, name, gid, lid
  addr[at] = 10;
  BOOST_TEST(tb5_connect(a, 2, addr.data(), addr.size(), err, sizeof err) == -1);
  const std::string w = err;
  BOOST_TEST(w.find("rank 0 (") != std::string::npos, w);
  BOOST_TEST(w.find("cannot reach rank 2 (") != std::string::npos, w);
  BOOST_TEST(w.find("is the cable between") != std::string::npos, w);
  tb5_close(a);
  tb5_close(b);
  std::remove(file.c_str());
}

// Borrowed messages: sent from the caller's buffers, handed back only once
// every frame is acknowledged, never copied.
BOOST_AUTO_TEST_CASE(borrowed_messages_come_back_once_acknowledged) {
  test::MemoryNet memnet(2);
  test::MemoryLink l0(memnet, 0), l1(memnet, 1);
  double now = 0;
  std::vector<std::vector<uint8_t>> got;
  EngineConfig cfg;
  cfg.borrow_min = 0;
  Engine e0(l0, 0, 2, cfg, [](uint32_t, uint8_t, std::span<const uint8_t>) {}, [](uint32_t, double) {},
            [&] { return now; });
  Engine e1(l1, 1, 2, {}, [&](uint32_t, uint8_t, std::span<const uint8_t> m) { got.emplace_back(m.begin(), m.end()); },
            [](uint32_t, double) {}, [&] { return now; });
  e0.add_peer(1);
  e1.add_peer(0);
  std::vector<void*> back;
  e0.set_on_sent([&](void* c) { back.push_back(c); });
  auto head = content(40, 1), body = content(3 * e0.max_payload(), 2);
  std::span<const uint8_t> pieces[2] = {head, body};
  int cookie = 7;
  BOOST_TEST(e0.send_borrowed(1, 3, pieces, &cookie));
  BOOST_TEST(back.empty());
  for (int i = 0; i < 10 && back.empty(); ++i) {
    e1.progress();
    e0.progress();
    now += 0.001;
  }
  BOOST_REQUIRE_EQUAL(back.size(), 1u);
  BOOST_TEST(back[0] == &cookie);
  std::vector<uint8_t> whole(head);
  whole.insert(whole.end(), body.begin(), body.end());
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST((got[0] == whole));
  // More than two pieces are copied instead: the caller's buffers are free at once.
  std::span<const uint8_t> three[3] = {head, body, head};
  BOOST_TEST(!e0.send_borrowed(1, 3, three, &cookie));
  // So are short ones (by default, every one: EngineConfig::borrow_min).
  Engine e2(l0, 0, 2, {}, [](uint32_t, uint8_t, std::span<const uint8_t>) {}, [](uint32_t, double) {},
            [&] { return now; });
  e2.add_peer(1);
  BOOST_TEST(!e2.send_borrowed(1, 3, pieces, &cookie));
  // The last frame of a borrowed message asks for an immediate acknowledgement.
  bool asked = false;
  memnet.filter = [&](uint32_t from, uint32_t, std::span<const uint8_t> f) {
    auto d = decode_frame(f);
    if (from == 0 && d && d->header.ack_now) asked = true;
    return 1;
  };
  BOOST_TEST(e0.send_borrowed(1, 3, pieces, &cookie));
  BOOST_TEST(asked);
}
