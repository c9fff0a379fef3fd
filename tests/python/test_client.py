"""kls_client against a real kls-server (ctest label python;e2e).

The server binary comes from $KLS_SERVER_BINARY (ctest sets it); each server
runs on 127.0.0.1:0 with a temporary data directory, and its address is read
from the data directory's lock file (as tests/e2e does). Numbers are checked
against numpy on the same embedding: K = V Vᵀ for similarity, the ordering of
V V[i] for topk, VisualRank (I − λ K̂)⁻¹ (1 − λ) P for rerank, and export must
give back an imported V bit for bit.
"""

import json
import pathlib
import subprocess
import time

import grpc
import numpy as np
import pytest

import kls_client
from kls_client import KlsError

import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "test_util"))
from kls_server_process import KlsServerProcess  # noqa: E402  (tests/test_util)

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
IRIS = DATA / "iris.csv"

READ_TOKEN = "read-token-0123456789abcdef"
WRITE_TOKEN = "write-token-0123456789abcdef"


class Server(KlsServerProcess):
    """One kls-server process (embedded store), waited for until SERVING."""

    def __init__(self, directory, *extra, tls_ca=None):
        super().__init__(directory, "--log-level", "warn", *extra)
        deadline = time.monotonic() + 30
        with kls_client.Client(self.target, timeout=1, tls_ca=tls_ca) as probe:
            while True:
                try:
                    if probe.health() == "SERVING":
                        break
                except KlsError:
                    pass
                assert time.monotonic() < deadline, "never SERVING:\n" + self.log.read_text()
                time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("kls"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    with kls_client.Client(server.target, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("kls-auth")
    tokens = directory / "tokens"
    tokens.write_text("# test tokens\n%s read\n%s write\n" % (READ_TOKEN, WRITE_TOKEN))
    s = Server(directory, "--tokens-file", str(tokens))
    yield s
    s.stop()


def iris_constraints(labels, count=100, seed=1):
    """`count` distinct pairs i < j, must-link when the classes agree."""
    rng = np.random.default_rng(seed)
    seen, out = set(), []
    while len(out) < count:
        i, j = sorted(int(t) for t in rng.choice(len(labels), 2, replace=False))
        if (i, j) not in seen:
            seen.add((i, j))
            out.append((i, j, 1 if labels[i] == labels[j] else -1))
    return out


def visual_rank(v, prior=None, damping=0.85):
    """VisualRank scores of the rows of v, solved directly (no iteration)."""
    k = v @ v.T
    if k.min() < 0:
        k = k - k.min()
    n = k.shape[0]
    p = np.full(n, 1.0 / n) if prior is None else np.asarray(prior, dtype=float)
    k_hat = k / k.sum(axis=0)
    return np.linalg.solve(np.eye(n) - damping * k_hat, (1 - damping) * p)


@pytest.fixture(scope="module")
def imported(client):
    """A known embedding V with item keys, imported as kernel "known"."""
    rng = np.random.default_rng(7)
    v = rng.standard_normal((40, 5))
    keys = ["item-%02d" % i for i in range(40)]
    info = client.import_kernel("known", v, keys=keys)
    return v, keys, info


# ---- health, upload ------------------------------------------------------------------

def test_health_and_server_info(client):
    assert client.health() == "SERVING"
    info = client.server_info()
    assert info.version
    assert info.worker_threads == 1
    assert client.echo(b"\x00kls") == b"\x00kls"


def test_upload_array_and_file(client, tmp_path):
    x, y, _ = kls_client.read_csv(IRIS)
    assert x.shape == (150, 4) and y.shape == (150,)
    from_file = client.upload(IRIS)
    assert (from_file.name, from_file.num_points, from_file.dim, from_file.num_classes) == ("iris", 150, 4, 3)

    pairs = iris_constraints(y)
    from_array = client.upload(x, labels=y, constraints=pairs, name="iris-c")
    assert (from_array.num_points, from_array.num_constraints) == (150, 100)

    constraints = tmp_path / "pairs.csv"
    constraints.write_text("i,j,kind\n" + "".join("%d,%d,%s\n" % (i, j, "must" if k > 0 else "cannot")
                                                  for i, j, k in iris_constraints(y[:20], 10)))
    keyed = client.upload(x[:20], keys=["k%d" % i for i in range(20)], constraints=constraints, encoding="sparse")
    assert (keyed.num_points, keyed.num_constraints, keyed.num_classes) == (20, 10, 0)

    ids = {d.id for d in client.datasets()}
    assert {from_file.id, from_array.id, keyed.id} <= ids
    assert client.dataset(keyed.id).num_points == 20
    client.delete_dataset(keyed.id)
    with pytest.raises(KlsError) as e:
        client.dataset(keyed.id)
    assert e.value.code == grpc.StatusCode.NOT_FOUND



# ---- imported kernel: similarity, topk, rerank, export against numpy -----------------

def test_export_returns_the_imported_embedding_exactly(client, imported):
    v, _, info = imported
    assert (info.name, info.num_points, info.rank) == ("known", 40, 5)
    exported, exported_info = client.export("known", with_info=True)
    assert exported.dtype == np.float64
    np.testing.assert_array_equal(exported, v)
    assert exported_info.version == info.version
    np.testing.assert_array_equal(client.export(info), v)  # by KernelInfo: that exact version
    assert any(k.name == "known" for k in client.kernels())


def test_similarity_is_v_vt(client, imported):
    v, _, info = imported
    rng = np.random.default_rng(3)
    pairs = rng.integers(0, 40, size=(200, 2))
    values = client.similarity("known", pairs)
    assert values.shape == (200,)
    k = v @ v.T
    np.testing.assert_allclose(values, k[pairs[:, 0], pairs[:, 1]], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(client.similarity("known:%d" % info.version, [(3, 3)]), [k[3, 3]], rtol=1e-12)


def test_topk_matches_numpy(client, imported):
    v, keys, _ = imported
    k = v @ v.T
    for item in (0, 17, 39):
        expected = [j for j in np.argsort(-k[item], kind="stable") if j != item][:7]
        top = client.topk("known", item=item, k=7, exclude_self=True)
        assert [t.index for t in top] == expected
        assert [t.key for t in top] == [keys[j] for j in expected]
        np.testing.assert_allclose([t.score for t in top], k[item, expected], rtol=1e-12)
        index, key, score = top[0]  # a plain (index, key, score) tuple too
        assert (index, key) == (expected[0], keys[expected[0]])

    by_key = client.topk("known", key="item-17", k=7, exclude_self=True)
    assert [t.index for t in by_key] == [t.index for t in client.topk("known", item=17, k=7, exclude_self=True)]

    query = np.array([0.5, -1.0, 0.25, 2.0, 0.0])
    scores = v @ query
    top = client.topk("known", vector=query, k=5)
    assert [t.index for t in top] == list(np.argsort(-scores, kind="stable")[:5])
    np.testing.assert_allclose([t.score for t in top], np.sort(scores)[::-1][:5], rtol=1e-12)


def test_rerank_matches_visual_rank(client, imported):
    v, keys, _ = imported
    candidates = [4, 17, 9, 30, 22, 1]
    prior = [0.9, 0.5, 0.4, 0.1, 0.3, 0.2]
    expected = visual_rank(v[candidates], prior)
    ranked = client.rerank("known", candidates, prior=prior)
    order = np.argsort(-expected, kind="stable")
    assert [r.index for r in ranked] == [candidates[t] for t in order]
    np.testing.assert_allclose([r.score for r in ranked], expected[order], rtol=1e-9)
    assert ranked.iterations > 0

    by_key = client.rerank("known", [keys[c] for c in candidates], prior=prior, k=3)
    assert [r.key for r in by_key] == [keys[candidates[t]] for t in order[:3]]

    uniform = visual_rank(v[candidates], damping=0.5)
    ranked = client.rerank("known", candidates, damping=0.5)
    np.testing.assert_allclose([r.score for r in ranked], np.sort(uniform)[::-1], rtol=1e-9)


def test_embed_rows(client, imported):
    v, _, _ = imported
    np.testing.assert_array_equal(client.embed("known", rows=[2, 5]), v[[2, 5]])


# ---- learned kernels: submit, watch, wait, cancel --------------------------------------

def test_submit_wait_and_query_a_learned_kernel(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y), name="iris-learn")
    job = client.submit(data, "kl_admm", "iris-admm", gamma=10, graph={"k": 5, "weight": "gaussian"})
    assert job.method == "kl_admm" and job.kernel_name == "iris-admm"
    events = []
    done = client.wait(job, on_event=events.append)
    assert kls_client.state_name(done) == "SUCCEEDED" and done.kernel_version == 1
    assert events and events[-1].state == kls_client.jobs_pb2.SUCCEEDED
    assert any(e.progress.iteration > 0 for e in events)
    # The certificate under one name: the final Job and the kernel's info.
    assert done.certificate.certified and done.certificate.HasField("gap") and done.certificate.gap < 1e-3
    assert "family_options" not in client.METHODS and "kl_admm" in client.METHODS
    assert client.job(job.id).state == kls_client.jobs_pb2.SUCCEEDED
    assert job.id in {j.id for j in client.jobs(state="succeeded", dataset=data)}

    # The learned V from core: the queries answer exactly from it.
    v = client.export("iris-admm")
    info = client.kernel("iris-admm")
    assert v.shape == (150, info.rank)
    assert info.certificate == done.certificate
    pairs = [(0, 1), (0, 100), (50, 149), (7, 7)]
    k = v @ v.T
    np.testing.assert_allclose(client.similarity("iris-admm", pairs), [k[i, j] for i, j in pairs],
                               rtol=1e-9, atol=1e-12)
    top = client.topk("iris-admm", item=0, k=10, exclude_self=True)
    np.testing.assert_allclose([t.score for t in top], np.sort(np.delete(k[0], 0))[::-1][:10], rtol=1e-9)

    # Aliases and the other kernel-reference forms.
    client.set_alias("iris-admm", "prod", 1)
    np.testing.assert_array_equal(client.export("iris-admm@prod"), v)
    np.testing.assert_array_equal(client.export(("iris-admm", 1)), v)


def test_a_family_declared_only_in_its_proto_is_a_method(client):
    """Test builds (KLS_TEST_FAMILIES) carry the toy family fixed_rank, whose
    options message lives in tests/families/proto with option (kls.v1.family):
    the client finds it like the built-in ones, takes its fields as options,
    and the server runs it."""
    if "fixed_rank" not in client.METHODS:
        pytest.skip("built without KLS_TEST_FAMILIES")
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x[:40], labels=y[:40], name="iris-toy")
    with pytest.raises(ValueError, match="does not belong to method fixed_rank.*rank, scale"):
        client.submit(data, "fixed_rank", "toy", gamma=1)
    done = client.wait(client.submit(data, "fixed_rank", "toy", rank=3, scale=0.5))
    assert kls_client.state_name(done) == "SUCCEEDED" and done.method == "fixed_rank"
    assert client.kernel("toy").rank == 3
    assert not done.certificate.certified  # no dual bound


def test_ranking_queries_with_attributes_filters_and_batches(client):
    """Attributes uploaded with a data set, a learned kernel on it, then
    filtered / batched / cosine top-k checked against numpy on the exported V."""
    x, y, _ = kls_client.read_csv(IRIS)
    n = x.shape[0]
    keys = ["flower-%03d" % i for i in range(n)]
    rng = np.random.default_rng(3)
    colour = [["red", "blue", "white"][i % 3] for i in range(n)]
    price = [None if i % 17 == 0 else float(np.round(rng.uniform(1, 50), 2)) for i in range(n)]
    sold_out = [bool(i % 5 == 0) for i in range(n)]
    data = client.upload(x, labels=y, keys=keys, constraints=iris_constraints(y), name="shop",
                         attributes={"colour": colour, "price": price, "sold_out": sold_out})
    assert data.attributes == "colour:string, price:float, sold_out:bool"
    job = client.submit(data, "kl_admm", "shop", gamma=10, graph={"k": 5, "weight": "gaussian"})
    assert kls_client.state_name(client.wait(job)) == "SUCCEEDED"
    v = client.export("shop")
    k = v @ v.T

    def passes(j):
        return colour[j] in ("red", "blue") and price[j] is not None and price[j] < 25 and not sold_out[j]

    expression = 'colour in ["red", "blue"] and price < 25 and not sold_out'
    queries = [0, 50, 149]
    answers = client.topk("shop", items=queries, k=8, exclude_self=True, filter=expression,
                          exclude=["flower-003"])
    assert len(answers) == len(queries)
    for item, answer in zip(queries, answers):
        allowed = [j for j in range(n) if j != item and j != 3 and passes(j)]
        expected = sorted(allowed, key=lambda j: (-k[item, j], j))[:8]
        # scores of the best passing items (indices may differ only among exact ties)
        assert len(answer) == 8 and all(t.index in allowed for t in answer)
        np.testing.assert_allclose([t.score for t in answer], [k[item, j] for j in expected], rtol=1e-9, atol=1e-12)
        assert [t.key for t in answer] == [keys[t.index] for t in answer]
        # the batch answers as the single query does
        single = client.topk("shop", key=keys[item], k=8, exclude_self=True, filter=expression, exclude=[3])
        assert [t.index for t in single] == [t.index for t in answer]

    cosine = client.topk("shop", item=7, k=3, metric="cosine")
    assert abs(cosine[0].score - 1.0) < 1e-12   # the item itself (or an exact copy of its row)
    page = client.topk("shop", item=7, k=3, offset=3, metric="cosine")
    assert [t.index for t in page] == [t.index for t in client.topk("shop", item=7, k=6, metric="cosine")][3:]
    assert client.topk("shop", item=7, k=5, filter="price > 1000") == []

    # Replaced without re-learning: the next query sees the new table.
    info = client.set_attributes("shop", {"sold_out": [i >= 10 for i in range(n)]})
    assert info.attributes == "sold_out:bool" and info.attributes_version == 2
    top = client.topk("shop", item=20, k=50, filter="not sold_out")
    assert sorted(t.index for t in top) == list(range(10))
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.topk, "shop", item=20, k=5, filter="colour = 'red'")


