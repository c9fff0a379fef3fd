"""Reading data-set and constraint files in the layouts the `kls` CLI reads.

CSV: a header line, then one row per point; every column is a number; the last
column is the integer class label when its header is ``label``; an optional
first column named ``key`` holds string item keys.

LIBSVM: ``label idx:val idx:val ...`` with 1-based ascending indices; labels
that are all -1/+1 become 0/1, other labels must be non-negative class ids.

Constraints: lines ``i,j,kind`` with kind 1 / -1 / must / cannot; ``#``
comments, blank lines and a non-numeric first line (a header) are skipped.

Errors are ValueError naming the file and line; the server checks the
content again (finite values, ranges) when it is uploaded.
"""

import os

import numpy as np


def _where(path, line_no):
    return "%s line %d" % (path, line_no)


def _int(text):
    """An integer, also from an integral float such as "1.0"; None otherwise."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    if value.is_integer():
        return int(value)
    return None


def read_csv(path):
    """(features, labels or None, keys or None) of a CSV data-set file."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = None
    line_no = 0
    for line_no, line in enumerate(lines, 1):
        if line.strip():
            header = [c.strip() for c in line.split(",")]
            break
    if header is None:
        raise ValueError("%s: empty input (no header line)" % path)
    has_key = header[0] == "key"
    has_label = header[-1] == "label"
    first = 1 if has_key else 0
    dim = len(header) - first - (1 if has_label else 0)
    if dim <= 0:
        raise ValueError("%s: the header has no feature columns" % path)
    rows, labels, keys = [], [], []
    for number, line in enumerate(lines[line_no:], line_no + 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            raise ValueError("%s: ragged row with %d columns, the header has %d"
                             % (_where(path, number), len(cells), len(header)))
        if has_key:
            keys.append(cells[0])
        try:
            rows.append([float(c) for c in cells[first:first + dim]])
        except ValueError as e:
            raise ValueError("%s: %s" % (_where(path, number), e)) from None
        if has_label:
            label = _int(cells[-1])
            if label is None or label < 0:
                raise ValueError('%s, column label: "%s" is not a non-negative integer class id'
                                 % (_where(path, number), cells[-1]))
            labels.append(label)
    if not rows:
        raise ValueError("%s: empty data set (a header but no rows)" % path)
    return (np.asarray(rows, dtype=np.float64),
            np.asarray(labels, dtype=np.int32) if has_label else None,
            keys if has_key else None)


def read_libsvm(path):
    """(features, labels) of a LIBSVM data-set file (dense features)."""
    path = os.fspath(path)
    entries, raw_labels = [], []
    dim = 0
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            tokens = line.split("#", 1)[0].split()
            if not tokens:
                continue
            label = _int(tokens[0])
            if label is None:
                raise ValueError('%s: label "%s" is not an integer' % (_where(path, line_no), tokens[0]))
            row = len(raw_labels)
            raw_labels.append(label)
            previous = 0
            for token in tokens[1:]:
                index, sep, value = token.partition(":")
                if not sep:
                    raise ValueError('%s: token "%s" is not index:value' % (_where(path, line_no), token))
                try:
                    index, value = int(index), float(value)
                except ValueError:
                    raise ValueError('%s: token "%s" is not index:value' % (_where(path, line_no), token)) from None
                if index <= previous:
                    raise ValueError("%s: feature index %d is not greater than the previous index %d"
                                     % (_where(path, line_no), index, previous))
                previous = index
                dim = max(dim, index)
                entries.append((row, index - 1, value))
    if not raw_labels:
        raise ValueError("%s: empty data set (no rows)" % path)
    if dim == 0:
        raise ValueError("%s: no feature has a non-zero value" % path)
    features = np.zeros((len(raw_labels), dim))
    for row, col, value in entries:
        features[row, col] = value
    if all(l in (-1, 1) for l in raw_labels):
        labels = [1 if l == 1 else 0 for l in raw_labels]
    else:
        for row, l in enumerate(raw_labels):
            if l < 0:
                raise ValueError("%s: label %d of row %d is negative (only -1/+1 or non-negative class ids "
                                 "are accepted)" % (path, l, row + 1))
        labels = raw_labels
    return features, np.asarray(labels, dtype=np.int32)


def read_dataset(path):
    """A CSV file (by its .csv extension) or a LIBSVM file (anything else)."""
    if os.fspath(path).lower().endswith(".csv"):
        return read_csv(path)
    features, labels = read_libsvm(path)
    return features, labels, None


_KINDS = {"1": 1, "+1": 1, "must": 1, "-1": -1, "cannot": -1}


def read_constraints(path):
    """An m × 3 int array (i, j, kind) from a constraints file."""
    path = os.fspath(path)
    out = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [c.strip() for c in line.split(",")]
            if len(fields) != 3:
                raise ValueError("%s: expected 'i,j,kind', got '%s'" % (_where(path, line_no), line))
            try:
                i, j = int(fields[0]), int(fields[1])
            except ValueError:
                if not out and line_no == 1:
                    continue  # header
                raise ValueError("%s: i and j must be integers, got '%s'" % (_where(path, line_no), line)) from None
            if fields[2] not in _KINDS:
                raise ValueError("%s: kind '%s' is not 1, -1, must or cannot" % (_where(path, line_no), fields[2]))
            out.append((i, j, _KINDS[fields[2]]))
    return np.asarray(out, dtype=np.int64).reshape(-1, 3)
