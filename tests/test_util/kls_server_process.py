"""A real kls-server for the Python tests (tests/python, tests/http, tests/browser).

The binary comes from $KLS_SERVER_BINARY (ctest sets it; without it the test
is skipped). The server listens on 127.0.0.1:0 with a temporary data
directory; its gRPC address is read from the data directory's lock file (as
tests/e2e does) and, with `http=True`, the gateway's address from the log line
`http: http://127.0.0.1:PORT/`.
"""

import os
import pathlib
import re
import signal
import subprocess
import time

import pytest


class KlsServerProcess:
    """One kls-server process; `target` is its gRPC address, `base` its HTTP
    root (with http=True); stop() sends SIGTERM and expects exit 0."""

    def __init__(self, directory, *extra, http=False, workers=1, env=None, startup_seconds=30):
        binary = os.environ.get("KLS_SERVER_BINARY")
        if not binary:
            pytest.skip("KLS_SERVER_BINARY is not set (run through ctest)")
        self.directory = pathlib.Path(directory)
        data_dir = self.directory / "data"
        self.log = self.directory / "server.log"
        args = [binary, "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--workers", str(workers)]
        if http:
            args += ["--http-listen", "127.0.0.1:0"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([*args, *extra], stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=env)
        self.target = self.base = None
        deadline = time.monotonic() + startup_seconds
        lock = data_dir / "kls-server.lock"
        while (self.target is None or (http and self.base is None)) and time.monotonic() < deadline:
            assert self.process.poll() is None, "kls-server exited:\n" + self.log.read_text()
            if http and self.base is None:
                found = re.search(r"http: http://127\.0\.0\.1:(\d+)/", self.log.read_text(errors="replace"))
                if found:
                    self.base = "http://127.0.0.1:" + found.group(1)
            if lock.exists():
                for line in lock.read_text().splitlines():
                    if line.startswith("listen="):
                        self.target = line[len("listen="):]
            time.sleep(0.02)
        assert self.target, "no listen address recorded:\n" + self.log.read_text()
        assert self.base or not http, "no HTTP address:\n" + self.log.read_text()

    #: stop() asserts that the server exited 0 within 20 s of SIGTERM (else
    #: it kills it quietly).
    check_exit = True

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            rc = self.process.wait(timeout=20)
            assert rc == 0 or not self.check_exit, self.log.read_text()
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            if self.check_exit:
                raise
