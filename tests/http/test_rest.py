"""The HTTP/JSON gateway (kls-server --http-listen) against the real binary,
with urllib only (ctest label http).

Every kls.v1 method is a route /v1/<service>/<method> (server/http/http_routes.h).
Here every route gets a success case, a body that is not JSON, a field of
the wrong type, an unknown field and (where the method looks something up)
a missing resource; then bearer tokens, an SSE watch of a running job, a
CSV upload learned and queried over HTTP only, the HTTP answers against the
gRPC ones (kls_client and the generated stubs), /openapi.json against the
routes both ways, CORS, the body limit and X-Request-Id.

The server binary comes from $KLS_SERVER_BINARY and kls_client with the
generated kls.v1 modules from PYTHONPATH (ctest sets both); each server runs
on 127.0.0.1:0 with a temporary data directory; the HTTP port is read from
its log line "http: http://127.0.0.1:PORT/", the gRPC one from the data
directory's lock file.
"""

import base64
import json
import os
import pathlib
import re
import signal
import sys
import subprocess
import time
import types
import urllib.error
import urllib.parse
import urllib.request

import grpc
import numpy as np
import pytest
from google.protobuf import descriptor_pool, json_format

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "test_util"))
from kls_server_process import KlsServerProcess  # noqa: E402  (tests/test_util)
import kls_client
from kls.v1 import datasets_pb2, jobs_pb2, kernels_pb2, queries_pb2, queries_pb2_grpc, service_pb2

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
READ_TOKEN = "http-read-token-0123456789"
WRITE_TOKEN = "http-write-token-0123456789"
ALLOWED_ORIGIN = "https://console.example"
FOREIGN_ORIGIN = "https://evil.example"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

# No proxy from the environment: the servers are on 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def kebab(name):
    return re.sub(r"(?<!^)([A-Z])", r"-\1", name).lower()


