#pragma once
// The one list of every libdml message type and atom, for CAF's type
// registry. Add a type here and dml::actors::RegisterTypes() picks it up;
// both ends of a connection must run the same list (type names are what CAF
// 0.17 puts on the wire and checks typed interfaces against).

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include <cstdint>
#include <vector>

#include "dml/actors/dense_block.hpp"
#include "dml/actors/messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(dml_actors, caf::first_custom_type_id)

  // Atoms (caf::atom_constant; at most 10 characters).
  CAF_ADD_ATOM(dml_actors, dml::actors, stats_atom, "stats")
  CAF_ADD_ATOM(dml_actors, dml::actors, matvec_atom, "matvec")
  CAF_ADD_ATOM(dml_actors, dml::actors, push_atom, "push")
  CAF_ADD_ATOM(dml_actors, dml::actors, pull_atom, "pull")
  CAF_ADD_ATOM(dml_actors, dml::actors, elastic_atom, "elastic")
  CAF_ADD_ATOM(dml_actors, dml::actors, read_atom, "read")
  CAF_ADD_ATOM(dml_actors, dml::actors, init_atom, "init")
  CAF_ADD_ATOM(dml_actors, dml::actors, run_atom, "run")
  CAF_ADD_ATOM(dml_actors, dml::actors, step_atom, "step")
  CAF_ADD_ATOM(dml_actors, dml::actors, halt_atom, "halt")
  CAF_ADD_ATOM(dml_actors, dml::actors, round_atom, "round")
  CAF_ADD_ATOM(dml_actors, dml::actors, coords_atom, "coords")
  CAF_ADD_ATOM(dml_actors, dml::actors, start_atom, "start")
  CAF_ADD_ATOM(dml_actors, dml::actors, cancel_atom, "cancel")
  CAF_ADD_ATOM(dml_actors, dml::actors, tick_atom, "tick")
  CAF_ADD_ATOM(dml_actors, dml::actors, connect_atom, "connect")
  CAF_ADD_ATOM(dml_actors, dml::actors, worker_atom, "worker")
  CAF_ADD_ATOM(dml_actors, dml::actors, shard_atom, "shard")
  CAF_ADD_ATOM(dml_actors, dml::actors, hello_atom, "hello")
  CAF_ADD_ATOM(dml_actors, dml::actors, recover_atom, "recover")
  CAF_ADD_ATOM(dml_actors, dml::actors, challenge_atom, "challenge")
  CAF_ADD_ATOM(dml_actors, dml::actors, admit_atom, "admit")
  CAF_ADD_ATOM(dml_actors, dml::actors, pushpull_atom, "pushpull")
  CAF_ADD_ATOM(dml_actors, dml::actors, fetch_atom, "fetch")
  CAF_ADD_ATOM(dml_actors, dml::actors, iterate_atom, "iterate")
  CAF_ADD_ATOM(dml_actors, dml::actors, calibrate_atom, "calibrate")
  CAF_ADD_ATOM(dml_actors, dml::actors, svrg_atom, "svrg")
  CAF_ADD_ATOM(dml_actors, dml::actors, kv_atom, "kv")
  CAF_ADD_ATOM(dml_actors, dml::actors, refine_atom, "refine")
  CAF_ADD_ATOM(dml_actors, dml::actors, features_atom, "features")
  CAF_ADD_ATOM(dml_actors, dml::actors, permit_atom, "permit")
  CAF_ADD_ATOM(dml_actors, dml::actors, solve_atom, "solve")
  CAF_ADD_ATOM(dml_actors, dml::actors, certify_atom, "certify")
  CAF_ADD_ATOM(dml_actors, dml::actors, publish_atom, "publish")
  CAF_ADD_ATOM(dml_actors, dml::actors, top_atom, "top")
  CAF_ADD_ATOM(dml_actors, dml::actors, gaps_atom, "gaps")
  CAF_ADD_ATOM(dml_actors, dml::actors, refresh_atom, "refresh")
  CAF_ADD_ATOM(dml_actors, dml::actors, peers_atom, "peers")

  // Payload types.
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::dense_block))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::dvec))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::sparse_dvec))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::key_list))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::block_sums))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::worker_report))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::shard_stats))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::int64_list))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::worker_spec))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::shard_config))
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::kv_message))

CAF_END_TYPE_ID_BLOCK(dml_actors)
