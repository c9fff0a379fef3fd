#!/usr/bin/python3
"""Runs every example of README.md (and of docs/*.md) against a real kls-server.

    run_readme.py --source-dir REPO --build-dir BUILD [--keep] [--keep-going] [--list]

What it does, in order:
  1. checks that examples/ is what examples/make_examples.py writes;
  2. makes a temporary working directory holding a copy of examples/ and
     tests/data/, with `build` a symbolic link to BUILD and `bench` one to
     REPO/bench (the README's paths are relative to the repository);
  3. starts BUILD/server/kls-server (embedded store in its own temporary data
     directory, --listen 127.0.0.1:0, --http-listen 127.0.0.1:0) and reads the
     ports from its log lines `serving on HOST:PORT` and `http: http://HOST:PORT/`;
  4. runs every ```sh (or ```bash) and ```python block of README.md, then of
     docs/**/*.md, in document order, and prints what it ran and skipped.

Shell blocks. Each block is one bash script (`set -o pipefail`) in the
working directory with K="BUILD/client/kls --target 127.0.0.1:PORT" exported;
the README's own `K=...` line works as well, since these substitutions apply
to the block's text first: 127.0.0.1:50051 → the server's gRPC port and
127.0.0.1:8080 → its HTTP port; on a line that starts a kls-server, its
--listen / --http-listen / --metrics-listen address becomes 127.0.0.1:0 (that
server is then a second one, next to the test's), except for a port other than
0, 50051 and 8080: that one becomes a free port, the same one wherever the
block names it (so a block can start a second server in the background with
`&` and talk to it: a TLS server on 127.0.0.1:50443, say). A command is a line (plus its
`\\` continuations) that is not a comment; it fails the test when it exits
non-zero. Comment lines of the form `#   TEXT` (a hash and three spaces) right
after a command are its expected output: the command's stdout + stderr must
contain them, matched loosely (see expected_regex): whitespace is free, `…` is a
wildcard, integers must be equal, numbers with a decimal point or an exponent
(objectives, scores, times) match any number. When the expected output starts
with a gRPC status name (`ABORTED: …`, `INVALID_ARGUMENT: …`) the command must
exit non-zero instead. Processes a block leaves in the background (a server
started with `&`) are sent SIGTERM when the block ends.

Python blocks run in one interpreter (Debian's, the one running this script:
PYTHONPATH holds the Python client) in a shared namespace, as in an interactive
session, with the same port substitution; a block fails on an exception, on
anything written to stderr (a logged warning is a failure: the README's
fallback paths must not be taken silently) and on expected output (`#   `
lines after a statement) missing from what the block printed.

Markers: an HTML comment on the line right before a block's fence,
  <!-- readme-test: skip (REASON) -->             not run (listed, with the reason)
  <!-- readme-test: until "TEXT" (REASON) -->     run until TEXT appears in its output
                                                    (a server in the foreground), then SIGTERM
  <!-- readme-test: smaller (REASON) -->          apply the SMALLER substitutions first
Skipped blocks are still checked with `bash -n`; README.md may skip at most
MAX_README_SKIPPED (3) blocks.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

# Substitutions for blocks marked `smaller`: (README text, what runs instead).
# Each must match exactly once, so that a README change that drops or edits a
# command fails here instead of leaving a stale entry.
SMALLER = [
    ("knn --n 1000,5000,20000 ", "knn --n 500,1000 "),
    ("--method admm --protocol admm --trials 20 ", "--method admm --protocol admm --trials 2 "),
    ("--protocol bcd --C auto --json", "--protocol bcd --C auto --trials 2 --json"),
    ("--protocol bcd --warm-start --json", "--protocol bcd --warm-start --trials 2 --json"),
    ("scale --method bcd-sl --n 16100 ", "scale --method bcd-sl --n 400 "),
    ("scale --method admm --n 100000 --constraints 400000 ", "scale --method admm --n 300 --constraints 1200 "),
    ("--constraints 1000 --n 32000 ", "--constraints 100 --n 400 "),
    ("scale --method simplenpkl-shl --n 20000 ", "scale --method simplenpkl-shl --n 400 "),
    ("bench/scale_sweep.sh build /tmp/sweep", "bench/scale_sweep.sh build sweep admm:300 bcd-sl:300 simplenpkl-shl:300:own"),
    ("exact --method admm --n 1000 ", "exact --method admm --n 60 "),
    ("--data swissroll --m 20 --csdp ", "--data swissroll --n 60 --m 10 --csdp "),
    ("--data tests/data/ionosphere.csv --reps 20 ", "--data tests/data/ionosphere.csv --reps 1 "),
    # CSDP on wine's MVE SDP alone takes ~25 s: the comparison is left out here.
    ("--C-grid 1,3 --sdp-reps 3 ", "--C-grid 1,3 --reps 1 "),
    ("--train-frac 0.2 --runs 20 ", "--train-frac 0.2 --runs 2 "),
    ("mkl --method kta --data tests/data/ionosphere.csv --runs 20 ", "mkl --method kta --data tests/data/ionosphere.csv --runs 2 "),
    ("rerank --seeds 1-10 ", "rerank --seeds 1 "),
    ("social --users 2000 ", "social --users 150 "),
    ("topk --n 100000 --dim 128 ", "topk --n 2000 --dim 128 "),
    ("topk --n 1000000 --dim 64 ", "topk --n 5000 --dim 64 "),
    ("spectrum --n 100,300 ", "spectrum --n 60 "),
    ("--clients 2 --seconds 10 ", "--clients 2 --seconds 1 "),
    ("crash --kills 100 ", "crash --kills 2 "),
    ("crash_postgres.sh build -- --kills 100 ", "crash_postgres.sh build -- --kills 2 "),
]

# Blocks of README.md that may carry a skip marker (more fails the test).
MAX_README_SKIPPED = 3

STATUS_NAMES = ("CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
BLOCK_TIMEOUT = 240      # seconds, per block
UNTIL_TIMEOUT = 30       # seconds for an `until` block's text to appear
MARKER = re.compile(r"^<!--\s*readme-test:\s*(skip|until|smaller)\b(.*?)-->\s*$")
FENCE = re.compile(r"^```\s*([A-Za-z0-9_+-]*)\s*$")
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python"}


class Block:
    def __init__(self, path, line, lang, text, marker, marker_arg):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.marker, self.marker_arg = marker, marker_arg

    def where(self):
        return "%s:%d" % (self.path, self.line)


def parse_blocks(path, rel):
    """Every fenced block of a Markdown file with a runnable language."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang = m.group(1).lower()
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[start + 1:j]) + "\n"
        marker = marker_arg = None
        if start > 0:
            mm = MARKER.match(lines[start - 1].strip())
            if mm:
                marker, marker_arg = mm.group(1), mm.group(2).strip()
            elif "readme-test" in lines[start - 1]:
                raise SystemExit("%s:%d: malformed readme-test marker: %s" % (rel, start, lines[start - 1]))
        if lang in RUNNABLE:
            out.append(Block(rel, start + 1, RUNNABLE[lang], body, marker, marker_arg))
        elif marker:
            raise SystemExit("%s:%d: readme-test marker before a ```%s block, which is not run" % (rel, start, lang))
        i = j + 1
    return out


