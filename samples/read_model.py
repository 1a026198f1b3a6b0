#!/usr/bin/python3
"""Reads a dml Cap'n Proto model file (dml-train -o m.capnp --model-format capnp)
from Python and applies it to a LIBSVM file.

Debian 12 has no Cap'n Proto module for Python (python3-capnp is not in the
archive), so the file is turned into JSON by the `capnp` tool (Debian
package capnproto) with our schema; with pycapnp installed, the same is
`capnp.load("wire.capnp").Envelope.from_bytes(data).modelFile`.

Usage: samples/read_model.py MODEL.capnp [DATA.libsvm]
"""
import json
import os
import subprocess
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "net", "dml", "net", "wire.capnp")


def read_model(path):
    with open(path, "rb") as f:
        out = subprocess.run(["capnp", "convert", "binary:json", SCHEMA, "Envelope"], stdin=f,
                             capture_output=True, check=True)
    envelope = json.loads(out.stdout)
    if "modelFile" not in envelope:
        sys.exit(f"{path}: not a model file (envelope holds {sorted(envelope)})")
    return envelope["modelFile"]


def main():
    m = read_model(sys.argv[1])
    w = m.get("weights", [])
    bias = m.get("bias", -1)
    print(f"model {m['model']['kind']} lambda {m['model']['lambda']} features {len(w)} "
          f"nonzero {sum(1 for v in w if v != 0)} primal {m.get('primal')} gap {m.get('gap')} "
          f"labels {m.get('labels', [])} bias {bias}")
    if len(sys.argv) > 2:
        # Decision values w . x (+ the bias feature), as dml-predict computes them.
        d = len(w) - (1 if bias >= 0 else 0)
        neg, pos = (m.get("labels") or [-1, 1])
        right = total = 0
        for line in open(sys.argv[2]):
            parts = line.split("#")[0].split()
            if not parts:
                continue
            z = sum(w[int(i) - 1] * float(v) for i, v in (t.split(":") for t in parts[1:])
                    if int(i) <= d)
            if bias >= 0:
                z += w[d] * bias
            right += (pos if z > 0 else neg) == float(parts[0])
            total += 1
        print(f"accuracy {100.0 * right / total:.4f}% ({right}/{total})")


if __name__ == "__main__":
    main()
