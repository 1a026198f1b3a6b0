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
  }
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
