#pragma once
// Large vectors arrive as references to their sender's bulk channel
// (dml/net/bulk.hpp): CAF's deserializer only decodes the reference (no
// I/O on CAF's threads, nothing fetched before a handler has seen the
// message). The receiving actor fetches the values here, through a
// fetcher of its own: a detached actor (its own thread, off the
// scheduler), spawned on the first reference and linked to the receiver so
// that it goes with it. The receiver awaits the answer: no other message
// overtakes the one being resolved.

#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/message_priority.hpp>
#include <caf/response_promise.hpp>
#include <tuple>

#include "dml/actors/messages.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/type_ids.hpp"

namespace dml::actors::internal {

/// A fetcher for the bulk channel of `sys` (detached). It answers
/// fetch(x) with x's values, or with a dvec whose wire_error says why not.
caf::actor SpawnBulkFetcher(caf::actor_system& sys);

/// Calls f(values) with x's values in hand: at once when x carries them,
/// else once the fetcher (spawned into `fetcher` on first use) has
/// fetched them; a failed fetch calls f with wire_error set.
/// `expected`: the number of values the receiver can use (kAnyCount: not
/// known here); a reference announcing another count is never fetched (a
/// peer cannot make us allocate what the job cannot use), nor one naming
/// an endpoint other than the one its sender's process advertised
/// (CheckBulkSource). `from`: the sender of the message that carried x
/// (the current sender by default; a handler that made a response promise
/// first passes the promise's source: making it takes the sender).
inline constexpr std::size_t kAnyCount = static_cast<std::size_t>(-1);

/// A dvec for a reference that was not fetched, saying why.
inline dvec NotFetched(std::string why) {
  dvec refused;
  refused.wire_error = std::move(why);
  return refused;
}

template <class Self, class F>
void with_values(Self* self, caf::actor& fetcher, dvec x, F f, std::size_t expected = kAnyCount,
                 const caf::strong_actor_ptr* from = nullptr) {
  if (!x.ref) return f(std::move(x));
  if (expected != kAnyCount && x.ref->count != expected) {
    return f(NotFetched("bulk reference to " + std::to_string(x.ref->count) + " values where " +
                        std::to_string(expected) + " are expected: not fetched"));
  }
  // Only from the endpoint the sender's process advertised when admitted,
  // never from one a message names.
  if (absl::Status s =
          CheckBulkSource(self->system(), from != nullptr ? *from : self->current_sender(), *x.ref);
      !s.ok()) {
    return f(NotFetched(std::string(s.message())));
  }
  if (!fetcher) {
    fetcher = SpawnBulkFetcher(self->system());
    self->link_to(fetcher);
  }
  self->request(fetcher, caf::infinite, fetch_atom_v, std::move(x))
      .await([f](dvec& v) mutable { f(std::move(v)); },
             [self, f](caf::error& err) mutable {
               dvec failed;
               failed.wire_error = "bulk fetch: " + self->system().render(err);
               f(std::move(failed));
             });
}

/// For a request handler whose dvec argument is a reference: fetches it,
/// then delegates the same request with the values (made by
/// `remake(values)`, a tuple of the message's elements) back to this actor;
/// the reply goes to the original requester. Messages that arrived during
/// the fetch are handled before the redelivered one: fine for the handlers
/// that use this (a shard's pushes and restores, a worker's round, certify
/// and restore requests, whose senders wait for the reply before they send
/// that actor anything it would have to order after it). Normal priority:
/// a delegation at high priority marks the reply's id so that the
/// requester does not match it. Returns the promise the handler returns.
template <class Handle, class Promise, class Self, class Remake>
Promise fetch_and_redeliver(Self* self, caf::actor& fetcher, Promise promise, dvec x,
                            Remake remake, std::size_t expected = kAnyCount) {
  // Making the promise took the message's sender: it is the promise's source.
  const caf::strong_actor_ptr from = static_cast<caf::response_promise&>(promise).source();
  with_values(
      self, fetcher, std::move(x),
      [self, promise, remake](dvec v) mutable {
        std::apply(
            [&](auto&&... xs) {
              promise.template delegate<caf::message_priority::normal>(
                  caf::actor_cast<Handle>(self), std::forward<decltype(xs)>(xs)...);
            },
            remake(std::move(v)));
      },
      expected, &from);
  return promise;
}

}  // namespace dml::actors::internal
