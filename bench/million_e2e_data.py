#!/usr/bin/python3
"""Data sets for bench/million_e2e.sh (and tests/e2e/million_e2e_test.cc's
shape): N rows of labelled points, written in chunks so that a million rows
never sit in memory as text.

  dense   CSV, header f0..f{d-1},label: Gaussian classes (default 2) in
          d = 32 dimensions (class centres N(0, 1.5^2 I), points centre +
          N(0, I)); with --pairs P also a constraints file OUT.pairs of P
          distinct random pairs i != j ('i,j,kind' lines), half must-link
          (same class, kind 1), half cannot-link (kind -1) — the issue's 4 n
          pairs make almost every point constrained.
  libsvm  LIBSVM, adult-like: 123 binary features in 14 one-hot fields (one
          non-zero per field, so 14 non-zeros a row), two classes; each field's
          value is drawn from a class-dependent distribution.

Deterministic for a given (kind, n, seed).
Usage: million_e2e_data.py dense|libsvm N OUT [--seed S] [--classes C] [--pairs P]
"""
import argparse
import sys

import numpy as np

CHUNK = 50_000
# Field sizes of the one-hot fields (sum 123, as in the a9a / adult data set).
FIELDS = [9, 16, 7, 15, 6, 5, 2, 8, 8, 10, 9, 12, 14, 2]


def write_dense(n, out, rng, classes, d=32):
    centres = rng.normal(0.0, 1.5, size=(classes, d))
    out.write(",".join([f"f{j}" for j in range(d)] + ["label"]) + "\n")
    all_labels = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        labels = rng.integers(0, classes, size=m)
        all_labels[start:start + m] = labels
        x = centres[labels] + rng.normal(size=(m, d))
        line = ",".join(["%.5f"] * d) + ",%d\n"
        out.write("".join(line % (*x[i], labels[i]) for i in range(m)))
    return all_labels


def write_pairs(labels, count, out, rng):
    """count // 2 must-links (then the rest cannot-links): distinct unordered pairs i != j."""
    n = len(labels)
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(labels.max() + 2))
    taken = np.empty(0, dtype=np.int64)
    for kind, want in ((1, count // 2), (-1, count - count // 2)):
        got = np.empty((0, 2), dtype=np.int64)
        while len(got) < want:
            k = 2 * (want - len(got)) + 1000
            i = rng.integers(0, n, size=k)
            if kind == 1:  # j: a random point of i's class
                lo, hi = starts[labels[i]], starts[labels[i] + 1]
                j = order[lo + (rng.random(k) * (hi - lo)).astype(np.int64)]
            else:
                j = rng.integers(0, n, size=k)
            ok = (i != j) & ((labels[i] == labels[j]) == (kind == 1))
            pair = np.stack([np.minimum(i, j), np.maximum(i, j)], axis=1)[ok]
            keys = pair[:, 0] * n + pair[:, 1]
            keys, first = np.unique(keys, return_index=True)
            pair = pair[first[~np.isin(keys, taken)]]
            pair = pair[rng.permutation(len(pair))][: want - len(got)]
            got = np.concatenate([got, pair])
            taken = np.union1d(taken, pair[:, 0] * n + pair[:, 1])
        out.write("".join(f"{a},{b},{kind}\n" for a, b in got.tolist()))


def write_libsvm(n, out, rng):
    assert sum(FIELDS) == 123
    offsets = np.cumsum([0] + FIELDS[:-1]) + 1  # LIBSVM indices are 1-based
    # Per class and field: a value distribution (Dirichlet, so fields differ).
    probs = [[rng.dirichlet(np.full(size, 0.7)) for size in FIELDS] for _ in range(2)]
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        labels = rng.integers(0, 2, size=m)
        rows = np.where(labels == 1, "+1", "-1").astype(object)
        for f, size in enumerate(FIELDS):
            values = np.empty(m, dtype=np.int64)
            for c in (0, 1):
                mask = labels == c
                values[mask] = rng.choice(size, size=int(mask.sum()), p=probs[c][f])
            rows = rows + " " + (values + offsets[f]).astype(str).astype(object) + ":1"
        out.write("\n".join(rows.tolist()) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["dense", "libsvm"])
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--classes", type=int, default=2, help="dense: number of classes (default 2)")
    p.add_argument("--pairs", type=int, default=0, help="dense: write OUT.pairs with this many pairs")
    a = p.parse_args()
    if a.n < 2 or a.classes < 2:
        sys.exit("N and --classes must be >= 2")
    rng = np.random.default_rng(a.seed)
    with open(a.out, "w") as out:
        if a.kind == "libsvm":
            write_libsvm(a.n, out, rng)
            return
        labels = write_dense(a.n, out, rng, a.classes)
    if a.pairs > 0:
        with open(a.out + ".pairs", "w") as out:
            write_pairs(labels, a.pairs, out, rng)


if __name__ == "__main__":
    main()