# ---- expected output ---------------------------------------------------------

NUMBER = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\d])")
ANY_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def expected_regex(text):
    """The loose pattern of an expected output: whitespace free, `…` = anything,
    integers exact (not part of a longer number), decimals / exponents any number."""
    parts = []
    pos = 0
    tokens = []
    for m in NUMBER.finditer(text):
        tokens.append((m.start(), m.end(), m.group(0)))
    for start, end, number in tokens + [(len(text), len(text), None)]:
        for ch in text[pos:start]:
            if ch.isspace():
                continue
            parts.append(r"[\s\S]*?" if ch == "…" else re.escape(ch))
        if number is not None:
            if re.fullmatch(r"-?\d+", number):
                parts.append(r"(?<![\d.])" + re.escape(number) + r"(?![\d.]\d|\d)")
            else:
                parts.append(r"(?<![\d.])" + ANY_NUMBER)
        pos = end
    return re.compile(r"\s*".join(parts))


def self_test():
    """The matcher's rules on small cases (fails fast when a rule is broken)."""
    cases = [
        ("150 points × 4 features", "ds-1  'iris': 150 points × 4 features, 3 classes", True),
        ("150 points × 4 features", "ds-1  'iris': 1500 points × 4 features", False),
        ("150 points × 4 features", "ds-1  'iris': 150 points × 40 features", False),
        ("progress 20/1000  objective 88.3573 …", "progress        20/1000  objective 88.1  0.003 s", True),
        ("progress 20/1000  objective 88.3573 …", "progress        21/1000  objective 88.3573  0.003 s", False),
        ('{"id":"job-…","state":"QUEUED",…}', '{"id":"job-1a2","datasetId":"ds-9","state":"QUEUED","x":1}', True),
        ('{"id":"job-…","state":"QUEUED",…}', '{"id":"job-1a2","state":"RUNNING","x":1}', False),
        ('"graph_connect": {"components": 3, "k": 4}', '"graph_connect": {\n  "components": 3,\n  "k": 4\n}', True),
        ("\"best\":1", "\"best\":0.1", False),
        ("\"mean\":0.95", "\"mean\":0.9166667", True),
        ("['img-004', 'img-017']", "['img-004', 'img-030']", False),
        ("iris@prod -> v1", "iris@prod -> v12", False),
    ]
    for expected, output, want in cases:
        got = bool(expected_regex(expected).search(output))
        assert got == want, "matcher: %r in %r gives %s" % (expected, output, got)
    assert expects_failure("ABORTED: job … failed") and not expects_failure("…\naccuracy 0.95")