def test_upload_with_a_server_side_protocol_learns_and_queries(client):
    """The papers' protocol drawn by the server: the same pairs for the same
    seed as `kls upload --protocol` (both run core's generator), reported in
    DatasetInfo.generated; then a kernel learned on them answers queries."""
    x, y, _ = kls_client.read_csv(IRIS)
    info = client.upload(x, labels=y, protocol="admm", protocol_seed=1, name="iris-protocol")
    assert info.generated.protocol == "admm" and info.generated.seed == 1
    # KL-ADMM §4: round(0.6 n) must-link + round(0.6 n) cannot-link + the n self pairs
    assert info.generated.must_link == 90 + 150 and info.generated.cannot_link == 90
    assert info.num_constraints == 330 and info.generated.components >= 3
    again = client.upload(x, labels=y, protocol="admm", protocol_seed=1)
    assert again.generated == info.generated
    bcd = client.upload(x, labels=y, protocol="bcd", protocol_seed=2, protocol_options={"fraction": 0.1})
    assert bcd.num_constraints == 60 and bcd.generated.must_link == 30
    job = client.submit(info, "kl_admm", "iris-protocol", gamma=10, graph={"k": 5, "weight": "gaussian"})
    assert kls_client.state_name(client.wait(job)) == "SUCCEEDED"
    assert len(client.topk("iris-protocol", item=0, k=5, exclude_self=True)) == 5
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.upload, x, labels=y, protocol="nope")
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.upload, x, protocol="admm")  # no labels
    with pytest.raises(ValueError):
        client.upload(x, labels=y, protocol="admm", constraints=[(0, 1, 1)])


