// The bulk fetcher of internal/bulk_resolve.hpp, and ResolveBlocking.
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/network.hpp"

namespace dml::actors {
namespace {

// x's values from `bulk` (x itself when it carries them), or a dvec whose
// wire_error says why not.
dvec Resolve(net::BulkChannel* bulk, dvec x) {
  if (!x.ref) return x;
  dvec out;
  if (bulk == nullptr) {
    out.wire_error = "a bulk reference reached a process without a bulk channel";
    return out;
  }
  auto fetched = bulk->Fetch(*x.ref);
  if (!fetched.ok()) {
    out.wire_error = std::string(fetched.status().message());
    if (out.wire_error.empty()) out.wire_error = "bulk fetch failed";
    return out;
  }
  out = fetched->vector ? dvec(std::move(fetched->vector))
                        : dvec(std::move(fetched->owner), fetched->values, fetched->count);
  out.finite = fetched->finite;
  return out;
}

// The channel is passed in (no lookup per fetch; and an actor spawned with
// no argument makes CAF 0.17 bind a reference to a null tuple, which
// UBSan reports).
caf::behavior fetcher_impl(caf::event_based_actor*, net::BulkChannel* bulk) {
  return {
      [bulk](fetch_atom, const dvec& x) -> dvec { return Resolve(bulk, x); },
  };
}

}  // namespace

dvec ResolveBlocking(caf::actor_system& sys, dvec x, const caf::strong_actor_ptr& from) {
  if (x.ref) {
    if (absl::Status s = CheckBulkSource(sys, from, *x.ref); !s.ok()) {
      return internal::NotFetched(std::string(s.message()));
    }
  }
  return Resolve(BulkChannelOf(sys), std::move(x));
}

caf::actor internal::SpawnBulkFetcher(caf::actor_system& sys) {
  return sys.spawn<caf::detached>(fetcher_impl, BulkChannelOf(sys));
}

}  // namespace dml::actors
