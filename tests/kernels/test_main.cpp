#define BOOST_TEST_MODULE trillion kernels
#include <boost/test/unit_test.hpp>

#include "isa_report.hpp"

namespace {
struct ReportSkippedIsas {
  ReportSkippedIsas() { trillion::test::report_skipped_isas(); }
};
}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(ReportSkippedIsas);