def test_embedding_job_with_an_enum_option(client):
    data = client.upload(IRIS, name="iris-kpca")
    done = client.wait(client.submit(data.id, "embedding", "iris-2d", algorithm="kpca", dims=2))
    assert client.export("iris-2d").shape == (150, 2)
    assert done.method == "embedding"


def test_scaling_is_stored_with_the_kernel(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y), name="iris-scaled")
    done = client.wait(client.submit(data, "kl_admm", "iris-minmax", scaling="minmax", gamma=10))
    assert kls_client.state_name(done) == "SUCCEEDED"
    assert '"scaling":"minmax"' in done.summary_json
    assert '"scaling":"minmax"' in client.kernel("iris-minmax").summary_json
    with pytest.raises(ValueError, match="scaling = 'foo' is not one of none, zscore, minmax"):
        client.submit(data, "kl_admm", "never", scaling="foo")


def test_cross_validation_and_warm_start(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y), name="iris-cv")
    done = client.wait(client.submit(data, "bcd_npkl", "iris-cv",
                                     cross_validation={"folds": 3, "grid": [0.1, 1, 10]}))
    assert kls_client.state_name(done) == "SUCCEEDED"
    assert '"cross_validation":{"folds":3,"score":"threshold","best":' in done.summary_json
    assert '{"value":10,"fold_scores":[' in done.summary_json
    warm = client.wait(client.submit(data, "bcd_npkl", "iris-warm", warm_start="iris-cv:1"))
    assert kls_client.state_name(warm) == "SUCCEEDED"
    assert '"warm_start":{"kernel_name":"iris-cv","version":1}' in warm.summary_json