# Every kls.v1 method, from the generated Python descriptors: path → MethodDescriptor.
ROUTES = {
    "/v1/%s/%s" % (kebab(service.name), kebab(method.name)): method
    for module in (service_pb2, datasets_pb2, jobs_pb2, kernels_pb2, queries_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
}

# Paths that answered 200 (JSON or CSV) somewhere in this file: every route must.
ANSWERED = set()


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    @property
    def code(self):
        return self.json()["code"]

    @property
    def message(self):
        return self.json()["message"]

    def __repr__(self):
        return "HTTP %d %s" % (self.status, self.body[:400].decode("utf-8", "replace"))


def encode_body(body):
    if body is None or isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def b64(data):
    return base64.b64encode(data).decode()


class Server(KlsServerProcess):
    """One kls-server with its HTTP gateway; stopped with SIGTERM."""

    def __init__(self, directory, *extra):
        super().__init__(directory, *extra, http=True, workers=2)

    def request(self, verb, path, body=None, *, query=None, headers=None, content_type="application/json",
                timeout=60):
        url = self.base + path + ("?" + urllib.parse.urlencode(query, doseq=True) if query else "")
        data = encode_body(body)
        all_headers = dict(headers or {})
        if data is not None and content_type:
            all_headers.setdefault("Content-Type", content_type)
        request = urllib.request.Request(url, data=data, method=verb, headers=all_headers)
        try:
            with OPENER.open(request, timeout=timeout) as r:
                response = Response(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            with e:
                response = Response(e.code, e.headers, e.read())
        content_type = response.headers.get("Content-Type", "")
        if response.status == 200 and path in ROUTES and content_type.startswith(("application/json", "text/csv")):
            ANSWERED.add(path)
        return response

    def get(self, path, query=None, **kw):
        return self.request("GET", path, query=query, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def ok(self, verb, path, body=None, **kw):
        """The answer's JSON; asserts 200."""
        r = self.request(verb, path, body, **kw)
        assert r.status == 200, r
        return r.json()

    def open_stream(self, path, query, headers=None):
        """A GET answered as Server-Sent Events: the open response."""
        url = self.base + path + "?" + urllib.parse.urlencode(query, doseq=True)
        request = urllib.request.Request(url, headers={"Accept": "text/event-stream", **(headers or {})})
        return OPENER.open(request, timeout=30)

    def watch(self, job_id):
        """The job's final state (Jobs.Watch as a JSON array: it answers when the job ends)."""
        events = self.ok("POST", "/v1/jobs/watch", {"id": job_id})
        assert events, "no events"
        return events[-1]["job"]


def sse_events(response):
    """(event, data) pairs of a text/event-stream response until it ends."""
    event, data = "message", []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:"):].removeprefix(" "))


def expect_error(response, status, code, *fragments):
    assert response.status == status, response
    assert response.headers.get("Content-Type", "").startswith("application/json"), response.headers
    body = response.json()
    assert body["code"] == code, response
    assert body["details"] == [] and body["request_id"] == response.headers["X-Request-Id"], response
    for fragment in fragments:
        assert fragment in body["message"], response
    return body


# ---- servers and the data they serve ----------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("kls-http")
    s = Server(directory, "--http-cors-origins", ALLOWED_ORIGIN, "--backup-dir", str(directory / "backups"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("kls-http-auth")
    tokens = directory / "tokens"
    tokens.write_text("# test tokens\n%s read\n%s write\n" % (READ_TOKEN, WRITE_TOKEN))
    s = Server(directory, "--tokens-file", str(tokens))
    yield s
    s.stop()


def small_community(seed=5):
    """24 users in two communities of 12, 3 photos each (as tests/python), as
    a Datasets.Upload JSON array."""
    rng = np.random.default_rng(seed)
    users, per_user = 24, 3
    community = np.repeat([0, 1], users // 2)
    owner = np.repeat(np.arange(users), per_user)
    c = community[owner]
    n = len(owner)
    features = rng.standard_normal((n, 4)) + 3.0 * c[:, None]
    contacts = set()
    for u in range(users):
        mates = [v for v in range(users) if v != u and community[v] == community[u]]
        for v in rng.choice(mates, 3, replace=False):
            contacts.add((min(u, int(v)), max(u, int(v))))
    contacts.add((0, 12))
    tags = [(p, 5 * int(c[p]) + int(t)) for p in range(n) for t in rng.choice(5, 2, replace=False)]
    comments = [(p, int(rng.choice(np.flatnonzero(community == c[p])))) for p in range(0, n, 2)]
    groups = [(u, int(community[u])) for u in range(users) if u % 4 != 3] + [(3, 2), (15, 2)]
    faves = [(u, int(rng.choice(np.flatnonzero(c == community[u])))) for u in range(users)]
    pairs = lambda ps, a, b: {a: [x for x, _ in ps], b: [y for _, y in ps]}
    relations = {"firstPhoto": str(n), **pairs(tags, "tagPhoto", "tagId"),
                 **pairs(comments, "commentPhoto", "commentAuthor"), **pairs(sorted(contacts), "contactA", "contactB"),
                 **pairs(groups, "memberUser", "memberGroup"), **pairs(faves, "faveUser", "favePhoto")}
    return [
        {"header": {"name": "tiny-community", "numPoints": str(n), "dim": 4,
                    "social": {"numUsers": users, "numGroups": 3, "vocabulary": 10}}},
        {"features": {"firstRow": "0", "values": features.ravel().tolist()}},
        {"social": {"firstPhoto": "0", "owner": owner.tolist(), "day": rng.integers(0, 365, n).tolist(),
                    "latitude": (10.0 + 20.0 * c + rng.uniform(-0.2, 0.2, n)).tolist(),
                    "longitude": (5.0 + 20.0 * c + rng.uniform(-0.2, 0.2, n)).tolist()}},
        {"social": relations},
    ], community


@pytest.fixture(scope="module")
def world(server):
    """Over HTTP only: iris uploaded as CSV with the admm protocol, a known
    embedding imported with keys, a social data set uploaded as JSON, and
    three kernels learned on them (kl_admm, mkl, social_strength)."""
    w = types.SimpleNamespace()
    w.iris = server.ok("POST", "/v1/datasets/upload", (DATA / "iris.csv").read_bytes(),
                       query={"name": "iris", "protocol": "admm", "seed": "1"}, content_type="text/csv")
    assert (w.iris["numPoints"], w.iris["dim"], w.iris["numClasses"]) == ("150", 4, 3)
    assert w.iris["generated"]["protocol"] == "admm" and w.iris["numConstraints"] == "330"
    upload, w.community = small_community()
    w.social = server.ok("POST", "/v1/datasets/upload", upload)
    assert (w.social["numPoints"], w.social["dim"]) == ("72", 4)

    rng = np.random.default_rng(7)
    w.v = rng.standard_normal((40, 5))
    w.keys = ["item-%02d" % i for i in range(40)]
    w.known = server.ok("POST", "/v1/kernels/import", [
        {"header": {"name": "known", "numPoints": "40", "dim": 5, "hasItemKeys": True}},
        {"rows": {"firstRow": "0", "values": w.v[:25].ravel().tolist(), "itemKeys": w.keys[:25]}},
        {"rows": {"firstRow": "25", "values": w.v[25:].ravel().tolist(), "itemKeys": w.keys[25:]}},
    ])
    assert (w.known["name"], w.known["numPoints"], w.known["rank"]) == ("known", "40", 5)

    submits = {
        "iris-admm": {"datasetId": w.iris["id"], "kernelName": "iris-admm", "graph": {"k": 5, "weight": "GAUSSIAN"},
                      "klAdmm": {"gamma": 10}},
        "iris-mkl": {"datasetId": w.iris["id"], "kernelName": "iris-mkl",
                     "mkl": {"method": "KTA", "positiveClass": 0}},
        "friends": {"datasetId": w.social["id"], "kernelName": "friends", "socialStrength": {"weighting": "KTA"}},
    }
    queued = {name: server.ok("POST", "/v1/jobs/submit", body) for name, body in submits.items()}
    assert all(job["state"] in ("QUEUED", "RUNNING") for job in queued.values())
    w.jobs = {name: server.watch(job["id"]) for name, job in queued.items()}
    for name, job in w.jobs.items():
        assert (job["state"], job["kernelName"], job["kernelVersion"]) == ("SUCCEEDED", name, "1"), job
    return w


# ---- (a) every route: a success case ------------------------------------------------------

def test_admin_routes(server):
    assert server.ok("POST", "/v1/admin/echo", {"payload": b64(b"\x00kls")}) == {"payload": b64(b"\x00kls")}
    assert server.ok("GET", "/v1/admin/echo", query={"payload": b64(b"hi")}) == {"payload": b64(b"hi")}
    info = server.ok("GET", "/v1/admin/get-server-info")
    assert info["version"] and info["workerThreads"] == 2
    assert info["maxMessageBytes"] == str(64 << 20)  # int64 as a string
    assert server.ok("POST", "/v1/admin/get-server-info", b"")["version"] == info["version"]  # empty body = {}


def test_dataset_routes(server, world):
    iris = server.ok("GET", "/v1/datasets/get", query={"id": world.iris["id"]})
    assert iris["classSizes"] == ["50", "50", "50"] and iris["mustLink"] == "240"
    assert world.iris["id"] in {d["id"] for d in server.ok("GET", "/v1/datasets/list")["datasets"]}

    tiny = server.ok("POST", "/v1/datasets/upload", [
        {"header": {"name": "tiny", "numPoints": "4", "dim": 2, "hasLabels": True, "hasItemKeys": True,
                    "numConstraints": "2"}},
        {"features": {"firstRow": "0", "values": [0, 0, 0, 1, 5, 5, 5, 6], "labels": [0, 0, 1, 1],
                      "itemKeys": ["a", "b", "c", "d"]}},
        {"constraints": {"i": [0, 2], "j": [1, 3], "kind": [1, 1]}},
    ])
    assert (tiny["numPoints"], tiny["numConstraints"], tiny["numClasses"]) == ("4", "2", 2)

    by_csv = server.ok("POST", "/v1/datasets/set-attributes", b"key,colour\na,red\nb,blue\nc,red\nd,blue\n",
                       query={"dataset_id": tiny["id"]}, content_type="text/csv")
    assert (by_csv["attributes"], by_csv["attributesVersion"]) == ("colour:string", "1")
    by_json = server.ok("POST", "/v1/datasets/set-attributes",
                        [{"datasetId": "tiny"}, {"attributes": {"csv": b64(b"row,size:int\n0,1\n3,4\n")}}])
    assert (by_json["id"], by_json["attributes"], by_json["attributesVersion"]) == (tiny["id"], "size:int", "2")

    # Upload from LIBSVM text; protocol pairs drawn from its labels.
    libsvm = "".join("%d 1:%g 3:%g\n" % (i % 2, i, 0.5 * i) for i in range(1, 21)).encode()
    sparse = server.ok("POST", "/v1/datasets/upload", libsvm, content_type="application/x-libsvm",
                       query={"name": "sparse", "num_features": "3", "protocol": "bcd", "seed": "4"})
    assert (sparse["name"], sparse["numPoints"], sparse["dim"], sparse["numClasses"]) == ("sparse", "20", 3, 2)
    assert sparse["generated"]["protocol"] == "bcd" and sparse["generated"]["seed"] == "4"

    assert server.ok("POST", "/v1/datasets/delete", {"id": tiny["id"]}) == {}
    expect_error(server.get("/v1/datasets/get", query={"id": tiny["id"]}), 404, "NOT_FOUND", tiny["id"])


def test_job_routes(server, world):
    done = world.jobs["iris-admm"]
    assert server.ok("GET", "/v1/jobs/get", query={"id": done["id"]}) == done
    listed = server.ok("GET", "/v1/jobs/list", query={"state": "SUCCEEDED", "datasetId": world.iris["id"]})
    assert done["id"] in {j["id"] for j in listed["jobs"]} and listed["nextPageToken"] == ""
    history = server.ok("GET", "/v1/jobs/history", query={"id": done["id"]})
    assert history["complete"] is True and history["points"]
    assert history["points"][-1]["iteration"] == done["progress"]["iteration"]
    events = server.ok("GET", "/v1/jobs/watch", query={"id": done["id"]})  # a finished job: its final state
    assert [e["job"]["state"] for e in events] == ["SUCCEEDED"]
    # Cancelling a finished job; a running one is cancelled in test_sse_watch_of_a_running_job.
    expect_error(server.post("/v1/jobs/cancel", {"id": done["id"]}), 412, "FAILED_PRECONDITION")


def test_kernel_routes(server, world):
    info = server.ok("GET", "/v1/kernels/get", query={"kernel.name": "iris-admm"})
    assert (info["version"], info["method"], info["datasetId"]) == ("1", "kl_admm", world.iris["id"])
    assert "gap" in info["certificate"]
    assert [k["name"] for k in server.ok("GET", "/v1/kernels/list", query={"name": "iris-admm"})["kernels"]] == \
        ["iris-admm"]
    aliased = server.ok("POST", "/v1/kernels/set-alias", {"name": "iris-admm", "alias": "prod", "version": "1"})
    assert aliased["version"] == "1"
    assert server.ok("GET", "/v1/kernels/get", query={"kernel.name": "iris-admm", "kernel.alias": "prod"}) == info

    inspection = server.ok("GET", "/v1/kernels/inspect",
                           query={"kernel.name": "iris-admm", "sample": 50, "heatmap": 10, "spectrum": 3})
    assert inspection["hasLabels"] is True and len(inspection["items"]) == 50
    assert 1 <= len(inspection["eigenvalues"]) <= 3 and len(inspection["heatmap"]) == 100

    # Export: a JSON array of chunks, CSV, or SSE — the imported V exactly.
    chunks = server.ok("POST", "/v1/kernels/export", {"kernel": {"name": "known"}})
    assert chunks[0]["info"]["name"] == "known" and chunks[0]["info"]["rank"] == 5
    values = [x for chunk in chunks for x in chunk["values"]]
    np.testing.assert_array_equal(np.array(values).reshape(40, 5), world.v)
    csv = server.get("/v1/kernels/export", query={"kernel.name": "known"}, headers={"Accept": "text/csv"})
    assert csv.status == 200 and csv.headers["Content-Type"].startswith("text/csv"), csv
    assert 'filename="known-v1.csv"' in csv.headers["Content-Disposition"]
    lines = csv.body.decode().splitlines()
    assert lines[0] == "row,v0,v1,v2,v3,v4" and len(lines) == 41
    np.testing.assert_array_equal(np.array([[float(x) for x in line.split(",")[1:]] for line in lines[1:]]), world.v)
    with server.open_stream("/v1/kernels/export", {"kernel.name": "known"}) as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        events = list(sse_events(stream))
    assert [e for e, _ in events] == ["message"] * len(chunks) + ["end"]
    assert [json.loads(d) for _, d in events[:-1]] == chunks

    small = server.ok("POST", "/v1/kernels/import", [{"header": {"name": "scratch", "numPoints": "1", "dim": 2}},
                                                     {"rows": {"firstRow": "0", "values": [1.5, -2]}}])
    assert small["version"] == "1"
    assert server.ok("POST", "/v1/kernels/delete", {"name": "scratch"}) == {}
    expect_error(server.get("/v1/kernels/get", query={"kernel.name": "scratch"}), 404, "NOT_FOUND", "scratch")


def test_query_routes(server, world):
    k = world.v @ world.v.T
    similarity = server.ok("POST", "/v1/queries/similarity", {"kernel": {"name": "known"},
                                                              "iKeys": ["item-03", "item-07"],
                                                              "jKeys": ["item-07", "item-03"]})
    np.testing.assert_allclose(similarity["values"], [k[3, 7], k[7, 3]], rtol=1e-12)
    top = server.ok("GET", "/v1/queries/top-k", query={"kernel.name": "known", "itemKey": "item-17", "k": 3,
                                                         "excludeSelf": "true"})
    expected = [j for j in np.argsort(-k[17], kind="stable") if j != 17][:3]
    assert [(t["index"], t["itemKey"]) for t in top["items"]] == [(j, world.keys[j]) for j in expected]
    embedded = server.ok("GET", "/v1/queries/embed", query={"kernel.name": "known", "rows": [2, 5]})
    assert embedded["rank"] == 5
    np.testing.assert_array_equal(np.array(embedded["values"]).reshape(2, 5), world.v[[2, 5]])
    reranked = server.ok("POST", "/v1/queries/re-rank", {"kernel": {"name": "known"}, "candidateKeys": world.keys[:6],
                                                         "k": 3})
    assert len(reranked["items"]) == 3 and reranked["iterations"] > 0

    iris = np.loadtxt(DATA / "iris.csv", delimiter=",", skiprows=1)
    rows = iris[[0, 1, 100, 120], :4]
    classified = server.ok("POST", "/v1/queries/classify", {"kernel": {"name": "iris-mkl"}, "dim": 4,
                                                            "features": rows.ravel().tolist()})
    assert classified["labels"] == [0, 0, -1, -1]

    friends = server.ok("GET", "/v1/queries/recommend-friends", query={"kernel.name": "friends", "user": 0, "k": 5})
    assert len(friends["items"]) == 5
    strength = server.ok("POST", "/v1/queries/social-strength",
                         {"kernel": {"name": "friends"}, "u": [0] * 5, "v": [f["index"] for f in friends["items"]]})
    np.testing.assert_allclose(strength["values"], [f["score"] for f in friends["items"]], rtol=1e-12)
    groups = server.ok("GET", "/v1/queries/recommend-groups", query={"kernel.name": "friends", "user": 3, "k": 2})
    assert groups["items"] and all(g["index"] != 2 for g in groups["items"])  # user 3 is in group 2
    users = server.ok("POST", "/v1/queries/classify-users", {"kernel": {"name": "friends"}, "labelledUsers": [1, 13],
                                                             "labels": [0, 1]})
    assert len(users["users"]) == len(users["labels"]) == 24
    assert np.mean(np.array(users["labels"]) == world.community[users["users"]]) >= 0.8


# ---- (a) every route: bad bodies, wrong types, unknown fields, missing resources --------

def probe(method, message):
    """A request body of `message` (a dict or a JSON string) for the method:
    client streams take an array."""
    if method.client_streaming:
        return [message]
    return message


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_body_that_is_not_json(server, path):
    said = "not valid JSON" if ROUTES[path].client_streaming else "body: "
    expect_error(server.post(path, b"{not json"), 400, "INVALID_ARGUMENT", said)


def wrong_type(descriptor):
    """{field: a value of the wrong type} for the message's first field, and the field."""
    fields = descriptor.fields
    if not fields:
        return "not an object", None
    f = fields[0]
    # A string for messages, numbers and bools; an object for strings, bytes and enums.
    value = {"an": "object"} if f.type in (f.TYPE_STRING, f.TYPE_BYTES, f.TYPE_ENUM) else "abc"
    return {f.json_name: value}, f


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_field_of_the_wrong_type(server, path):
    method = ROUTES[path]
    body, field = wrong_type(method.input_type)
    r = server.post(path, probe(method, body))
    expect_error(r, 400, "INVALID_ARGUMENT", "body[0]" if method.client_streaming else "body",
                 method.input_type.full_name)
    if field is not None:
        assert field.name in r.message or field.json_name in r.message, r


def test_field_of_the_wrong_type_in_a_query(server):
    r = server.get("/v1/queries/top-k", query={"kernel.name": "known", "k": "abc"})
    expect_error(r, 400, "INVALID_ARGUMENT", "query", "(k)", "abc")
    expect_error(server.get("/v1/jobs/list", query={"state": "SOMETIMES"}), 400, "INVALID_ARGUMENT", "state")
    expect_error(server.post("/v1/queries/top-k", {"k": "abc"}), 400, "INVALID_ARGUMENT", "(k)")


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_unknown_field(server, path):
    method = ROUTES[path]
    expect_error(server.post(path, probe(method, {"noSuchField": 1})), 400, "INVALID_ARGUMENT", "noSuchField")


# What each method looks up, missing; the others look nothing up (below).
MISSING = {
    "/v1/datasets/get": {"id": "ds-missing"},
    "/v1/datasets/delete": {"id": "ds-missing"},
    "/v1/datasets/upload": [{"header": {"numPoints": "150", "dim": 4, "baseDatasetId": "ds-missing"}}],
    "/v1/datasets/set-attributes": [{"datasetId": "ds-missing"}, {"attributes": {"csv": ""}}],
    "/v1/jobs/submit": {"datasetId": "ds-missing", "klAdmm": {}},
    "/v1/jobs/get": {"id": "job-missing"},
    "/v1/jobs/cancel": {"id": "job-missing"},
    "/v1/jobs/watch": {"id": "job-missing"},
    "/v1/jobs/history": {"id": "job-missing"},
    "/v1/kernels/get": {"kernel": {"name": "missing"}},
    "/v1/kernels/delete": {"name": "missing"},
    "/v1/kernels/set-alias": {"name": "missing", "alias": "a", "version": "1"},
    "/v1/kernels/export": {"kernel": {"name": "missing"}},
    "/v1/kernels/inspect": {"kernel": {"name": "missing"}},
    "/v1/queries/similarity": {"kernel": {"name": "missing"}, "i": [0], "j": [0]},
    "/v1/queries/top-k": {"kernel": {"name": "missing"}, "item": 0, "k": 1},
    "/v1/queries/embed": {"kernel": {"name": "missing"}, "rows": [0]},
    "/v1/queries/re-rank": {"kernel": {"name": "missing"}, "candidates": [0]},
    "/v1/queries/social-strength": {"kernel": {"name": "missing"}, "u": [0], "v": [1]},
    "/v1/queries/recommend-friends": {"kernel": {"name": "missing"}, "k": 1},
    "/v1/queries/recommend-groups": {"kernel": {"name": "missing"}, "k": 1},
    "/v1/queries/classify": {"kernel": {"name": "missing"}, "dim": 1, "features": [1]},
    "/v1/queries/classify-users": {"kernel": {"name": "missing"}, "labelledUsers": [0, 1], "labels": [0, 1]},
}
# Methods that look nothing up: lists answer empty for a filter matching nothing.
NOTHING_TO_FIND = {"/v1/admin/echo", "/v1/admin/get-server-info", "/v1/admin/backup", "/v1/datasets/list", "/v1/jobs/list",
                   "/v1/kernels/list", "/v1/kernels/import"}


@pytest.mark.parametrize("path", sorted(MISSING))
def test_not_found(server, path):
    expect_error(server.post(path, MISSING[path]), 404, "NOT_FOUND", "missing")


def test_every_route_has_a_not_found_case_or_finds_nothing(server):
    assert set(MISSING) | NOTHING_TO_FIND == set(ROUTES) and not set(MISSING) & NOTHING_TO_FIND
    assert server.ok("GET", "/v1/kernels/list", query={"name": "missing"}) == {"kernels": []}
    assert server.ok("GET", "/v1/jobs/list", query={"datasetId": "ds-missing"}) == {"jobs": [], "nextPageToken": ""}
    # Server streams answer 404 as JSON, or an `error` event as SSE.
    with server.open_stream("/v1/jobs/watch", {"id": "job-missing"}) as stream:
        events = list(sse_events(stream))
    assert len(events) == 1 and events[0][0] == "error"
    assert json.loads(events[0][1])["code"] == "NOT_FOUND"


# ---- (b) bearer tokens -------------------------------------------------------------------

def test_tokens(auth_server):
    s = auth_server
    r = s.get("/v1/admin/get-server-info")
    expect_error(r, 401, "UNAUTHENTICATED", "/kls.v1.Admin/GetServerInfo")
    assert r.headers["WWW-Authenticate"] == "Bearer"
    r = s.get("/v1/admin/get-server-info", headers={"Authorization": "Bearer not-a-token-0123456789"})
    expect_error(r, 401, "UNAUTHENTICATED")
    assert r.headers["WWW-Authenticate"] == "Bearer"

    read = {"Authorization": "Bearer " + READ_TOKEN}
    write = {"Authorization": "Bearer " + WRITE_TOKEN}
    assert s.ok("GET", "/v1/admin/get-server-info", headers=read)["version"]
    assert s.ok("GET", "/v1/datasets/list", headers=read) == {"datasets": []}
    expect_error(s.post("/v1/jobs/submit", {"datasetId": "x"}, headers=read), 403, "PERMISSION_DENIED", "write")
    expect_error(s.post("/v1/datasets/upload", b"a,label\n1,0\n", content_type="text/csv", headers=read),
                 403, "PERMISSION_DENIED")
    expect_error(s.post("/v1/datasets/delete", {"id": "ds-missing"}, headers=write), 404, "NOT_FOUND")
    uploaded = s.ok("POST", "/v1/datasets/upload", b"a,b,label\n1,2,0\n3,4,1\n", content_type="text/csv",
                    headers=write, query={"name": "two"})
    assert s.ok("GET", "/v1/datasets/get", query={"id": uploaded["id"]}, headers=read)["numPoints"] == "2"
    # The document and the console need no token.
    assert s.get("/openapi.json").status == 200 and s.get("/").status == 200


def test_every_operation_needs_the_scope_the_document_names(auth_server):
    """With the read token: read operations get past the check (to the body's
    400), write and admin ones are refused; without a token every one is 401."""
    s = auth_server
    doc = s.ok("GET", "/openapi.json")
    read = {"Authorization": "Bearer " + READ_TOKEN}
    for path, item in doc["paths"].items():
        method = ROUTES[path]
        for verb, op in item.items():
            scope = op["x-kls-scope"]
            kw = {"query": {"noSuchField": "1"}} if verb == "get" else {"body": probe(method, {"noSuchField": 1})}
            r = s.request(verb.upper(), path, headers=read, **kw)
            if scope == "read":
                expect_error(r, 400, "INVALID_ARGUMENT", "noSuchField")
            else:
                expect_error(r, 403, "PERMISSION_DENIED", scope)
            expect_error(s.request(verb.upper(), path, **kw), 401, "UNAUTHENTICATED")


# ---- (c) Server-Sent Events: watching a running job ------------------------------------

def test_sse_watch_of_a_running_job(server, world):
    job = server.ok("POST", "/v1/jobs/submit", {
        "datasetId": world.iris["id"], "kernelName": "never",
        "klAdmm": {"gamma": 10, "maxIterations": 100000000, "tolerance": 0}})
    states, iterations, names = [], [], []
    cancelled = False
    with server.open_stream("/v1/jobs/watch", {"id": job["id"]}, headers={"X-Request-Id": "watch-1"}) as stream:
        assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
        assert stream.headers["X-Request-Id"] == "watch-1"
        for event, data in sse_events(stream):
            names.append(event)
            if event != "message":
                assert event == "end" and json.loads(data) == {}, (event, data)
                continue
            watched = json.loads(data)["job"]
            assert watched["id"] == job["id"]
            states.append(watched["state"])
            if watched["state"] == "RUNNING" and "progress" in watched:  # none before the first report
                iterations.append(watched["progress"]["iteration"])
            if len(set(iterations)) >= 4 and not cancelled:
                server.ok("POST", "/v1/jobs/cancel", {"id": job["id"]})
                cancelled = True
    assert cancelled, states
    assert names[-1] == "end" and names[:-1] == ["message"] * (len(names) - 1)
    assert states[-1] == "CANCELLED" and set(states[:-1]) <= {"QUEUED", "RUNNING"}, states[-5:]
    assert iterations == sorted(iterations) and iterations[-1] > iterations[0]
    assert server.ok("GET", "/v1/jobs/get", query={"id": job["id"]})["state"] == "CANCELLED"


# ---- (d) CSV upload, learn, query: HTTP only ---------------------------------------------

def test_csv_upload_job_and_query_over_http_only(server):
    wine = server.ok("POST", "/v1/datasets/upload", (DATA / "wine.csv").read_bytes(), content_type="text/csv",
                     query={"name": "wine", "protocol": "admm", "seed": "2"})
    assert (wine["numPoints"], wine["dim"], wine["numClasses"]) == ("178", 13, 3)
    job = server.ok("POST", "/v1/jobs/submit", {"datasetId": wine["id"], "kernelName": "wine-admm",
                                                "scaling": "ZSCORE", "klAdmm": {"gamma": 10}})
    done = server.watch(job["id"])
    assert done["state"] == "SUCCEEDED" and done["kernelVersion"] == "1", done
    top = server.ok("GET", "/v1/queries/top-k",
                    query={"kernel.name": "wine-admm", "item": 0, "k": 5, "excludeSelf": "true"})["items"]
    assert len(top) == 5 and all(t["index"] != 0 for t in top)
    assert [t["score"] for t in top] == sorted((t["score"] for t in top), reverse=True)
    pairs = server.ok("GET", "/v1/queries/similarity",
                      query={"kernel.name": "wine-admm", "i": [0, 0], "j": [top[0]["index"], 0]})["values"]
    assert pairs[0] == pytest.approx(top[0]["score"], rel=1e-12) and pairs[1] > 0


# ---- (e) the HTTP answers are the gRPC answers --------------------------------------------

def test_similarity_and_top_k_equal_the_grpc_answers(server, world):
    pairs = [(0, 1), (0, 100), (50, 149), (7, 7), (140, 3)]
    over_http = server.ok("POST", "/v1/queries/similarity", {"kernel": {"name": "iris-admm"},
                                                            "i": [i for i, _ in pairs], "j": [j for _, j in pairs]})
    with kls_client.Client(server.target, timeout=20) as client:
        assert over_http["values"] == client.similarity("iris-admm", pairs).tolist()
        for item in (0, 75, 149):
            http_top = server.ok("GET", "/v1/queries/top-k", query={"kernel.name": "iris-admm", "item": item, "k": 10,
                                                                    "excludeSelf": "true"})["items"]
            grpc_top = client.topk("iris-admm", item=item, k=10, exclude_self=True)
            assert [(t["index"], t["score"]) for t in http_top] == [(t.index, t.score) for t in grpc_top]
        query = [0.5, -1.0, 0.25, 2.0, 0.0]
        http_top = server.ok("POST", "/v1/queries/top-k", {"kernel": {"name": "known"}, "vector": {"values": query},
                                                           "k": 5, "metric": "COSINE"})["items"]
        grpc_top = client.topk("known", vector=query, k=5, metric="cosine")
        assert [(t["index"], t["itemKey"], t["score"]) for t in http_top] == [tuple(t) for t in grpc_top]

    # The same request messages through the generated stub: equal response messages.
    requests = [
        queries_pb2.SimilarityRequest(kernel=kernels_pb2.KernelRef(name="known"), i_keys=["item-01", "item-09"],
                                      j_keys=["item-30", "item-09"]),
        queries_pb2.TopKRequest(kernel=kernels_pb2.KernelRef(name="iris-admm", version=1), item=3, k=7,
                                min_score=-1e9, offset=2),
        queries_pb2.TopKRequest(kernel=kernels_pb2.KernelRef(name="known"), k=4, exclude_self=True,
                                queries=[queries_pb2.TopKQuery(item=5), queries_pb2.TopKQuery(item_key="item-22")],
                                select=queries_pb2.ItemSelector(exclude_keys=["item-00"], filter="index > 3")),
    ]
    with grpc.insecure_channel(server.target) as channel:
        stub = queries_pb2_grpc.QueriesStub(channel)
        for request in requests:
            kind = type(request).__name__[:-len("Request")]
            path = "/v1/queries/" + kebab(kind)
            http_json = server.ok("POST", path, json_format.MessageToJson(request))
            grpc_answer = getattr(stub, kind)(request, timeout=20)
            http_answer = json_format.ParseDict(http_json, type(grpc_answer)())
            assert http_answer == grpc_answer, (path, http_json)
            assert http_json == json_format.MessageToDict(grpc_answer, including_default_value_fields=True)


# ---- (f) /openapi.json and the routes, both ways ------------------------------------------

def schema_of(doc, ref):
    return doc["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def sample_query_value(doc, schema):
    """A valid query-string value for a parameter schema."""
    if "$ref" in schema:
        schema = schema_of(doc, schema)
    if schema.get("type") == "array":
        return sample_query_value(doc, schema["items"])
    if "enum" in schema:
        return schema["enum"][-1]
    return {"integer": "1", "number": "0.5", "boolean": "true"}.get(
        schema.get("type"), "AAAA" if schema.get("format") == "byte" else "1" if schema.get("format") else "x")


def test_openapi_document_matches_the_routes(server):
    r = server.get("/openapi.json")
    assert r.status == 200 and r.headers["Content-Type"].startswith("application/json"), r
    doc = r.json()
    assert doc["openapi"] == "3.0.3"
    assert doc["info"]["version"] == server.ok("GET", "/v1/admin/get-server-info")["version"]
    # Both ways: the document's paths are exactly the methods of the Python descriptors.
    assert set(doc["paths"]) == set(ROUTES)
    pool = descriptor_pool.Default()
    for path, item in doc["paths"].items():
        method = ROUTES[path]
        service = method.containing_service.name
        assert item["post"]["operationId"] == "%s_%s" % (service, method.name)
        for verb, op in item.items():
            assert op["tags"] == [service]
            # The route answers every documented verb (400: it parsed the probe), never 404 / 405.
            kw = {"query": {"noSuchField": "1"}} if verb == "get" else {"body": probe(method, {"noSuchField": 1})}
            expect_error(server.request(verb.upper(), path, **kw), 400, "INVALID_ARGUMENT", "noSuchField")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body is not None:
                input_ref = {"$ref": "#/components/schemas/" + method.input_type.name}
                assert body == ({"type": "array", "items": input_ref} if method.client_streaming else input_ref)
            ok = op["responses"]["200"]["content"]
            output = {"$ref": "#/components/schemas/" + method.output_type.name}
            assert ok["application/json"]["schema"] == ({"type": "array", "items": output}
                                                        if method.server_streaming else output)
            assert ("text/event-stream" in ok) == method.server_streaming
        if "get" not in item:  # a verb not documented is not answered
            r = server.get(path)
            expect_error(r, 405, "UNIMPLEMENTED")
            assert r.headers["Allow"] == "POST"
        else:
            assert not method.client_streaming
    # The schemas are the messages' JSON names and the enums' values.
    for name, schema in doc["components"]["schemas"].items():
        if name == "Error" or name.startswith("google."):
            continue
        try:
            message = pool.FindMessageTypeByName("kls.v1." + name)
        except KeyError:
            enum = pool.FindEnumTypeByName("kls.v1." + name)
            assert schema["enum"] == [v.name for v in enum.values], name
            continue
        assert set(schema["properties"]) == {f.json_name for f in message.fields}, name
    # Every documented query parameter of a GET operation is taken (alone, with a value of its type).
    for path, item in doc["paths"].items():
        if "get" not in item:
            continue
        for parameter in item["get"]["parameters"]:
            if "$ref" in parameter:
                continue
            assert parameter["in"] == "query"
            value = sample_query_value(doc, parameter["schema"])
            r = server.get(path, query={parameter["name"]: value})
            assert r.status == 200 or not r.message.startswith("query"), (path, parameter["name"], value, r)
            if parameter["schema"].get("type") in ("integer", "number"):
                expect_error(server.get(path, query={parameter["name"]: "abc"}), 400, "INVALID_ARGUMENT", "query")
    # So is every documented query parameter of a CSV upload.
    iris = (DATA / "iris.csv").read_bytes()
    for parameter in doc["paths"]["/v1/datasets/upload"]["post"]["parameters"]:
        if "$ref" not in parameter:
            query = {"protocol": "admm", parameter["name"]: sample_query_value(doc, parameter["schema"])}
            r = server.post("/v1/datasets/upload", iris, query=query, content_type="text/csv")
            assert r.status == 200 or not r.message.startswith(("query", "protocol.")), (query, r)
    generated = server.ok("POST", "/v1/datasets/upload", iris, content_type="text/csv",
                          query={"protocol": "admm", "protocol.mustFraction": "0.2"})["generated"]
    assert generated["mustLink"] == str(30 + 150)  # round(0.2 n) + the n self pairs


def test_unknown_paths_and_wrong_verbs(server):
    for path in ("/v1/queries/nope", "/v1/nope/top-k", "/v1/queries/top-k/", "/v1/queries/TopK", "/v1/"):
        expect_error(server.post(path, {}), 404, "NOT_FOUND", path)
    expect_error(server.get("/no-such-page"), 404, "NOT_FOUND")
    for verb in ("PUT", "DELETE", "PATCH"):
        r = server.request(verb, "/v1/queries/top-k", {})
        expect_error(r, 405, "UNIMPLEMENTED", verb)
        assert r.headers["Allow"] == "GET, POST"
    r = server.get("/v1/jobs/submit")
    expect_error(r, 405, "UNIMPLEMENTED", "GET")
    assert r.headers["Allow"] == "POST"
    expect_error(server.post("/v1/queries/top-k", b"k=1", content_type="text/plain"), 400, "INVALID_ARGUMENT",
                 "Content-Type")


# ---- (g) CORS ------------------------------------------------------------------------------

def test_cors(server, world):
    foreign = server.get("/v1/admin/get-server-info", headers={"Origin": FOREIGN_ORIGIN})
    expect_error(foreign, 403, "PERMISSION_DENIED", FOREIGN_ORIGIN)
    assert "Access-Control-Allow-Origin" not in foreign.headers
    expect_error(server.request("OPTIONS", "/v1/queries/top-k", headers={
        "Origin": FOREIGN_ORIGIN, "Access-Control-Request-Method": "POST"}), 403, "PERMISSION_DENIED")

    listed = server.get("/v1/kernels/get", query={"kernel.name": "known"}, headers={"Origin": ALLOWED_ORIGIN})
    assert listed.status == 200, listed
    assert listed.headers["Access-Control-Allow-Origin"] == ALLOWED_ORIGIN and listed.headers["Vary"] == "Origin"
    assert "X-Request-Id" in listed.headers["Access-Control-Expose-Headers"]
    preflight = server.request("OPTIONS", "/v1/queries/top-k", headers={
        "Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, x-request-id"})
    assert preflight.status == 204, preflight
    assert preflight.headers["Access-Control-Allow-Origin"] == ALLOWED_ORIGIN
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    allowed_headers = preflight.headers["Access-Control-Allow-Headers"].lower()
    assert all(h in allowed_headers for h in ("authorization", "content-type", "x-request-id"))
    # The server itself (its console) is always allowed.
    same = server.get("/v1/admin/get-server-info", headers={"Origin": server.base})
    assert same.status == 200 and same.headers["Access-Control-Allow-Origin"] == server.base


# ---- (h) body limit -----------------------------------------------------------------------

def test_body_over_the_limit_is_413(tmp_path):
    s = Server(tmp_path, "--max-message-mb", "1")
    try:
        small = s.ok("POST", "/v1/admin/echo", {"payload": b64(b"x" * 500_000)})
        assert len(base64.b64decode(small["payload"])) == 500_000
        expect_error(s.post("/v1/admin/echo", {"payload": b64(b"x" * 1_000_000)}), 413, "RESOURCE_EXHAUSTED",
                     "over the limit of 1048576 bytes")
        # The server answers on.
        assert s.ok("GET", "/v1/admin/get-server-info")["maxMessageBytes"] == str(1 << 20)
    finally:
        s.stop()


# ---- HTTPS: the gRPC port's certificate serves the HTTP port too ---------------------------

def test_https_with_the_servers_certificate(tmp_path):
    binary = os.environ.get("KLS_SERVER_BINARY")
    if not binary:
        pytest.skip("KLS_SERVER_BINARY is not set (run through ctest)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                                    "--http-listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = None
        deadline = time.monotonic() + 30
        while base is None and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            found = re.search(r"http: https://127\.0\.0\.1:(\d+)/", log.read_text(errors="replace"))
            base = "https://127.0.0.1:" + found.group(1) if found else None
            time.sleep(0.02)
        assert base, log.read_text()
        import ssl
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(base + "/v1/admin/get-server-info", context=context, timeout=20) as r:
            assert r.status == 200 and "version" in json.loads(r.read())
        with urllib.request.urlopen(base + "/", context=context, timeout=20) as r:  # the console too
            assert r.status == 200 and b"<html" in r.read().lower()
        # Plain HTTP on the TLS port gets no answer; the server keeps serving.
        with pytest.raises(Exception):
            urllib.request.urlopen(base.replace("https://", "http://") + "/v1/admin/get-server-info", timeout=5)
        with urllib.request.urlopen(base + "/v1/admin/get-server-info", context=context, timeout=20) as r:
            assert r.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)


# ---- (i) X-Request-Id ---------------------------------------------------------------------

def test_request_id_round_trips(server):
    r = server.get("/v1/admin/get-server-info", headers={"X-Request-Id": "trace-0123"})
    assert r.status == 200 and r.headers["X-Request-Id"] == "trace-0123"
    r = server.post("/v1/datasets/get", {"id": "ds-missing"}, headers={"X-Request-Id": "trace-4567"})
    assert expect_error(r, 404, "NOT_FOUND")["request_id"] == "trace-4567"
    assert r.headers["X-Request-Id"] == "trace-4567"
    # None sent, or an unusable one (spaces, too long): a new id, in the header and the error alike.
    for sent in (None, "has spaces", "x" * 200):
        r = server.post("/v1/datasets/get", {"id": "ds-missing"}, headers={"X-Request-Id": sent} if sent else {})
        generated = r.headers["X-Request-Id"]
        assert generated and generated != sent and r.json()["request_id"] == generated
    ids = {server.get("/v1/admin/get-server-info").headers["X-Request-Id"] for _ in range(3)}
    assert len(ids) == 3


# ---- Admin.Backup: a snapshot into the server's --backup-dir ----------------------------

def test_admin_backup(server):
    answer = server.ok("POST", "/v1/admin/backup", {"name": "over-rest"})
    assert answer["path"].endswith("/backups/over-rest") and int(answer["files"]) >= 1, answer
    expect_error(server.post("/v1/admin/backup", {"name": "over-rest"}), 409, "ALREADY_EXISTS", "over-rest")
    expect_error(server.post("/v1/admin/backup", {"name": "../x"}), 400, "INVALID_ARGUMENT", "name")
    # A read-only verb is refused: Backup needs scope admin and is POST only.
    assert server.get("/v1/admin/backup").status == 405


# ---- every route answered ----------------------------------------------------------------

def test_every_route_answered_a_success(server):
    """Runs last (file order): every route answered 200 in one of the tests above."""
    missing = sorted(set(ROUTES) - ANSWERED)
    if len(ANSWERED) < 10:
        pytest.skip("run with the whole file (the routes are answered by the tests above)")
    assert not missing, missing
