// expect_error<E>(f, parts): runs f and expects an E whose message contains
// every one of `parts` (the store tests' errors name the file, the tensor,
// the field). One copy for every test in tests/store.
#pragma once
#include <boost/test/unit_test.hpp>

#include <initializer_list>
#include <string>

namespace trillion::test {

template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "'" << p << "' not in: " << msg);
    return;
  }
  BOOST_FAIL("expected error not thrown");
}

}  // namespace trillion::test