def test_method_auto_reports_its_leaderboard(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y), name="iris-auto")
    assert "auto" in client.METHODS
    done = client.wait(client.submit(data, "auto", "iris-auto", scaling="zscore",
                                     candidates=["bcd_npkl/square", "linear"], max_seconds=0, folds=3))
    assert kls_client.state_name(done) == "SUCCEEDED"
    summary = json.loads(done.summary_json)
    board = summary["auto"]
    assert [c["name"] for c in board["candidates"]] == ["linear", "bcd_npkl/square"]
    assert all(c["scaling"] == "zscore" and c["status"] == "scored" for c in board["candidates"])
    best = max(board["candidates"], key=lambda c: (c["mean"], c["kind"] == "learned"))
    assert board["chosen"] == best["name"] + "@zscore"
    assert summary["auto_note"].startswith("auto chose ")
    with pytest.raises(kls_client.KlsError) as bad:
        client.submit(data, "auto", "never", candidates=["svm"])
    assert 'auto.candidates[0] = "svm"' in str(bad.value)


def test_classify_with_an_mkl_model(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, name="iris-mkl")
    client.wait(client.submit(data, "mkl", "iris-mkl", algorithm="kta", positive_class=0))
    labels, values = client.classify("iris-mkl", x[[0, 1, 100, 120]])
    assert labels.shape == values.shape == (4,)
    # one-vs-rest for class 0 (setosa): the first two rows are setosa
    assert list(labels[:2]) == [0, 0] and list(labels[2:]) == [-1, -1]
    assert np.all(values[:2] > 0) and np.all(values[2:] < 0)


