#pragma once
// partition_actor: holds one row partition of a dataset (a dml::Dataset) and
// answers questions about it. The whole protocol is the handle type below.

#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "dml/actors/dense_block.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/data/sparse.hpp"

namespace dml::actors {

/// Message interface of a data partition.
///  - stats: -> (rows, cols, nnz) of the partition's design matrix.
///  - matvec, w: -> z = A w for the partition's rows (z has `rows` entries).
///    w must have `cols` entries; otherwise the reply is a caf::error
///    (sec::invalid_argument) whose context names both lengths.
using partition_actor = caf::typed_actor<
    caf::replies_to<stats_atom>::with<int64_t, int64_t, int64_t>,
    caf::replies_to<matvec_atom, dense_block>::with<dense_block>>;

/// Spawns a partition actor owning `data` (moved in, never copied). The
/// actor lives until it receives an exit message; the caller must send one
/// (e.g. caf::anon_send_exit) before `sys` is destroyed if the actor was
/// published, or `sys`'s destructor waits for it.
partition_actor spawn_partition_actor(caf::actor_system& sys, dml::Dataset data);

}  // namespace dml::actors
