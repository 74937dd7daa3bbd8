// Boost.Test's library for the macOS check's test programs
// (cmake/TrillionMacosCheck.cmake): the framework from its header-only form,
// with the init API its shared library has (the tests are compiled with
// BOOST_TEST_DYN_LINK, so their main() calls unit_test_main(bool (*)(), ...)),
// and no main() of its own.
#define BOOST_TEST_ALTERNATIVE_INIT_API
#define BOOST_TEST_NO_MAIN
#include <boost/test/included/unit_test.hpp>