def test_cancel_a_running_job(client):
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y, seed=2), name="iris-cancel")
    job = client.submit(data, "kl_admm", "never", max_iterations=10_000_000, tolerance=0.0)
    for event in client.watch(job, timeout=20):
        if event.state == kls_client.jobs_pb2.RUNNING:
            break  # closing the watch early is fine
    # A watch with a deadline shorter than the job: DEADLINE_EXCEEDED.
    expect(grpc.StatusCode.DEADLINE_EXCEEDED, client.wait, job, timeout=0.3)
    client.cancel(job)
    with pytest.raises(KlsError) as e:
        client.wait(job, timeout=20)
    assert e.value.code == grpc.StatusCode.CANCELLED
    assert client.wait(job, check=False).state == kls_client.jobs_pb2.CANCELLED
    # Cancelling a finished job is FAILED_PRECONDITION.
    with pytest.raises(KlsError) as e:
        client.cancel(job)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION


# ---- one error per status code ---------------------------------------------------------

def expect(code, call, *args, **kwargs):
    with pytest.raises(KlsError) as e:
        call(*args, **kwargs)
    assert e.value.code == code, str(e.value)
    assert e.value.message and str(e.value).startswith(code.name + ": ")
    return e.value


def test_invalid_argument(client, imported):
    error = expect(grpc.StatusCode.INVALID_ARGUMENT, client.similarity, "known", [(0, 1), (0, 999)])
    assert "999" in error.message
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.topk, "known", vector=[1.0, 2.0], k=3)  # rank is 5
    x, y, _ = kls_client.read_csv(IRIS)
    data = client.upload(x, labels=y, constraints=iris_constraints(y, seed=3), name="iris-bad-option")
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.submit, data, "kl_admm", "bad", gamma=-1.0)


def test_not_found(client):
    expect(grpc.StatusCode.NOT_FOUND, client.similarity, "no-such-kernel", [(0, 1)])
    expect(grpc.StatusCode.NOT_FOUND, client.export, "no-such-kernel")
    expect(grpc.StatusCode.NOT_FOUND, client.job, "job-nope")


def test_failed_precondition(client, imported):
    # An imported embedding has no classifier.
    error = expect(grpc.StatusCode.FAILED_PRECONDITION, client.classify, "known", [[1.0, 2.0, 3.0, 4.0, 5.0]])
    assert "classifier" in error.message


def test_resource_exhausted(client):
    # ImportKernelHeader.dim is limited to 65,536: refused from the header.
    expect(grpc.StatusCode.RESOURCE_EXHAUSTED, client.import_kernel, "too-wide", np.ones((1, 65537)))


