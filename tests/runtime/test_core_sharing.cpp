// How a waiting rank treats its core: who shares the machine's CPUs
// (core_sharing.hpp, hand-made claims) and Backoff's sleep switch.
#define BOOST_TEST_MODULE core_sharing
#include <boost/test/unit_test.hpp>

#include <bit>
#include <chrono>
#include <initializer_list>
#include <vector>

#include "platform/cpu.hpp"
#include "runtime/backoff.hpp"
#include "runtime/core_sharing.hpp"

using namespace trillion;

namespace {

CoreClaim claim(uint64_t machine, std::initializer_list<unsigned> cpus) {
  CoreClaim c;
  c.machine = machine;
  for (unsigned cpu : cpus) c.cpus[cpu / 64] |= uint64_t(1) << (cpu % 64);
  return c;
}

// Pauses until the wait has lasted `d` (past Backoff::kYieldFor), then says
// whether the next two checks are both upkeep checks (only a sleeping wait's are).
bool sleeping_after(Backoff& b, std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) b.pause();
  b.pause();
  const bool first = b.upkeep_due();
  b.pause();
  return first && b.upkeep_due();
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_ranks_pinned_to_their_own_cores_do_not_share) {
  // The emulated cluster's 2 hosts on this 2-core machine: cores 0 and 1.
  const std::vector<CoreClaim> claims = {claim(7, {0}), claim(7, {1})};
  const MachineShare s = machine_share(claims, 1);
  BOOST_TEST(s.ranks == 2);
  BOOST_TEST(s.cores == 2);
  BOOST_TEST(!s.shared(1));
  BOOST_TEST(s.shared(2));  // two threads each: 4 threads on 2 CPUs
}

BOOST_AUTO_TEST_CASE(four_ranks_on_two_cores_share_them) {
  const std::vector<CoreClaim> claims = {claim(7, {0}), claim(7, {1}), claim(7, {0}), claim(7, {1})};
  const MachineShare s = machine_share(claims, 3);
  BOOST_TEST(s.ranks == 4);
  BOOST_TEST(s.cores == 2);
  BOOST_TEST(s.shared(1));
}

BOOST_AUTO_TEST_CASE(ranks_count_per_machine) {
  // Two machines of 4 CPUs, two unpinned ranks on the first, one on the second
  // (CPU numbers repeat across machines and must not mix).
  const std::vector<CoreClaim> claims = {claim(1, {0, 1, 2, 3}), claim(2, {0, 1, 2, 3}), claim(1, {0, 1, 2, 3})};
  const MachineShare a = machine_share(claims, 0), b = machine_share(claims, 1);
  BOOST_TEST(a.ranks == 2);
  BOOST_TEST(a.cores == 4);
  BOOST_TEST(!a.shared(2));
  BOOST_TEST(a.shared(3));
  BOOST_TEST(b.ranks == 1);
  BOOST_TEST(b.cores == 4);
  BOOST_TEST(!b.shared(4));
  // CPUs past the first word count too.
  const MachineShare high = machine_share({claim(3, {64, 65, 1000}), claim(3, {1023})}, 0);
  BOOST_TEST(high.cores == 4);
}

BOOST_AUTO_TEST_CASE(this_process_claims_its_affinity) {
  const CoreClaim a = this_process_claim("h"), b = this_process_claim("h");
  BOOST_TEST(a.machine == b.machine);
  int cpus = 0;
  for (uint64_t w : a.cpus) cpus += std::popcount(w);
  BOOST_TEST(cpus >= 1);
  std::vector<unsigned> allowed;
  if (platform::allowed_cpus(allowed))  // Linux (tests/platform checks it against /proc)
    BOOST_TEST(cpus == int(allowed.size()));
  // The machine is the kernel, not the host name: the emulated hosts differ in name only.
  if (!platform::boot_id().empty()) BOOST_TEST(this_process_claim("another-name").machine == a.machine);
}

BOOST_AUTO_TEST_CASE(a_long_wait_sleeps_only_when_allowed) {
  const auto past_yield = Backoff::kYieldFor + std::chrono::microseconds(500);
  Backoff may(0, true), may_not(0, false);
  BOOST_TEST(sleeping_after(may, past_yield));
  BOOST_TEST(!sleeping_after(may_not, past_yield));
}
