#pragma once
// Helpers of the bulk channel's tests (tests/actors/test_bulk.cpp,
// tests/net/test_bulk_peers.cpp): a known vector, a serving channel, an offer.

#include <cstddef>
#include <memory>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "dml/net/bulk.hpp"

namespace dml::testing {

/// n values 0.25 i - 3 (exact in binary, so compared with ==).
inline std::vector<double> Ramp(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.25 * static_cast<double>(i) - 3.0;
  return v;
}

/// A channel serving on 127.0.0.1 (fails the test if it cannot).
inline std::unique_ptr<net::BulkChannel> Serving(net::BulkOptions o = {}) {
  auto c = std::make_unique<net::BulkChannel>(o);
  auto s = c->Serve("127.0.0.1");
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  return c;
}

/// A copy of `v` offered on `c` (fails the test if the offer is refused).
inline net::BulkRef OfferVector(net::BulkChannel& c, const std::vector<double>& v) {
  auto owner = std::make_shared<std::vector<double>>(v);
  auto ref = c.Offer(owner, owner->data(), owner->size());
  BOOST_REQUIRE(ref.has_value());
  return *ref;
}

}  // namespace dml::testing
