#!/usr/bin/python3
"""Lists C++ functions in core/, server/ and client/ longer than a limit.

Usage: scripts/function_lengths.py [--limit 150] [--source-dir DIR] [--allow FILE]

Lengths come from Universal Ctags (Debian package universal-ctags):
`ctags --output-format=json --fields=+ne --c++-kinds=f --languages=C++`,
length = end line - start line + 1 of each function definition.

What is measured: named functions (free functions, member functions, inline
definitions in headers). A lambda is counted inside its enclosing function
only (ctags reports it as an `__anon...` function nested in the enclosing
one), so `return Guard([&] { ... });` counts once, in the function that
holds it. A lambda outside every named function (at namespace scope) is
measured on its own, under the name `<lambda>`. Python files (client/python)
are not read: ctags is restricted to C++.

Exits 1 and prints `file:line name length` for every function over the
limit that the allow-list (scripts/function_lengths_allow.txt: one
`path name` per line, `#` starts a comment) does not name; exits 1 too when
an allow-list entry names no long function any more, so the list only
shrinks. Exits 0 otherwise. Registered as the ctest `style.function_lengths`.
"""
import argparse
import json
import os
import subprocess
import sys

DIRS = ("core", "server", "client")


def read_allow_list(path):
    allowed = set()
    if not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{number}: expected `path name`, got {raw.strip()!r}")
            allowed.add((parts[0], parts[1]))
    return allowed


def function_tags(source_dir):
    dirs = [d for d in DIRS if os.path.isdir(os.path.join(source_dir, d))]
    cmd = ["ctags", "--output-format=json", "--fields=+ne", "--c++-kinds=f",
           "--languages=C++", "-R", "-f", "-"] + dirs
    try:
        out = subprocess.run(cmd, cwd=source_dir, check=True, capture_output=True,
                             text=True).stdout
    except FileNotFoundError:
        sys.exit("function_lengths: ctags not found (apt-get install universal-ctags)")
    tags = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag.get("kind") != "function" or "end" not in tag:
            continue
        tags.append(tag)
    return tags


def long_functions(tags, limit):
    """(path, line, name, length) of the functions over the limit."""
    named = {}
    for tag in tags:
        if not tag["name"].startswith("__anon"):
            named.setdefault(tag["path"], []).append((tag["line"], tag["end"]))
    found = []
    for tag in tags:
        path, start, end, name = tag["path"], tag["line"], tag["end"], tag["name"]
        if name.startswith("__anon"):
            # A lambda: part of the named function around it, if there is one.
            if any(s <= start and end <= e for s, e in named.get(path, [])):
                continue
            name = "<lambda>"
        length = end - start + 1
        if length > limit:
            found.append((path, start, name, length))
    return sorted(found)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--limit", type=int, default=150, help="longest allowed function, lines")
    parser.add_argument("--source-dir", default=os.path.dirname(here), help="repository root")
    parser.add_argument("--allow", default=os.path.join(here, "function_lengths_allow.txt"),
                        help="allow-list file (`path name` per line)")
    args = parser.parse_args()

    allowed = read_allow_list(args.allow)
    found = long_functions(function_tags(args.source_dir), args.limit)
    over = [f for f in found if (f[0], f[2]) not in allowed]
    stale = sorted(allowed - {(f[0], f[2]) for f in found})
    for path, line, name, length in over:
        print(f"{path}:{line} {name} {length}")
    for path, name in stale:
        print(f"{args.allow}: `{path} {name}` is no longer over {args.limit} lines; "
              "remove it from the allow-list")
    if over:
        print(f"function_lengths: {len(over)} function(s) longer than {args.limit} lines; "
              "split them by meaning (a helper per phase), see scripts/function_lengths.py")
    if over or stale:
        return 1
    print(f"function_lengths: no function in {', '.join(DIRS)} over {args.limit} lines "
          f"({len(allowed)} allowed by {os.path.basename(args.allow)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
