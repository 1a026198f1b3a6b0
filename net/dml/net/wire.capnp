# libdml wire schema: every message that crosses a process boundary, and the
# checkpoint/model files, are one Envelope.
#
# Byte order: Cap'n Proto is little-endian by definition, whatever the host.
# Lists of primitives (List(UInt32), List(Float32)) are stored as contiguous
# packed arrays of little-endian elements, so vectors travel as contiguous
# bytes and a little-endian host copies them with one memcpy.
#
# Evolution rules: only add fields with new ordinals and new union members at
# the end; never renumber, retype or remove. A change that old readers would
# misinterpret bumps `schemaVersion` (the constant below and the field the
# writer sets). Readers reject any version other than the one they speak.

@0x975f76733ac91c3f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("dml::net::wire");

const schemaVersion :UInt16 = 1;
# The version this schema file describes; written into every Envelope.

struct Envelope {
  # The root of every message and file.

  schemaVersion @0 :UInt16;
  # Version of this schema the writer used (see the constant above). Zero
  # means "not set" and is never valid.

  union {
    # The payload: exactly one message kind. A reader that finds a kind it does not expect
    # (or one from a newer schema it does not know) rejects the message.

    none @1 :Void;
    # Discriminant 0, the default: an envelope with no payload. Never sent;
    # it makes a zeroed or truncated envelope decode to "no payload" instead
    # of an empty vector.

    sparseVector @2 :SparseVector;
    denseVector @3 :DenseVector;

    # Training messages (actors/dml/actors/messages.hpp; one member per C++
    # payload type). Atoms and actor handles travel in CAF's own framing
    # around these payloads; every libdml payload is one Envelope.
    vector @4 :Vector;
    sparseUpdate @5 :SparseUpdate;
    keyList @6 :KeyList;
    blockSums @7 :BlockSums;
    workerReport @8 :WorkerReport;
    shardStats @9 :ShardStats;
    workerSpec @10 :WorkerSpec;
    shardSpec @11 :ShardSpec;
    progress @12 :Progress;
    error @13 :Error;
    checkpoint @14 :Checkpoint;
    modelFile @15 :ModelFile;
    int64List @16 :Int64List;
    nodeInfo @17 :NodeInfo;
    bulkVector @18 :BulkVector;
    kvMessage @19 :KvMessage;
  }

  fileDigest @20 :UInt32;
  # Files only (checkpoints, model files): XXH64 (Checksum64 in
  # libdml/dml/data/cache.hpp) of the payload's canonical form (Cap'n Proto
  # canonicalization of the union member's struct), its two halves XORed,
  # lowest bit set so that it is never 0 (31 bits of check). Not
  # cryptographic: it catches accidents, not an attacker. A file changed
  # after it was written (a flipped bit, a torn copy) is refused instead of
  # resumed or served. 0 in messages, and in files written
  # before the field existed (read unchecked). It fills the spare half of
  # the envelope's data word: messages keep their exact bytes.
}

struct Vector {
  # A dense float64 vector (model ranges, gradients, CoCoA+ deltas): all
  # entries in order; finite. At most 2^28 entries.
  values @0 :List(Float64);
}

struct SparseUpdate {
  # A sparse update of one parameter shard's key range.
  offsets @0 :List(UInt32);
  # Positions relative to the range's first key; strictly increasing. The
  # range bound is checked by the shard, which alone knows it.
  values @1 :List(Float64);
  # values[k] at offsets[k]; same length as `offsets`; finite.
}

struct KeyList {
  # Keys of a shard's range to pull: offsets from its first key, strictly increasing.
  keys @0 :List(UInt32);
}

struct Int64List {
  # Per-worker counters (e.g. clocks).
  values @0 :List(Int64);
}

struct BlockSums {
  # One worker's share of the global objective (dml::BlockCertificate).
  lossSum @0 :Float64;  # sum of its examples' losses at the shared vector
  gapSum @1 :Float64;   # its share of the duality gap (unscaled)
  regSum @2 :Float64;   # its share of the regulariser (primal models)
}

struct WorkerReport {
  worker @0 :Int32;      # worker index in [0, K)
  clock @1 :Int64;       # steps (SGD modes) or rounds (cocoa) completed; >= 0
  processed @2 :Int64;   # examples or coordinates processed in total; >= 0
  bytes @3 :Int64;       # payload bytes pushed and pulled in total; >= 0
  deviceBytes @4 :Int64; # cocoa with DuHL workers: bytes moved to its device in total; >= 0
  deviceSwaps @5 :Int64; # DuHL: coordinates copied to its device in total; >= 0
  failure @6 :Text;      # a worker's failure after it replied (a round's Solve, a push
                         # refused): its message, at most 4096 bytes; empty: none
  note @7 :Text;         # a line for the job's progress stream (the worker's GPU, or its
                         # fallback to the CPU), at most 4096 bytes; empty: none
}