def expects_failure(expected):
    first = expected.lstrip("… \n")
    return any(first.startswith(name + ":") for name in STATUS_NAMES)


# ---- shell blocks ------------------------------------------------------------

def split_commands(text):
    """[(command text, first line offset, expected output or None)] of a shell block."""
    commands = []
    lines = text.split("\n")
    i = 0
    last = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            last = None
            i += 1
            continue
        if stripped.startswith("#"):
            if last is not None and re.match(r"^#   ", stripped):
                last[2].append(stripped[4:])
            else:
                last = None
            i += 1
            continue
        first = i
        cmd = [line]
        while cmd[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd.append(lines[i])
        last = ["\n".join(cmd), first, []]
        commands.append(last)
        i += 1
    return [(c, first, "\n".join(e) if e else None) for c, first, e in commands]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def substitute(text, grpc_port, http_port):
    mapped = {}  # a second server's own port -> a free one, in the whole block

    def listen_address(m):
        port = re.search(r":(\d+)$", m.group(3))
        if port and port.group(1) not in ("0", "50051", "8080"):
            mapped.setdefault(port.group(1), str(free_port()))
            return "%s%s127.0.0.1:%s" % (m.group(1), m.group(2), port.group(1))
        return "%s%s127.0.0.1:0" % (m.group(1), m.group(2))

    def server_line(m):
        line = m.group(0)
        if "kls-server" not in line:
            return line
        return re.sub(r"(--(?:http-|metrics-)?listen)([ =])(\S+)", listen_address, line)

    text = re.sub(r"^.*$", server_line, text, flags=re.M)
    for own, free in mapped.items():
        text = re.sub(r"(?<=:)%s\b" % own, free, text)
    text = re.sub(r"(?<=:)50051\b", str(grpc_port), text)
    text = re.sub(r"(?<=:)8080\b", str(http_port), text)
    return text


def kill_group(proc, grace=15.0):
    """SIGTERM to the block's process group (its leftovers), then wait until it is gone."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + grace
    while time.time() < deadline:
        try:
            proc.poll()
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_shell_block(block, text, work, env, outdir):
    """Returns (ok, message, number of commands)."""
    commands = split_commands(text)
    script = ["set -o pipefail", "cd %s" % shlex_quote(work)]
    for n, (cmd, _, expected) in enumerate(commands):
        fail_ok = expected is not None and expects_failure(expected)
        out = os.path.join(outdir, "%d.out" % n)
        rc = os.path.join(outdir, "%d.rc" % n)
        script.append("__rc=0; { %s\n} >%s 2>&1 || __rc=$?; echo $__rc >%s" % (cmd, shlex_quote(out), shlex_quote(rc)))
        if not fail_ok:
            script.append("[ $__rc -eq 0 ] || exit 97")
    path = os.path.join(outdir, "block.sh")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(script) + "\n")
    proc = subprocess.Popen(["bash", path], cwd=work, env=env, start_new_session=True,
                            stdout=open(os.path.join(outdir, "bash.out"), "wb"), stderr=subprocess.STDOUT)
    until = block.marker == "until"
    needle = None
    if until:
        m = re.match(r'^"([^"]+)"', block.marker_arg)
        if not m:
            return False, 'an until marker needs "TEXT"', len(commands)
        needle = m.group(1)
    start = time.time()
    timed_out = False
    if until:
        found = False
        while time.time() - start < UNTIL_TIMEOUT:
            if any(needle in read(os.path.join(outdir, "%d.out" % n)) for n in range(len(commands))):
                found = True
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        kill_group(proc)
        proc.wait()
        if not found:
            return False, '"%s" did not appear within %d s; output:\n%s' % (
                needle, UNTIL_TIMEOUT, tail("".join(read(os.path.join(outdir, "%d.out" % n))
                                                    for n in range(len(commands))))), len(commands)
        return True, "", len(commands)
    try:
        proc.wait(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_group(proc)
    proc.wait()
    for n, (cmd, offset, expected) in enumerate(commands):
        where = "%s:%d" % (block.path, block.line + 1 + offset)
        rc_path = os.path.join(outdir, "%d.rc" % n)
        output = read(os.path.join(outdir, "%d.out" % n)).replace("\r", "\n")
        if not os.path.exists(rc_path):
            if timed_out:
                return False, "%s: timed out after %d s in `%s`; output so far:\n%s" % (
                    where, BLOCK_TIMEOUT, cmd, tail(output)), len(commands)
            return False, "%s: `%s` did not run (the block stopped before it): %s" % (
                where, cmd, tail(read(os.path.join(outdir, "bash.out")))), len(commands)
        rc = int(read(rc_path).strip() or "1")
        fail_ok = expected is not None and expects_failure(expected)
        if fail_ok and rc == 0:
            return False, "%s: `%s` should fail with\n%s\nbut exited 0; output:\n%s" % (
                where, cmd, indent(expected), tail(output)), len(commands)
        if not fail_ok and rc != 0:
            return False, "%s: `%s` exited %d; output:\n%s" % (where, cmd, rc, tail(output)), len(commands)
        if expected is not None and not expected_regex(expected).search(output):
            return False, "%s: the output of `%s` does not contain\n%s\noutput:\n%s" % (
                where, cmd, indent(expected), tail(output, 60)), len(commands)
    return True, "", len(commands)


# ---- python blocks -----------------------------------------------------------

DRIVER = textwrap.dedent(r'''
    import os, sys, traceback
    namespace = {"__name__": "__main__"}
    real_out = os.dup(1)
    for line in sys.stdin:
        code_path, out_path, err_path = line.rstrip("\n").split("\t")
        with open(code_path, encoding="utf-8") as f:
            code = f.read()
        status = "ok"
        sys.stdout.flush(); sys.stderr.flush()
        out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        saved = os.dup(1), os.dup(2)
        os.dup2(out_fd, 1); os.dup2(err_fd, 2)
        try:
            exec(compile(code, code_path, "exec"), namespace)
        except BaseException:
            status = "error"
            traceback.print_exc()
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(out_fd); os.close(err_fd); os.close(saved[0]); os.close(saved[1])
        os.write(real_out, (status + "\n").encode())
''')


class PythonSession:
    def __init__(self, work, env, tmp):
        self.tmp = tmp
        driver = os.path.join(tmp, "driver.py")
        with open(driver, "w", encoding="utf-8") as f:
            f.write(DRIVER)
        self.proc = subprocess.Popen([sys.executable, "-u", driver], cwd=work, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True, text=True)

    def run(self, block, text, outdir):
        code = os.path.join(outdir, "block.py")
        with open(code, "w", encoding="utf-8") as f:
            f.write(text)
        out, err = os.path.join(outdir, "stdout"), os.path.join(outdir, "stderr")
        self.proc.stdin.write("%s\t%s\t%s\n" % (code, out, err))
        self.proc.stdin.flush()
        status = self.proc.stdout.readline().strip()
        stdout, stderr = read(out), read(err)
        if status != "ok":
            return False, "%s: the Python block raised:\n%s" % (block.where(), tail(stderr or "(interpreter exited)"))
        if stderr.strip():
            return False, "%s: the Python block wrote to stderr:\n%s" % (block.where(), tail(stderr))
        pos = 0
        for _, offset, expected in split_python_expectations(text):
            m = expected_regex(expected).search(stdout, pos)
            if not m:
                return False, "%s:%d: the Python block's output does not contain\n%s\noutput:\n%s" % (
                    block.path, block.line + 1 + offset, indent(expected), tail(stdout))
            pos = m.end()
        return True, ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)


def split_python_expectations(text):
    """[(statement, line offset, expected)] for `#   ` comment runs after a code line."""
    out = []
    lines = text.split("\n")
    current = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#   ") and current is not None:
            current[2].append(stripped[4:])
            continue
        if current is not None and current[2]:
            out.append((current[0], current[1], "\n".join(current[2])))
        current = [line, i, []] if stripped and not stripped.startswith("#") else None
    if current is not None and current[2]:
        out.append((current[0], current[1], "\n".join(current[2])))
    return out


# ---- helpers -----------------------------------------------------------------

def shlex_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def tail(text, lines=30):
    rows = text.rstrip("\n").split("\n")
    if len(rows) > lines:
        rows = ["… (%d lines before)" % (len(rows) - lines)] + rows[-lines:]
    return indent("\n".join(rows))


def indent(text):
    return "\n".join("    " + row for row in text.split("\n"))


def start_server(build, tmp):
    log_path = os.path.join(tmp, "server.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen([os.path.join(build, "server", "kls-server"), "--listen", "127.0.0.1:0",
                             "--http-listen", "127.0.0.1:0", "--data-dir", os.path.join(tmp, "server-data")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    grpc_port = http_port = None
    while time.time() < deadline and proc.poll() is None:
        text = read(log_path)
        m = re.search(r"serving on [\w.\-\[\]:]*:(\d+)", text)
        h = re.search(r"http: https?://[\w.\-\[\]]+:(\d+)/", text)
        if m and h:
            grpc_port, http_port = int(m.group(1)), int(h.group(1))
            break
        time.sleep(0.1)
    if grpc_port is None:
        proc.kill()
        raise SystemExit("kls-server did not start; its log:\n" + tail(read(log_path)))
    return proc, grpc_port, http_port, log_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the working directory and the outputs")
    parser.add_argument("--keep-going", action="store_true", help="run the blocks after a failed one")
    parser.add_argument("--list", action="store_true", help="list the blocks and their markers, run nothing")
    args = parser.parse_args()
    src, build = os.path.abspath(args.source_dir), os.path.abspath(args.build_dir)
    self_test()
    t0 = time.time()

    docs = ["README.md"]
    for root, _, files in sorted(os.walk(os.path.join(src, "docs"))):
        docs += sorted(os.path.relpath(os.path.join(root, f), src) for f in files if f.endswith(".md"))
    blocks = []
    for rel in docs:
        blocks += parse_blocks(os.path.join(src, rel), rel)
    per_doc = {}
    for b in blocks:
        per_doc[b.path] = per_doc.get(b.path, 0) + 1
    print("blocks: " + ", ".join("%s %d" % (d, n) for d, n in per_doc.items()) +
          " (docs pages without sh/python blocks: %d)" % (len(docs) - len(per_doc)))
    if args.list:
        for b in blocks:
            print("%-28s %-6s %s %s" % (b.where(), b.lang, b.marker or "", b.marker_arg or ""))
        return 0

    # SMALLER must match the README exactly once per entry.
    smaller_text = "".join(b.text for b in blocks if b.marker == "smaller")
    stale = [old for old, _ in SMALLER if smaller_text.count(old) != 1]
    if stale:
        print("FAIL: SMALLER entries that do not match exactly one place of a `smaller` block: %s" % stale)
        return 1

    check = subprocess.run([sys.executable, os.path.join(src, "examples", "make_examples.py"), "--check"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        print("FAIL: " + check.stderr.strip())
        return 1

    tmp = tempfile.mkdtemp(prefix="kls-readme-")
    work = os.path.join(tmp, "work")
    os.makedirs(os.path.join(work, "tests"))
    shutil.copytree(os.path.join(src, "examples"), os.path.join(work, "examples"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(src, "tests", "data"), os.path.join(work, "tests", "data"))
    os.symlink(build, os.path.join(work, "build"))
    os.symlink(os.path.join(src, "bench"), os.path.join(work, "bench"))

    server, grpc_port, http_port, log_path = start_server(build, tmp)
    print("kls-server on 127.0.0.1:%d (HTTP %d); working directory %s" % (grpc_port, http_port, work))
    env = dict(os.environ)
    env["K"] = "%s --target 127.0.0.1:%d" % (os.path.join(build, "client", "kls"), grpc_port)
    env["PYTHONPATH"] = os.path.join(build, "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("KLS_TOKEN", None)
    python = None
    failures, ran, skipped, commands = [], {"sh": 0, "python": 0}, [], 0
    try:
        for n, block in enumerate(blocks):
            label = "[%d/%d] %s %s" % (n + 1, len(blocks), block.where(), block.lang)
            if block.marker == "skip":
                syntax = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True) \
                    if block.lang == "sh" else None
                if syntax is not None and syntax.returncode != 0:
                    failures.append("%s: skipped block is not valid bash: %s" % (block.where(), syntax.stderr.strip()))
                    print("%s: FAIL (bash -n)" % label)
                else:
                    skipped.append((block, block.marker_arg))
                    print("%s: skipped %s" % (label, block.marker_arg))
                continue
            text = block.text
            if block.marker == "smaller":
                for old, new in SMALLER:
                    text = text.replace(old, new)
            text = substitute(text, grpc_port, http_port)
            outdir = os.path.join(tmp, "out", "%02d" % (n + 1))
            os.makedirs(outdir)
            started = time.time()
            if block.lang == "sh":
                ok, message, count = run_shell_block(block, text, work, env, outdir)
                commands += count
            else:
                if python is None:
                    python = PythonSession(work, env, tmp)
                ok, message = python.run(block, text, outdir)
            ran[block.lang] += 1
            print("%s: %s (%.1f s)%s" % (label, "ok" if ok else "FAIL", time.time() - started,
                                         "" if block.marker is None else " [%s]" % block.marker))
            if not ok:
                failures.append(message)
                print(message)
                if not args.keep_going:
                    break
    finally:
        if python is not None:
            python.close()
        kill_group(server)
        server.wait()
    print("ran %d blocks (%d sh with %d commands, %d python) in %.0f s; skipped %d:" % (
        ran["sh"] + ran["python"], ran["sh"], commands, ran["python"], time.time() - t0, len(skipped)))
    for block, reason in skipped:
        print("  %s %s" % (block.where(), reason))
    readme_skipped = [b for b, _ in skipped if os.path.basename(b.path) == "README.md"]
    if len(readme_skipped) > MAX_README_SKIPPED:
        failures.append("README.md skips %d blocks, at most %d may be (issue 37): make one runnable"
                        % (len(readme_skipped), MAX_README_SKIPPED))
        print(failures[-1])
    if failures:
        print("FAILED: %d block(s); server log: %s" % (len(failures), log_path if args.keep else "(removed)"))
        if not args.keep:
            print(tail(read(log_path), 20))
    if args.keep:
        print("kept %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
