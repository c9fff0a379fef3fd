#!/usr/bin/env python3
"""Writes the kls.v1 API (proto/kls/v1/*.proto) as one Markdown page for Doxygen.

Usage: proto_to_markdown.py PROTO_DIR OUTPUT_FILE

Doxygen cannot parse .proto files and the generated C++ headers carry none of
their comments, so `make docs` runs this first: it reads every .proto file
under PROTO_DIR (kls/v1 first, then the rest, e.g. grpc/health), and writes for
each file its header comment, its services (every rpc with request, response,
streaming and comment), its messages (every field with number, label, type and
comment; oneofs, nested messages and enums) and its enums. The comments are
the ones in the .proto: the lines of `//` comments just above an element and a
`//` comment at the end of its line. A small line-based reader of the subset
of proto3 this repository uses, not a full parser; standard library only.
"""
import os
import re
import sys


def escape(text):
    """Text safe inside a Doxygen Markdown table cell or paragraph: Doxygen
    commands (\\ and @), HTML-looking <...>, and table pipes are escaped."""
    text = text.replace("\\", "\\\\").replace("@", "\\@")
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("|", "\\|")
    # '#word' and '%' would be taken as link requests
    text = re.sub(r"(^|\s)#", r"\1\\#", text)
    text = text.replace("%", "\\%")
    return text


class Node:
    def __init__(self, kind, name, comment, parent=None, extra=""):
        self.kind = kind            # file, service, rpc, message, enum, oneof, field, value, extend
        self.name = name
        self.comment = comment
        self.parent = parent
        self.extra = extra          # type / signature text
        self.children = []

    def full_name(self):
        names = []
        n = self
        while n is not None and n.kind in ("message", "enum", "service"):
            names.append(n.name)
            n = n.parent
        return ".".join(reversed(names))


FIELD = re.compile(r"^(?:(optional|repeated)\s+)?([\w.]+(?:\s*<[^>]*>)?)\s+(\w+)\s*=\s*(\d+)\s*(\[[^\]]*\])?\s*;")
VALUE = re.compile(r"^(\w+)\s*=\s*(-?\d+)\s*(\[[^\]]*\])?\s*;")
RPC = re.compile(r"^rpc\s+(\w+)\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*(;|\{)")
OPEN = re.compile(r"^(message|enum|service|oneof|extend)\s+([\w.]+)\s*\{")


def parse(path, display_name):
    root = Node("file", display_name, "")
    stack = [root]
    pending = []          # comment lines waiting for the next element
    header = []           # the file's leading comment
    seen_code = False
    package = ""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for raw in lines:
        line = raw.strip()
        if not line:
            if not seen_code and pending:
                header.extend(pending + [""])
                pending = []
            elif pending and stack[-1].kind == "file":
                # a blank line ends a detached comment at file level
                pending = []
            continue
        if line.startswith("//"):
            pending.append(line[2:].strip())
            continue
        code, _, trailing = line.partition("//")
        code = code.strip()
        trailing = trailing.strip()
        if not seen_code and code.startswith("syntax"):
            header.extend(pending)
            pending = []
        seen_code = True
        comment = " ".join(p for p in pending if p)
        if trailing:
            comment = (comment + " " + trailing).strip()
        pending = []
        parent = stack[-1]
        m = OPEN.match(code)
        if m:
            node = Node(m.group(1), m.group(2), comment, parent)
            parent.children.append(node)
            stack.append(node)
            if code.endswith("}"):
                stack.pop()
            continue
        if code.startswith("}"):
            if len(stack) > 1:
                stack.pop()
            continue
        if code.startswith("package"):
            package = code.split()[1].rstrip(";")
            continue
        if re.match(r"^(syntax|import|option)\b", code):
            continue
        m = RPC.match(code)
        if m:
            sig = "%s%s → %s%s" % ("stream " if m.group(2) else "", m.group(3),
                                   "stream " if m.group(4) else "", m.group(5))
            parent.children.append(Node("rpc", m.group(1), comment, parent, sig))
            if m.group(6) == "{" and not code.endswith("}"):
                stack.append(Node("rpc-body", m.group(1), "", parent))
            continue
        if parent.kind == "enum":
            m = VALUE.match(code)
            if m:
                parent.children.append(Node("value", m.group(1), comment, parent, m.group(2)))
            continue
        m = FIELD.match(code)
        if m:
            label = m.group(1) or ""
            options = m.group(5) or ""
            type_text = ("%s %s" % (label, m.group(2))).strip()
            node = Node("field", m.group(3), comment, parent, type_text)
            node.number = m.group(4)
            node.options = options
            parent.children.append(node)
    while header and not header[-1]:
        header.pop()
    root.comment = "\n".join(header)
    root.package = package
    return root