struct ShardStats {
  updates @0 :Int64;              # pushes applied
  pulls @1 :Int64;                # pulls answered
  bytesIn @2 :Int64;
  bytesOut @3 :Int64;
  maxGrantedStaleness @4 :Int64;  # ssp: largest clock lead granted to a pull
  clocks @5 :List(Int64);         # per worker: pushes received
}

enum Mode {
  # dml::Mode; the names dml::ParseMode accepts.
  sync @0;
  async @1;
  ssp @2;
  easgd @3;
  hogwild @4;
  modelAveraging @5;
  cocoa @6;
  duhl @7;
}

enum ModelKind {
  # dml::ModelKind.
  ridge @0;
  lasso @1;
  elasticNet @2;
  logisticL2 @3;
  logisticL1 @4;
  hingeSvm @5;
  squaredHingeSvm @6;
}

struct Model {
  kind @0 :ModelKind;
  lambda @1 :Float64;   # > 0, finite
  l1Ratio @2 :Float64;  # elastic net's eta, (0, 1]
}

struct LoadOptions {
  # dml::LibsvmOptions.
  regression @0 :Bool;            # task: false = classification
  hasBinarize @1 :Bool;           # whether binarizeThreshold applies
  binarizeThreshold @2 :Float64;
  numFeatures @3 :Int64;          # 0 = from the data
  threads @4 :Int32;              # 0 = hardware threads
}

struct WorkerSpec {
  # What a node needs to spawn one worker; the data is read from the node's
  # own disk at `dataPath` (in-memory datasets never cross a process).
  mode @0 :Mode;
  index @1 :Int32;        # in [0, workers)
  workers @2 :Int32;      # K >= 1
  model @3 :Model;
  seed @4 :UInt64;
  dataPath @5 :Text;      # non-empty
  load @6 :LoadOptions;
  batchSize @7 :Int32;    # SGD modes, >= 1
  step0 @8 :Float64;      # > 0
  stepDecay @9 :Float64;  # >= 0
  tau @10 :Int32;         # easgd, model-averaging; >= 1
  localEpochs @11 :Float64;  # cocoa H as a fraction of the block
  gamma @12 :Float64;        # cocoa aggregation, (0, 1]
  sigmaPrime @13 :Float64;   # cocoa subproblem scaling, > 0
  featureSteps @14 :List(Float64);  # SGD: per-feature step factors (d, each > 0); empty: all 1
  localSolver @15 :Int32;    # cocoa: 0 the CPU SCD, 1 tpa-scd on a GPU, 2 duhl
  device @16 :Int32;         # cocoa with tpa-scd: the CUDA device, >= 0
  gpuFallback @17 :Bool;     # cocoa with tpa-scd: the CPU solver where no GPU can run it
  # cocoa with duhl: the device budget (bytes, or 0 and a fraction of the
  # block's bytes in (0, 1]), the selection rule (0 gap, 1 gap-greedy,
  # 2 random, 3 sequential, 4 resident), gap threads in [0, 1024], passes
  # over the block per round in (0, 1e6].
  duhlDeviceBytes @18 :Int64;
  duhlDeviceFraction @19 :Float64 = 0.1;
  duhlSelection @20 :Int32;
  duhlGapThreads @21 :Int32 = 1;
  duhlPasses @22 :Float64 = 5.0;
  duhlGpu @23 :Bool;         # cocoa with duhl: the blocks on a GPU (TPA-SCD)
  saga @24 :Bool;            # sync, async, ssp: SAGA pushes (dml::SagaGradient)
}

struct ShardSpec {
  # What a node needs to spawn one parameter shard of keys [begin, end).
  mode @0 :Mode;
  workers @1 :Int32;
  begin @2 :Int64;
  end @3 :Int64;          # begin < end
  model @4 :Model;
  step0 @5 :Float64;
  stepDecay @6 :Float64;
  gamma @7 :Float64;
  easgdAlpha @8 :Float64;
  staleness @9 :Int32;    # ssp s >= 0
  featureSteps @10 :List(Float64);  # the range's step factors (end - begin, each > 0); empty: all 1
  sagaScale @11 :Float64;  # SAGA: |B| / n, finite, >= 0; 0: none
}

struct Progress {
  # One entry of a job's metrics stream (dml::Progress).
  round @0 :Int32;
  seconds @1 :Float64;
  epochs @2 :Float64;
  primal @3 :Float64;
  dual @4 :Float64;      # -inf where no dual is tracked
  gap @5 :Float64;       # +inf where no dual is tracked
  bytesExchanged @6 :Int64;
  staleness @7 :List(Int64);
  event @8 :Text;        # what happened (a lost node, a restore), else empty
  deviceBytes @9 :Int64; # DuHL: bytes moved to the device(s) so far
  deviceSwaps @10 :Int64; # DuHL: coordinates copied to the device(s) so far
}

struct Error {
  # An error returned to a sender or a job: absl::StatusCode and message.
  code @0 :Int32;
  message @1 :Text;
}

