// The pure parts of runtime/mpi_transport: the library banner, MCA
// selections, and when one-sided puts need the target's progress.
#define BOOST_TEST_MODULE mpi_transport
#include <boost/test/unit_test.hpp>

#include "runtime/mpi_transport.hpp"

using namespace trillion;

BOOST_AUTO_TEST_CASE(library_banner) {
  const MpiLibrary five = parse_mpi_library("Open MPI v5.0.7, package: Debian OpenMPI, ident: 5.0.7, repo rev: v5.0.7");
  BOOST_TEST(five.version == "Open MPI v5.0.7");
  BOOST_TEST(five.ompi_major == 5);
  BOOST_TEST(five.ompi_minor == 0);
  const MpiLibrary four = parse_mpi_library("Open MPI v4.1.4, package: Debian OpenMPI\n");
  BOOST_TEST(four.version == "Open MPI v4.1.4");
  BOOST_TEST(four.ompi_major == 4);
  BOOST_TEST(four.ompi_minor == 1);
  const MpiLibrary other = parse_mpi_library("MPICH Version:\t4.1\nMPICH Release date: ...");
  BOOST_TEST(other.version == "MPICH Version:\t4.1");
  BOOST_TEST(other.ompi_major == 0);
}

BOOST_AUTO_TEST_CASE(selections) {
  BOOST_TEST(mca_selection_allows("", "pt2pt"));
  BOOST_TEST(!mca_selection_allows("^ucx,pt2pt", "pt2pt"));
  BOOST_TEST(mca_selection_allows("^ucx,pt2pt", "rdma"));
  BOOST_TEST(mca_selection_allows("sm,rdma", "rdma"));
  BOOST_TEST(!mca_selection_allows("sm", "rdma"));
  BOOST_TEST(!mca_selection_allows("pt2pt2", "pt2pt"));
  BOOST_TEST(mca_selection_allows("^", "sm"));
}

BOOST_AUTO_TEST_CASE(target_progress) {
  // Open MPI 4.1: wherever osc/pt2pt may serve.
  BOOST_TEST(osc_needs_target_progress(4, "pt2pt", false));
  BOOST_TEST(osc_needs_target_progress(4, "", false));
  BOOST_TEST(!osc_needs_target_progress(4, "^ucx,pt2pt", true));
  BOOST_TEST(!osc_needs_target_progress(4, "sm", false));
  // Open MPI 5.0: osc/rdma between hosts (active messages over tcp/tb5).
  BOOST_TEST(osc_needs_target_progress(5, "^ucx,pt2pt", true));
  BOOST_TEST(osc_needs_target_progress(5, "rdma", true));
  BOOST_TEST(!osc_needs_target_progress(5, "^ucx,pt2pt", false));
  BOOST_TEST(!osc_needs_target_progress(5, "rdma", false));
  BOOST_TEST(!osc_needs_target_progress(5, "sm", true));
  BOOST_TEST(!osc_needs_target_progress(5, "^rdma", true));
  // Another MPI or generation: assume so.
  BOOST_TEST(osc_needs_target_progress(0, "", false));
  BOOST_TEST(osc_needs_target_progress(6, "", false));
}