def test_unavailable():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with kls_client.Client("127.0.0.1:%d" % port, timeout=5) as nobody:
            expect(grpc.StatusCode.UNAVAILABLE, nobody.health)


def test_unauthenticated_and_permission_denied(auth_server):
    with kls_client.Client(auth_server.target, timeout=10) as anonymous:
        assert anonymous.health() == "SERVING"  # health needs no token
        expect(grpc.StatusCode.UNAUTHENTICATED, anonymous.kernels)
    with kls_client.Client(auth_server.target, token="wrong-token-0123456789abcdef") as wrong:
        expect(grpc.StatusCode.UNAUTHENTICATED, wrong.kernels)
    with kls_client.Client(auth_server.target, token=READ_TOKEN) as reader:
        assert reader.kernels() == []
        error = expect(grpc.StatusCode.PERMISSION_DENIED, reader.import_kernel, "k", np.eye(3))
        assert READ_TOKEN not in error.message
    with kls_client.Client(auth_server.target, token=WRITE_TOKEN) as writer:
        assert writer.import_kernel("k", np.eye(3)).version == 1
        np.testing.assert_array_equal(writer.export("k"), np.eye(3))


def test_local_argument_errors(client):
    with pytest.raises(ValueError, match="version"):
        client.similarity("known:x", [(0, 1)])
    with pytest.raises(ValueError, match="does not belong"):
        client.submit("ds-x", "kl_admm", "k", loss="hinge")
    with pytest.raises(ValueError, match="not one of"):
        client.submit("ds-x", "bcd_npkl", "k", loss="hinged")
    with pytest.raises(ValueError, match="exactly one"):
        client.topk("known", item=1, key="item-01", k=3)


# ---- social data sets: strength, recommend, classify_users --------------------------

