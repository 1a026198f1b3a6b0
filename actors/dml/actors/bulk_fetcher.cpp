// The bulk fetcher of internal/bulk_resolve.hpp.
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/network.hpp"

namespace dml::actors::internal {
namespace {

caf::behavior fetcher_impl(caf::event_based_actor* self) {
  return {
      [self](fetch_atom, const dvec& x) -> dvec { return ResolveBlocking(self->home_system(), x); },
  };
}

}  // namespace

caf::actor SpawnBulkFetcher(caf::actor_system& sys) {
  return sys.spawn<caf::detached>(fetcher_impl);
}

}  // namespace dml::actors::internal

namespace dml::actors {

dvec ResolveBlocking(caf::actor_system& sys, dvec x) {
  if (!x.ref) return x;
  dvec out;
  net::BulkChannel* bulk = BulkChannelOf(sys);
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

}  // namespace dml::actors