struct ModelFile {
  # A trained model on disk (dml-train --model-format capnp; dml-predict reads it).
  model @0 :Model;
  weights @1 :List(Float64);  # w, length d (the bias feature's weight last, if any); finite
  primal @2 :Float64;         # the training objective at w; NaN when unknown
  gap @3 :Float64;            # its duality gap; +inf where no dual is tracked, NaN when unknown
  labels @4 :List(Float64);   # classification: the data's values that were -1 and +1, or empty
  bias @5 :Float64 = -1;      # >= 0: the last weight's feature is this constant (-B); -1: none
  binarize @6 :Float64 = nan; # classification read with label > binarize as +1; NaN: none
}

struct Checkpoint {
  # A job's state at the end of a round: enough to resume it.
  mode @0 :Mode;
  model @1 :Model;
  round @2 :Int32;
  epochs @3 :Float64;
  seconds @4 :Float64;
  shared @5 :List(Float64);     # the shared vector (w, or v = A w for primal cocoa)
  workers @6 :List(WorkerState);
  history @7 :List(Progress);
  bytesExchanged @8 :Int64;
  dataRows @9 :Int64;           # shape of the data it was trained on
  dataCols @10 :Int64;
  seed @11 :UInt64;
  clock @12 :Int64;             # SGD modes: the clock every worker restarts from
  workerCount @13 :Int32;       # K of the job that wrote it

  struct WorkerState {
    index @0 :Int32;
    clock @1 :Int64;
    processed @2 :Int64;
    local @3 :List(Float64);    # dual variables (dual cocoa) or local w (primal cocoa)
  }
}

struct NodeInfo {
  # A node's answer to a hello: who it is.
  name @0 :Text;
  pid @1 :Int64;
  actors @2 :Int32;   # actors it hosts now
}

struct BulkVector {
  # Stands for a `Vector` too large to copy through CAF's middleman: its
  # `count` little-endian float64 values wait at the sender's bulk channel
  # until the receiver fetches them, once, by `ticket` (byte protocol in
  # net/dml/net/bulk.hpp). Valid only inside a CAF message between processes
  # where a `Vector` is expected; never in files; expires after 60 s.
  host @0 :Text;      # the sender's TCP bulk endpoint: address or name, 1..255 bytes
  port @1 :UInt16;    # non-zero
  ticket @2 :UInt64;  # random, single use
  count @3 :UInt64;   # entries; at most 2^28
  local @4 :Text;     # the sender's abstract Unix socket name, 0..100 bytes;
                      # receivers on the same machine fetch there (single
                      # copy), others use host:port. Empty: TCP only.
  address @5 :UInt64; # same machine only: where the values are in the
                      # sender's memory, read directly (process_vm_readv)
                      # with no request; 0: ask by the byte protocol
  slot @6 :UInt64;    # same machine only: the address of the sender's
                      # slot, two little-endian u64 {ticket, byte count}
                      # while the values are held; a reader checks it
                      # before and (the ticket) after copying.
                      # 0 with `address` 0. Any value is safe to receive:
                      # a wrong one fails the check and the reader asks.
  segment @7 :UInt32; # same machine only: the values lie in segment
                      # `segment` (1-based) of the sender's shared arena, at
                      # byte `offset`; a reader holds the offer (op HOLD),
                      # maps the segment (op SEGMENT: a sealed memfd) and
                      # reads them in place. 0: not in the arena.
  offset @8 :UInt64;  # a multiple of 8; 0 with `segment` 0
}

struct SparseVector {
  # A sparse float vector of length `dim` with nonzeros at `indices`.

  dim @0 :UInt64;
  # Logical length of the vector. Indices are 32-bit, so dim <= 2^32.

  indices @1 :List(UInt32);
  # Positions of the stored entries: strictly increasing, each < dim.

  values @2 :List(Float32);
  # Stored entries, values[k] at indices[k]; same length as `indices`; finite
  # (no NaN or infinity).
}

struct DenseVector {
  # A dense float vector; its length is the list's length.

  values @0 :List(Float32);
  # All entries in order; finite.
}

struct KvMessage {
  # One message of the key-value store's relocation protocol
  # (actors/dml/actors/kv.hpp): an operation travelling to a key's owner,
  # an answer going back to the requester, or a step of a relocation.
  kind @0 :UInt8;        # 1 pull, 2 push, 3 localize, 4 hand-over, 5 transfer,
                         # 6 pull answer, 7 push answer, 8 barrier reached,
                         # 9 barrier released, 10 the sender stops on purpose,
                         # 11 the sender received our 10 (and all before it)
  requester @1 :Int32;   # rank of the node whose operation this is; answers go there
  sender @2 :Int32;      # rank that sent this message
  owner @3 :Int32;       # answers: rank that served them; hand-over: the new owner
  hops @4 :Int32;        # times the operation was forwarded; >= 0
  op @5 :UInt64;         # the requester's operation id
  keys @6 :List(Int64);  # keys (pull, push, answers) or blocks (localize, hand-over,
                         # transfer); >= 0; bounds are checked by the receiver
  values @7 :List(Float64);  # push deltas, pulled values, transferred blocks; finite
}
