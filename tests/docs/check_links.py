#!/usr/bin/env python3
"""Fails when a document or a code comment names a file the repository lacks.

Usage: check_links.py REPO_ROOT

Scans README.md, docs/**/*.md and the source files (*.h, *.cc, *.proto, *.py,
*.sh, CMakeLists.txt, *.cmake, Makefile, Dockerfile, *.yml / *.yaml) of the
repository for
  * paths of the form docs/....md (anywhere in a Markdown file, in the comments
    of a source file), resolved against the repository root;
  * relative Markdown links [text](target) in the Markdown files, resolved
    against the linking file's directory (http(s)/mailto links are skipped);
    a #fragment pointing into a Markdown file must name one of its headings
    (GitHub's anchor rule);
  * document names written in capitals (NAME.md): each must be a file the
    repository has somewhere; and relative paths that climb out of the
    repository (../dir/...): no file may cite what lives outside it.
CHANGELOG.md is history and is not scanned. Standard library only; exit 0 when
everything resolves, 1 with one line per problem otherwise.
"""
import os
import re
import sys

SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}
SOURCE_SUFFIXES = (".h", ".cc", ".cpp", ".proto", ".py", ".sh", ".cmake", ".yml", ".yaml")
SOURCE_NAMES = {"CMakeLists.txt", "Makefile", "Dockerfile"}
DOC_PATH = re.compile(r"(?<![\w./-])((?:\.\./)*docs/(?:[\w-]+/)*[\w-]+\.md)\b")
MD_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CAPS_DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_]*\.md)\b")
CLIMB = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-]+)")


def outside_citations(text, path, root, md_names):
    """(offset, what) for each capitals document name the repository lacks
    and each ../ path that, from `path`'s directory, leaves `root`."""
    out = []
    for m in CAPS_DOC.finditer(text):
        if m.group(1) not in md_names:
            out.append((m.start(), m.group(1)))
    root_abs = os.path.abspath(root)
    for m in CLIMB.finditer(text):
        dest = os.path.abspath(os.path.join(os.path.dirname(path), m.group(1)))
        if os.path.commonpath([root_abs, dest]) != root_abs:
            out.append((m.start(), m.group(1)))
    return out
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def repo_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith("build-") and not d.startswith("."))
        for name in sorted(filenames):
            yield os.path.join(dirpath, name)


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    for path in repo_files(os.path.join(root, "docs")):
        if path.endswith(".md"):
            files.append(path)
    return [f for f in files if os.path.isfile(f)]


def source_files(root):
    for path in repo_files(root):
        name = os.path.basename(path)
        if name in SOURCE_NAMES or name.endswith(SOURCE_SUFFIXES):
            yield path


def comment_text(path, text):
    """The comment parts of a source file (approximate: // and /* */ for C-like
    files, # for scripts and CMake), so that string literals naming docs paths
    in code are not taken for references. Markdown-ish files return all text."""
    if path.endswith((".h", ".cc", ".cpp", ".proto")):
        parts = re.findall(r"//[^\n]*|/\*.*?\*/", text, flags=re.S)
        return "\n".join(parts)
    if path.endswith(".py"):
        # comments and docstrings
        parts = re.findall(r"#[^\n]*|\"\"\".*?\"\"\"|'''.*?'''", text, flags=re.S)
        return "\n".join(parts)
    parts = re.findall(r"#[^\n]*", text)
    return "\n".join(parts)


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation other
    than '-' and '_' removed, spaces to '-'."""
    h = re.sub(r"`([^`]*)`", r"\1", heading)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache):
    if path not in cache:
        seen = {}
        result = set()
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    in_code = not in_code
                    continue
                m = None if in_code else HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                result.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = result
    return cache[path]


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def strip_code_blocks(text):
    """Replaces fenced code blocks by blank lines (line numbers stay right):
    commands and sample output in them are not links."""
    out = []
    in_code = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            out.append("")
            continue
        out.append("" if in_code else line)
    return "\n".join(out)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    problems = []
    anchor_cache = {}
    checked = 0
    md_names = {f for _, _, files in os.walk(root) for f in files if f.endswith(".md")}

    def rel(p):
        return os.path.relpath(p, root)

    for md in markdown_files(root):
        raw = open(md, encoding="utf-8").read()
        text = strip_code_blocks(raw)
        for m in DOC_PATH.finditer(raw):
            target = m.group(1)
            # docs/x.md names a file from the repository root; ../docs/x.md or
            # a path inside a link is checked as a link below.
            if target.startswith("../"):
                continue
            checked += 1
            if not os.path.isfile(os.path.join(root, target)):
                problems.append("%s:%d: names %s, which does not exist" % (rel(md), line_of(raw, m.start()), target))
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            checked += 1
            path_part, _, fragment = target.partition("#")
            dest = md if not path_part else os.path.normpath(os.path.join(os.path.dirname(md), path_part))
            where = "%s:%d" % (rel(md), line_of(text, m.start()))
            if not os.path.exists(dest):
                problems.append("%s: link to %s, which does not exist" % (where, target))
                continue
            if fragment and dest.endswith(".md") and os.path.isfile(dest):
                if fragment.lower() not in anchors(dest, anchor_cache):
                    problems.append("%s: link to %s: no heading with the anchor #%s in %s"
                                    % (where, target, fragment, rel(dest)))
        for at, what in outside_citations(raw, md, root, md_names):
            problems.append("%s:%d: cites %s, which is not in the repository" % (rel(md), line_of(raw, at), what))

    this_file = os.path.abspath(__file__)
    for src in source_files(root):
        if os.path.abspath(src) == this_file:
            continue
        try:
            text = open(src, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        comments = comment_text(src, text)
        for m in DOC_PATH.finditer(comments):
            target = m.group(1)
            checked += 1
            if not os.path.isfile(os.path.join(root, target.lstrip("./"))) and not os.path.isfile(
                    os.path.normpath(os.path.join(os.path.dirname(src), target))):
                problems.append("%s: a comment names %s, which does not exist" % (rel(src), target))
        for _, what in outside_citations(comments, src, root, md_names):
            problems.append("%s: a comment cites %s, which is not in the repository" % (rel(src), what))

    for p in problems:
        print(p)
    if problems:
        print("check_links: %d problem(s) in %d references" % (len(problems), checked))
        return 1
    print("check_links: %d references, all resolve" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