def anchor(*parts):
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(parts)).lower()


def write_message(out, node, package, level):
    full = "%s.%s" % (package, node.full_name()) if package else node.full_name()
    out.append("%s Message %s {#%s}\n" % ("#" * level, full, anchor("proto", full)))
    if node.comment:
        out.append(escape(node.comment) + "\n")
    fields = []

    def collect(n, oneof=""):
        for c in n.children:
            if c.kind == "field":
                fields.append((c, oneof))
            elif c.kind == "oneof":
                if c.comment:
                    fields.append((Node("oneof-note", c.name, c.comment), c.name))
                collect(c, c.name)
    collect(node)
    if fields:
        out.append("| field | number | type | comment |")
        out.append("|---|---|---|---|")
        for f, oneof in fields:
            if f.kind == "oneof-note":
                out.append("| *oneof %s* | | | %s |" % (escape(f.name), escape(f.comment)))
                continue
            type_text = f.extra + ((" (oneof %s)" % oneof) if oneof else "")
            if f.options:
                type_text += " " + f.options
            out.append("| `%s` | %s | %s | %s |" % (f.name, f.number, escape(type_text), escape(f.comment)))
        out.append("")
    else:
        out.append("No fields.\n")
    for c in node.children:
        if c.kind == "enum":
            write_enum(out, c, package, level + 1)
        elif c.kind == "message":
            write_message(out, c, package, level + 1)
        elif c.kind == "oneof":
            for cc in c.children:
                if cc.kind in ("message", "enum"):
                    (write_message if cc.kind == "message" else write_enum)(out, cc, package, level + 1)


def write_enum(out, node, package, level):
    full = "%s.%s" % (package, node.full_name()) if package else node.full_name()
    out.append("%s Enum %s {#%s}\n" % ("#" * level, full, anchor("proto", full)))
    if node.comment:
        out.append(escape(node.comment) + "\n")
    out.append("| value | number | comment |")
    out.append("|---|---|---|")
    for v in node.children:
        if v.kind == "value":
            out.append("| `%s` | %s | %s |" % (v.name, v.extra, escape(v.comment)))
    out.append("")


def write_file(out, root):
    out.append("## %s {#%s}\n" % (root.name, anchor("proto_file", root.name)))
    if root.package:
        out.append("Package `%s`.\n" % root.package)
    if root.comment:
        out.append(escape(root.comment).replace("\n\n", "\n\n") + "\n")
    for c in root.children:
        if c.kind == "service":
            full = "%s.%s" % (root.package, c.name) if root.package else c.name
            out.append("### Service %s {#%s}\n" % (full, anchor("proto", full)))
            if c.comment:
                out.append(escape(c.comment) + "\n")
            out.append("| rpc | request → response | comment |")
            out.append("|---|---|---|")
            for r in c.children:
                if r.kind == "rpc":
                    out.append("| `%s` | %s | %s |" % (r.name, escape(r.extra), escape(r.comment)))
            out.append("")
    for c in root.children:
        if c.kind == "message":
            write_message(out, c, root.package, 3)
        elif c.kind == "enum":
            write_enum(out, c, root.package, 3)
        elif c.kind == "extend":
            out.append("### Extension of %s\n" % c.name)
            if c.comment:
                out.append(escape(c.comment) + "\n")
            out.append("| field | number | type | comment |")
            out.append("|---|---|---|---|")
            for f in c.children:
                if f.kind == "field":
                    out.append("| `%s` | %s | %s | %s |" % (f.name, f.number, escape(f.extra), escape(f.comment)))
            out.append("")


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    proto_dir, output = argv[1], argv[2]
    files = []
    for dirpath, dirnames, filenames in os.walk(proto_dir):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".proto"):
                rel = os.path.relpath(os.path.join(dirpath, name), proto_dir)
                files.append(rel)
    # the KLS API first, then what it borrows (grpc.health.v1)
    files.sort(key=lambda r: (not r.startswith("kls" + os.sep), r))
    if not files:
        print("proto_to_markdown: no .proto files under %s" % proto_dir, file=sys.stderr)
        return 1
    out = ["# gRPC API (proto) {#proto_api}\n",
           "Generated by `docs/doxygen/proto_to_markdown.py` from the comments in `proto/` "
           "(%d files) when `make docs` runs; the .proto files are the source of truth. "
           "Every message, field, enum value and rpc is listed with its comment.\n" % len(files)]
    out.append("Files: " + ", ".join("[%s](#%s)" % (f, anchor("proto_file", f)) for f in files) + "\n")
    for rel in files:
        write_file(out, parse(os.path.join(proto_dir, rel), rel))
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
