#!/usr/bin/python3
"""Writes the input files of the README's examples into examples/.

Every file is derived from the data sets shipped in tests/data/ (see
examples/README.md for which rows and columns each one takes); where random
choices are needed (pairs, tags, comments, noise) they come from a seeded
splitmix64 generator written out below, so the output is the same on every
machine and Python version. The files are committed; tests/readme checks that
they are what this script writes.

    /usr/bin/python3 examples/make_examples.py            # (re)write examples/
    /usr/bin/python3 examples/make_examples.py --check    # exit 1 if a file differs
    /usr/bin/python3 examples/make_examples.py --out DIR  # write elsewhere

Standard library only.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, os.pardir, "tests", "data")
MASK = (1 << 64) - 1


class Rng:
    """splitmix64: a tiny generator whose stream is fixed by its seed."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def uniform(self):
        return (self.next() >> 11) / float(1 << 53)

    def normal(self):
        u1 = max(self.uniform(), 1e-300)
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def read_csv(name):
    """(header cells, rows of cells as text) of tests/data/NAME."""
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    return lines[0].split(","), [line.split(",") for line in lines[1:]]


def csv_text(header, rows):
    return "\n".join([",".join(header)] + [",".join(str(c) for c in row) for row in rows]) + "\n"


def draw_pairs(labels, rng, count, taken):
    """count pairs i < j, half must-link (same label), half cannot-link, none in `taken`."""
    out = []
    want = {1: count // 2, -1: count - count // 2}
    n = len(labels)
    while want[1] or want[-1]:
        i, j = rng.below(n), rng.below(n)
        if i == j:
            continue
        i, j = min(i, j), max(i, j)
        kind = 1 if labels[i] == labels[j] else -1
        if (i, j) in taken or not want[kind]:
            continue
        taken.add((i, j))
        want[kind] -= 1
        out.append((i, j, kind))
    return out


def karate_edges():
    _, rows = read_csv("karate_club.csv")
    edges = []
    for i, row in enumerate(rows):
        for j, cell in enumerate(row[:-1]):
            if i < j and cell == "1":
                edges.append((i, j))
    return edges, [int(row[-1]) for row in rows]


def build():
    """{relative path: text} of every example file."""
    files = {}
    iris_header, iris = read_csv("iris.csv")
    labels = [int(row[-1]) for row in iris]

    # data.svm: iris in LIBSVM ("label 1:x 2:x 3:x 4:x").
    files["data.svm"] = "".join(
        "%s %s\n" % (row[-1], " ".join("%d:%s" % (k + 1, v) for k, v in enumerate(row[:-1]))) for row in iris)

    # pairs.csv: 180 pairs on iris (4n · 0.3, the BCDNPKL paper's "much" side
    # information), 90 must-link and 90 cannot-link; new-pairs.csv: 18 more.
    rng = Rng(1)
    taken = set()
    pairs = draw_pairs(labels, rng, 180, taken)
    more = draw_pairs(labels, rng, 18, taken)
    files["pairs.csv"] = csv_text(["i", "j", "kind"], pairs)
    files["new-pairs.csv"] = csv_text(["i", "j", "kind"], more)

    # emb.csv: an embedding to import (30 items, 3 coordinates): iris rows
    # 0, 5, ..., 145, petal length, petal width and sepal length.
    files["emb.csv"] = csv_text(["key", "v0", "v1", "v2"],
                                [["item-%02d" % (i // 5), iris[i][2], iris[i][3], iris[i][0]]
                                 for i in range(0, 150, 5)])

    # new-points.csv: the last 20 rows of ionosphere (features and label).
    iono_header, iono = read_csv("ionosphere.csv")
    files["new-points.csv"] = csv_text(iono_header, iono[-20:])

    # images.csv / tags.csv: 60 "images" (iris rows 0-19, 50-69, 100-119 as
    # their visual features) and their tag counts (12 tags; each class has
    # four tags of its own, the others appear now and then).
    chosen = list(range(0, 20)) + list(range(50, 70)) + list(range(100, 120))
    files["images.csv"] = csv_text(["key"] + iris_header[:-1],
                                   [["img-%03d" % k] + iris[i][:-1] for k, i in enumerate(chosen)])
    rng = Rng(2)
    tag_rows = []
    for k, i in enumerate(chosen):
        c = labels[i]
        counts = []
        for t in range(12):
            if t // 4 == c:
                counts.append(1 + rng.below(3) if rng.uniform() < 0.8 else 0)
            else:
                counts.append(1 if rng.uniform() < 0.1 else 0)
        if not any(counts):
            counts[4 * c] = 1
        tag_rows.append(["img-%03d" % k] + counts)
    files["tags.csv"] = csv_text(["key"] + ["tag%d" % t for t in range(12)], tag_rows)

    # items.csv / attrs.csv / new-attrs.csv / last-clicks.txt: a catalogue of
    # 150 items (iris rows, keys sku-1 ... sku-150) with attributes derived
    # from them: category by class, a price from the sepal and petal
    # lengths, every tenth item discontinued; new-attrs.csv: 10 % off.
    files["items.csv"] = csv_text(["key"] + iris_header,
                                  [["sku-%d" % (i + 1)] + row for i, row in enumerate(iris)])
    categories = ["shoes", "bags", "hats"]
    attrs, new_attrs = [], []
    for i, row in enumerate(iris):
        price = round(10 * float(row[0]) + 8 * float(row[2]), 2)
        discontinued = "true" if i % 10 == 3 else "false"
        attrs.append(["sku-%d" % (i + 1), categories[labels[i]], "%.2f" % price, discontinued])
        new_attrs.append(["sku-%d" % (i + 1), categories[labels[i]], "%.2f" % round(0.9 * price, 2), discontinued])
    header = ["key", "category", "price", "discontinued"]
    files["attrs.csv"] = csv_text(header, attrs)
    files["new-attrs.csv"] = csv_text(header, new_attrs)
    files["last-clicks.txt"] = "sku-3\nsku-42\nsku-77\nsku-120\n"

    # swissroll.csv: 100 points on a Swiss roll (no randomness: a low-discrepancy
    # sequence), for RegMVU.
    rows = []
    for i in range(100):
        t = 1.5 * math.pi * (1 + 2 * (i + 0.5) / 100)
        h = 21.0 * ((i * 0.6180339887498949) % 1.0)
        rows.append(["%.6f" % (t * math.cos(t)), "%.6f" % h, "%.6f" % (t * math.sin(t))])
    files["swissroll.csv"] = csv_text(["x", "y", "z"], rows)

    # chains.csv: three far-apart chains of 12 points (unit spacing, 100 apart,
    # a little noise): the 4-NN graph has 3 connected components.
    rng = Rng(5)
    rows = []
    for i in range(36):
        x = 100.0 * (i // 12) + (i % 12) + 0.1 * rng.normal()
        y = 0.1 * rng.normal()
        rows.append(["%.4f" % x, "%.4f" % y])
    files["chains.csv"] = csv_text(["x", "y"], rows)

    # community/: a social data set on Zachary's karate club: its 34 members
    # are the users and its 78 friendships the contacts; each member posts 3
    # photos (visual features: iris rows, setosa for the instructor's club 0,
    # virginica for the administrator's club 1), tagged, commented and faved
    # by friends; groups: the two clubs, and group 2 for members with >= 6 friends.
    edges, club = karate_edges()
    friends = {u: [] for u in range(34)}
    for a, b in edges:
        friends[a].append(b)
        friends[b].append(a)
    rng = Rng(7)
    photos, tags, comments, faves = [], [], [], []
    for u in range(34):
        for p in range(3):
            photo = len(photos)
            row = iris[(0 if club[u] == 0 else 100) + (3 * u + p) % 50]
            lat = (42.36 if club[u] == 0 else 42.44) + 0.01 * rng.normal()
            lon = (-71.06 if club[u] == 0 else -71.11) + 0.01 * rng.normal()
            day = 100 * club[u] + rng.below(60)
            photos.append([u, day, "%.5f" % lat, "%.5f" % lon] + row[:-1])
            first = 5 * club[u]
            for tag in sorted({first + rng.below(5), first + rng.below(5)}):
                tags.append([photo, tag])
            for author in sorted({friends[u][rng.below(len(friends[u]))] for _ in range(2)}):
                comments.append([photo, author])
    for u in range(34):
        seen = set()
        for _ in range(2):
            v = friends[u][rng.below(len(friends[u]))]
            photo = 3 * v + rng.below(3)
            if photo not in seen:
                seen.add(photo)
                faves.append([u, photo])
    groups = [[u, club[u]] for u in range(34)] + [[u, 2] for u in range(34) if len(friends[u]) >= 6]
    groups.sort()
    files["community/photos.csv"] = csv_text(["owner", "day", "latitude", "longitude", "v0", "v1", "v2", "v3"], photos)
    files["community/tags.csv"] = csv_text(["photo", "tag"], tags)
    files["community/comments.csv"] = csv_text(["photo", "author"], comments)
    files["community/contacts.csv"] = csv_text(["user_a", "user_b"], edges)
    files["community/groups.csv"] = csv_text(["user", "group"], groups)
    files["community/faves.csv"] = csv_text(["user", "photo"], faves)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="directory to write (default: examples/)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args()
    files = build()
    differ = []
    for rel, text in sorted(files.items()):
        path = os.path.join(args.out, rel)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        differ.append(rel)
            except FileNotFoundError:
                differ.append(rel + " (missing)")
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if differ:
        print("examples differ from make_examples.py's output: " + ", ".join(differ) +
              " (run /usr/bin/python3 examples/make_examples.py)", file=sys.stderr)
        return 1
    if not args.check:
        print("wrote %d files into %s" % (len(files), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