def small_community(seed=5):
    """24 users in two communities of 12, 3 photos each; links mostly inside a community."""
    rng = np.random.default_rng(seed)
    users, per_user = 24, 3
    community = np.repeat([0, 1], users // 2)
    owner = np.repeat(np.arange(users), per_user)
    c = community[owner]
    features = rng.standard_normal((len(owner), 4)) + 3.0 * c[:, None]
    contacts = set()
    for u in range(users):
        mates = [v for v in range(users) if v != u and community[v] == community[u]]
        for v in rng.choice(mates, 3, replace=False):
            contacts.add((min(u, int(v)), max(u, int(v))))
    contacts.add((0, 12))  # one link across
    photos_of = lambda cls: np.flatnonzero(c == cls)
    social = {
        "owner": owner,
        "day": rng.integers(0, 365, len(owner)),
        "latitude": 10.0 + 20.0 * c + rng.uniform(-0.2, 0.2, len(owner)),
        "longitude": 5.0 + 20.0 * c + rng.uniform(-0.2, 0.2, len(owner)),
        "tags": [(p, 5 * c[p] + t) for p in range(len(owner)) for t in rng.choice(5, 2, replace=False)],
        "comments": [(int(p), int(rng.choice(np.flatnonzero(community == c[p])))) for p in range(0, len(owner), 2)],
        "contacts": sorted(contacts),
        "groups": [(u, int(community[u])) for u in range(users) if u % 4 != 3] + [(3, 2), (15, 2)],
        "faves": [(u, int(rng.choice(photos_of(community[u])))) for u in range(users)],
    }
    return features, social, community, contacts


def test_social_strength_recommend_and_classify_users(client, imported):
    features, social, community, contacts = small_community()
    data = client.upload(features, social=social, name="tiny-community")
    assert (data.num_points, data.dim) == (72, 4)
    client.wait(client.submit(data, "social_strength", "friends", weighting="kta"))

    friends = client.recommend("friends", 0, k=5)
    assert len(friends) == 5
    linked = {v for u, v in contacts if u == 0} | {u for u, v in contacts if v == 0}
    assert all(f.index != 0 and f.index not in linked for f in friends)
    assert [f.score for f in friends] == sorted((f.score for f in friends), reverse=True)
    # recommend's scores are f(0, v): the same numbers strength gives.
    np.testing.assert_allclose(client.strength("friends", [(0, f.index) for f in friends]),
                               [f.score for f in friends], rtol=1e-12)

    groups = client.recommend("friends", 3, k=2, groups=True)
    assert groups and all(g.index != 2 for g in groups)  # user 3 is in group 2 already

    users, labels, scores = client.classify_users("friends", {1: 0, 13: 1})
    assert len(users) == len(labels) == len(scores) == 24
    assert np.mean(labels == community[users]) >= 0.8
    expect(grpc.StatusCode.FAILED_PRECONDITION, client.strength, "known", [(0, 1)])


# ---- TLS ---------------------------------------------------------------------------------

CERTS = r"""
set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key; openssl req -x509 -new -key ca.key -subj /CN=kls-py-test-ca -days 2 -out ca.crt
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
key server.key; openssl req -new -key server.key -subj /CN=localhost -out server.csr
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext \
  -out server.crt 2>/dev/null
"""


def test_tls_with_a_ca_file(tmp_path):
    import shutil
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command makes the test certificates")
    subprocess.run(["sh", "-c", CERTS], cwd=tmp_path, check=True, capture_output=True)
    s = Server(tmp_path, "--tls-cert", str(tmp_path / "server.crt"), "--tls-key", str(tmp_path / "server.key"),
               tls_ca=tmp_path / "ca.crt")
    try:
        with kls_client.Client(s.target, tls_ca=tmp_path / "ca.crt") as secure:
            assert secure.health() == "SERVING"
            assert secure.echo(b"tls") == b"tls"
        with kls_client.Client(s.target, tls_ca=(tmp_path / "ca.crt").read_bytes(), tls_server_name="localhost") as by_name:
            assert by_name.server_info().version
        with kls_client.Client(s.target, timeout=5) as plain:  # plaintext to a TLS port
            expect(grpc.StatusCode.UNAVAILABLE, plain.health)
    finally:
        s.stop()


def test_request_id_is_sent_and_reported(server):
    """Client(request_id=...) tags every call; a failure carries the id the server used."""
    with kls_client.Client(server.target, timeout=20, request_id="readme-check-42") as c:
        with pytest.raises(kls_client.KlsError) as raised:
            c.kernel("no-such-kernel")
        assert raised.value.code == grpc.StatusCode.NOT_FOUND
        assert raised.value.request_id == "readme-check-42"
    with kls_client.Client(server.target, timeout=20) as c:
        with pytest.raises(kls_client.KlsError) as raised:
            c.export("no-such-kernel")
        assert raised.value.request_id and len(raised.value.request_id) == 16  # the server's own
    with pytest.raises(ValueError, match="request_id = 'has space'"):
        kls_client.Client(server.target, request_id="has space")


def test_per_call_request_id_override(server):
    """with_request_id(ID) tags the calls of a view; the client keeps its own id and connection."""
    with kls_client.Client(server.target, timeout=20, request_id="client-wide-1") as c:
        view = c.with_request_id("per-call-7")
        with pytest.raises(kls_client.KlsError) as raised:
            view.kernel("no-such-kernel")
        assert raised.value.request_id == "per-call-7"
        # Streams too, and a generator started later still sends the view's id.
        with pytest.raises(kls_client.KlsError) as raised:
            view.export("no-such-kernel")
        assert raised.value.request_id == "per-call-7"
        watch = c.with_request_id("per-call-watch").watch("no-such-job")
        with pytest.raises(kls_client.KlsError) as raised:
            next(watch)
        assert raised.value.request_id == "per-call-watch"
        # Closing a view (with block) leaves the client's connection open.
        with c.with_request_id("per-call-8") as v:
            with pytest.raises(kls_client.KlsError) as raised:
                v.job("no-such-job")
            assert raised.value.request_id == "per-call-8"
        assert v.health() == "SERVING"
        # The client itself still sends its own id.
        with pytest.raises(kls_client.KlsError) as raised:
            c.kernel("no-such-kernel")
        assert raised.value.request_id == "client-wide-1"
        for bad in ("", "a b", "x" * 129, "caf\u00e9", None):
            with pytest.raises(ValueError, match="request_id"):
                c.with_request_id(bad)
    # Without a client-wide id, the view's id is the only one sent.
    with kls_client.Client(server.target, timeout=20) as c:
        with pytest.raises(kls_client.KlsError) as raised:
            c.with_request_id("only-one").dataset("no-such-dataset")
        assert raised.value.request_id == "only-one"
        assert len([k for k, _ in c.with_request_id("only-one")._metadata if k == "x-request-id"]) == 1
