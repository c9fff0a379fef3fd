"""kls_client.Client: a synchronous Python client for kls-server.

Mirrors the C++ client (client/client.h): every call carries a deadline
(`timeout` seconds; bulk transfers get it once per 16 MiB moved, watches none
unless asked), uploads and imports stream ~1 MiB messages, the bearer token
goes with every call as "authorization: Bearer TOKEN", and any failed call
raises KlsError with the gRPC status code and the server's message.

One Client may be used from several threads (gRPC channels are thread-safe and
the client holds no other mutable state).
"""

import collections
import copy
import importlib
import os
import pkgutil

import grpc
import numpy as np

from kls.v1 import datasets_pb2, datasets_pb2_grpc
from kls.v1 import family_options_pb2
from kls.v1 import jobs_pb2, jobs_pb2_grpc
from kls.v1 import kernels_pb2, kernels_pb2_grpc
from kls.v1 import queries_pb2, queries_pb2_grpc
from kls.v1 import service_pb2, service_pb2_grpc

from . import _files
from . import _health_pb2 as health_pb2

__all__ = ["Client", "KlsError", "ScoredItem", "RankedItems", "parse_kernel_ref", "state_name"]

_MIB = 1 << 20


class KlsError(Exception):
    """A failed call: `code` is a grpc.StatusCode, `message` the server's text.

    str(error) reads like the `kls` CLI's stderr: "NOT_FOUND: kernel ...".
    `wait` also raises it for a job that ends FAILED (code ABORTED) or
    CANCELLED (code CANCELLED), as `kls watch` exits.
    """

    def __init__(self, code, message, request_id=None):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message
        # The server's id of the failed call (its logs name it), when it sent one.
        self.request_id = request_id

    @classmethod
    def from_rpc_error(cls, error):
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        request_id = None
        try:
            for key, value in (error.trailing_metadata() or ()):
                if key == "x-request-id":
                    request_id = value
        except Exception:  # not a call error (e.g. raised before the call started)
            pass
        return cls(code or grpc.StatusCode.UNKNOWN, details or "", request_id)


class _Translated:
    """Context manager turning grpc.RpcError into KlsError."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if isinstance(value, grpc.RpcError):
            raise KlsError.from_rpc_error(value) from None
        return False


_rpc = _Translated()

#: One result of topk, rerank and recommend. `key` is None when the kernel's
#: data set has no item keys (for RecommendGroups, `index` is the group id).
ScoredItem = collections.namedtuple("ScoredItem", ["index", "key", "score"])


class RankedItems(list):
    """rerank's result: ScoredItems by descending score, plus `iterations`
    (the power iterations VisualRank used)."""

    iterations = 0


def parse_kernel_ref(kernel):
    """A kernels_pb2.KernelRef from "NAME", "NAME:VERSION", "NAME@ALIAS", a
    (name, version) tuple, a KernelInfo (that exact version) or a KernelRef."""
    if isinstance(kernel, kernels_pb2.KernelRef):
        return kernel
    if isinstance(kernel, kernels_pb2.KernelInfo):
        return kernels_pb2.KernelRef(name=kernel.name, version=kernel.version)
    if isinstance(kernel, tuple) and len(kernel) == 2:
        return kernels_pb2.KernelRef(name=str(kernel[0]), version=int(kernel[1]))
    if not isinstance(kernel, str):
        raise TypeError("kernel must be 'NAME', 'NAME:VERSION', 'NAME@ALIAS', (name, version), "
                        "a KernelInfo or a KernelRef; got %r" % (kernel,))
    ref = kernels_pb2.KernelRef()
    if "@" in kernel:
        ref.name, _, ref.alias = kernel.partition("@")
        if not ref.alias:
            raise ValueError("kernel '%s': empty alias after '@'" % kernel)
    elif ":" in kernel:
        name, _, version = kernel.rpartition(":")
        if not version.isdigit() or int(version) < 1:
            raise ValueError("kernel '%s': version '%s' is not a positive integer" % (kernel, version))
        ref.name, ref.version = name, int(version)
    else:
        ref.name = kernel
    if not ref.name:
        raise ValueError("kernel '%s': expected NAME, NAME:VERSION or NAME@ALIAS" % kernel)
    return ref


def state_name(job_or_state):
    """"QUEUED", "RUNNING", "SUCCEEDED", "FAILED" or "CANCELLED"."""
    state = job_or_state.state if isinstance(job_or_state, jobs_pb2.Job) else job_or_state
    return jobs_pb2.JobState.Name(state)


_TERMINAL = (jobs_pb2.SUCCEEDED, jobs_pb2.FAILED, jobs_pb2.CANCELLED)


def _id(thing, message_type, what):
    if isinstance(thing, message_type):
        return thing.id
    if isinstance(thing, str) and thing:
        return thing
    raise TypeError("%s must be an id string or a %s; got %r" % (what, message_type.DESCRIPTOR.name, thing))


def _check_request_id(request_id):
    """The id itself, or ValueError naming it."""
    if (not isinstance(request_id, str) or not (1 <= len(request_id) <= 128)
            or any(not (0x20 < ord(c) < 0x7f) for c in request_id)):
        raise ValueError("request_id = %r: must be 1..128 printable ASCII characters without spaces"
                         % (request_id,))
    return request_id


def _read_pem(value, what):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    with open(os.fspath(value), "rb") as f:
        data = f.read()
    if b"-----BEGIN" not in data:
        raise ValueError("%s '%s' is not a PEM file" % (what, value))
    return data


def _pairs(pairs, what="pairs"):
    array = np.asarray(pairs, dtype=np.int64)
    if array.size == 0:
        array = array.reshape(0, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError("%s must be (i, j) pairs, an m × 2 array; got shape %s" % (what, array.shape))
    return array[:, 0].tolist(), array[:, 1].tolist()


def _matrix(values, what):
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError("%s must be a non-empty rows × columns array; got shape %s" % (what, array.shape))
    return np.ascontiguousarray(array)


class _Social:
    """The social part of an upload (see Client.upload), checked for shape
    and cut into SocialChunk messages like the C++ client: per-photo fields
    in order, then each relation with first_photo = n (no photo fields)."""

    _PHOTO = ("owner", "day", "latitude", "longitude")
    # relation key: (SocialChunk fields a, b)
    _RELATIONS = {
        "tags": ("tag_photo", "tag_id"),
        "comments": ("comment_photo", "comment_author"),
        "contacts": ("contact_a", "contact_b"),
        "groups": ("member_user", "member_group"),
        "faves": ("fave_user", "fave_photo"),
    }

    def __init__(self, social, n):
        known = set(self._PHOTO) | set(self._RELATIONS) | {"num_users", "num_groups", "vocabulary"}
        unknown = sorted(set(social) - known)
        if unknown:
            raise ValueError("social has unknown entries %s (known: %s)" % (unknown, ", ".join(sorted(known))))
        self.n = n
        self.photo = {}
        for key in self._PHOTO:
            if key not in social:
                raise ValueError("social needs '%s', one value per photo" % key)
            values = np.asarray(social[key]).reshape(-1)
            if values.shape[0] != n:
                raise ValueError("social['%s'] has %d values for %d photos" % (key, values.shape[0], n))
            self.photo[key] = values
        self.relations = {}
        for key in self._RELATIONS:
            pairs = np.asarray(social.get(key, ()), dtype=np.int64)
            if pairs.size == 0:
                pairs = pairs.reshape(0, 2)
            if pairs.ndim != 2 or pairs.shape[1] != 2:
                raise ValueError("social['%s'] must be (a, b) pairs; got shape %s" % (key, pairs.shape))
            self.relations[key] = pairs
        r = self.relations
        users = [self.photo["owner"].astype(np.int64), r["comments"][:, 1], r["contacts"].ravel(),
                 r["groups"][:, 0], r["faves"][:, 0]]
        largest = max((int(u.max()) for u in users if u.size), default=-1)
        self.header = datasets_pb2.SocialHeader(
            num_users=int(social.get("num_users", largest + 1)),
            num_groups=int(social.get("num_groups", int(r["groups"][:, 1].max()) + 1 if len(r["groups"]) else 0)),
            vocabulary=int(social.get("vocabulary", max(1, int(r["tags"][:, 1].max()) + 1 if len(r["tags"]) else 1))))

    def chunks(self, budget):
        per_chunk = max(1, budget // 24)
        for first in range(0, self.n, per_chunk):
            end = min(self.n, first + per_chunk)
            yield datasets_pb2.SocialChunk(
                first_photo=first,
                owner=self.photo["owner"][first:end].astype(np.int64).tolist(),
                day=self.photo["day"][first:end].astype(np.int64).tolist(),
                latitude=self.photo["latitude"][first:end].astype(np.float64).tolist(),
                longitude=self.photo["longitude"][first:end].astype(np.float64).tolist())
        per_chunk = max(1, budget // 8)
        for key, (a, b) in self._RELATIONS.items():
            pairs = self.relations[key]
            for first in range(0, pairs.shape[0], per_chunk):
                block = pairs[first:first + per_chunk]
                chunk = datasets_pb2.SocialChunk(first_photo=self.n)
                getattr(chunk, a).extend(block[:, 0].tolist())
                getattr(chunk, b).extend(block[:, 1].tolist())
                yield chunk


def _fill_selector(select, filter, exclude, allow):
    """An ItemSelector from topk's filter / exclude / allow arguments
    (exclude and allow: indices, or keys as strings)."""
    if filter:
        select.filter = filter
    for values, by_index, by_key in ((exclude, select.exclude, select.exclude_keys),
                                     (allow, select.allow, select.allow_keys)):
        if values is None:
            continue
        values = list(values)
        if values and all(isinstance(v, str) for v in values):
            by_key.extend(values)
        else:
            by_index.extend(int(v) for v in values)
    if allow is not None and not list(allow):
        raise ValueError("allow is empty: no item could be returned (pass None for every item)")


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    text = str(value)
    if any(c in text for c in ',"\n\r') or text != text.strip():
        text = '"' + text.replace('"', '""') + '"'
    return text


def _attributes_csv(attributes):
    """upload's / set_attributes' `attributes` as the CSV bytes the server parses."""
    if attributes is None:
        return b""
    if isinstance(attributes, bytes):
        return attributes
    if isinstance(attributes, os.PathLike) or (isinstance(attributes, str) and "\n" not in attributes
                                               and os.path.exists(attributes)):
        with open(os.fspath(attributes), "rb") as f:
            return f.read()
    if isinstance(attributes, str):
        return attributes.encode()
    if not isinstance(attributes, dict):
        raise ValueError("attributes must be a dict {column: values}, a CSV path or CSV text")
    columns = {str(name): list(values) for name, values in attributes.items()}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError("attributes columns have different lengths: %s" % sorted(lengths))
    n = lengths.pop() if lengths else 0
    types = {}
    for name, values in columns.items():
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, (bool, np.bool_)) for v in present):
            types[name] = "bool"
        elif present and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in present):
            types[name] = "int"
        elif present and all(isinstance(v, (int, float, np.integer, np.floating)) for v in present):
            types[name] = "float"
        else:
            types[name] = "string"
    lines = [",".join(["row"] + ["%s:%s" % (name, types[name]) for name in columns])]
    for i in range(n):
        lines.append(",".join([str(i)] + [_csv_cell(columns[name][i]) for name in columns]))
    return ("\n".join(lines) + "\n").encode()


def _family_messages():
    """{family name: options message class}: the families outside
    SubmitJobRequest's solver oneof, found where the server's build finds
    them — every generated message module under the kls package (kls.v1.families,
    and a test build's kls.testing) whose message carries option (kls.v1.family)."""
    out = {}
    import kls as package
    for info in pkgutil.walk_packages(package.__path__, "kls."):
        if info.ispkg or not info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(info.name)
        for name, descriptor in module.DESCRIPTOR.message_types_by_name.items():
            options = descriptor.GetOptions()
            if options.HasExtension(family_options_pb2.family):
                out[options.Extensions[family_options_pb2.family]] = getattr(module, name)
    return out


_FAMILY_MESSAGES = _family_messages()


def _set_field(message, name, value):
    """Sets one options field; enum fields also take their value's name
    (case-insensitive, e.g. loss="hinge", algorithm="kpca")."""
    field = message.DESCRIPTOR.fields_by_name[name]
    if field.message_type is not None:
        if isinstance(value, dict):
            target = getattr(message, name)
            for key, item in value.items():
                if key not in target.DESCRIPTOR.fields_by_name:
                    raise ValueError("%s has no field '%s' (fields: %s)" % (
                        name, key, ", ".join(target.DESCRIPTOR.fields_by_name)))
                _set_field(target, key, item)
        else:
            getattr(message, name).CopyFrom(value)
        return
    if field.label == field.LABEL_REPEATED:  # e.g. cross_validation grid=[0.1, 1, 10]
        del getattr(message, name)[:]
        getattr(message, name).extend(value)
        return
    if field.enum_type is not None and isinstance(value, str):
        by_name = field.enum_type.values_by_name
        wanted = value.upper()
        if wanted not in by_name or by_name[wanted].number == 0:
            valid = [v.name.lower() for v in field.enum_type.values if v.number != 0]
            raise ValueError("%s = '%s' is not one of %s" % (name, value, ", ".join(valid)))
        value = by_name[wanted].number
    setattr(message, name, value)


class Client:
    """A connection to one kls-server.

    target:  "HOST:PORT" (any gRPC target string, e.g. "dns:///kls.internal:50051").
    token:   bearer token sent with every call (servers with a tokens file).
    tls_ca:  CA certificate (path or PEM bytes) that signs the server's
             certificate; turns TLS on. tls=True without it uses the system CAs.
    tls_cert, tls_key: client certificate chain and key (mutual TLS).
    tls_server_name: verify the certificate against this name instead of the
             target's host.
    timeout: deadline of each call, seconds.
    max_message_mb: largest message sent or received; keep it at least the
             server's (ServerInfo.max_message_bytes).
    request_id: sent with every call as x-request-id; the server logs it with
             each call (default: the server makes one per call). A failed
             call's KlsError.request_id is the id the server used. For one
             call or a few, with_request_id(ID) gives the same client with
             another id.

    Connecting is lazy: a server that is down shows up as KlsError(UNAVAILABLE)
    from the first call. Use as a context manager or call close().
    """

    def __init__(self, target="127.0.0.1:50051", token=None, tls_ca=None, timeout=10.0, *,
                 tls=False, tls_cert=None, tls_key=None, tls_server_name=None, max_message_mb=64,
                 request_id=None):
        self.target = target
        self.timeout = float(timeout)
        max_bytes = min(max(int(max_message_mb), 1), 2047) * _MIB
        options = [("grpc.max_receive_message_length", max_bytes), ("grpc.max_send_message_length", max_bytes)]
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("a client certificate needs its key: give both tls_cert and tls_key")
        if tls or tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_pem(tls_ca, "tls_ca"),
                private_key=_read_pem(tls_key, "tls_key"),
                certificate_chain=_read_pem(tls_cert, "tls_cert"))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._owns_channel = True
        if request_id is not None:
            self._metadata += (("x-request-id", _check_request_id(request_id)),)
        self._admin = service_pb2_grpc.AdminStub(self._channel)
        self._datasets = datasets_pb2_grpc.DatasetsStub(self._channel)
        self._jobs = jobs_pb2_grpc.JobsStub(self._channel)
        self._kernels = kernels_pb2_grpc.KernelsStub(self._channel)
        self._queries = queries_pb2_grpc.QueriesStub(self._channel)
        self._health_check = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)

    # ---- plumbing -----------------------------------------------------------

    def close(self):
        """Closes the connection (a with_request_id() view leaves it open)."""
        if self._owns_channel:
            self._channel.close()

    def with_request_id(self, request_id):
        """This client with every call tagged `request_id` (x-request-id)
        instead of the id given to Client() or none: a view sharing the
        connection, token and timeout, e.g.

            client.with_request_id("order-7731").submit(...)
            with client.with_request_id("batch-12") as c:   # closing c keeps
                c.topk(...); c.rerank(...)                  # the connection

        The client itself is unchanged, so threads may use their own views.
        ValueError for an id that is not 1..128 printable ASCII characters
        without spaces."""
        view = copy.copy(self)
        view._owns_channel = False
        view._metadata = tuple(kv for kv in self._metadata if kv[0] != "x-request-id") + (
            ("x-request-id", _check_request_id(request_id)),)
        return view

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _call(self, method, request, timeout=None):
        with _rpc:
            return method(request, timeout=self.timeout if timeout is None else timeout, metadata=self._metadata)

    def _bulk_timeout(self, num_bytes):
        return self.timeout * (1.0 + num_bytes / float(16 * _MIB))

    # ---- Admin and health ---------------------------------------------------

    def health(self, service=""):
        """grpc.health.v1 Check: "SERVING", "NOT_SERVING", "UNKNOWN" or
        "SERVICE_UNKNOWN". KlsError(NOT_FOUND) for a service the server does not know."""
        response = self._call(self._health_check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def server_info(self):
        """Admin.GetServerInfo: version, data_dir, uptime_seconds, worker_threads, max_message_bytes."""
        return self._call(self._admin.GetServerInfo, service_pb2.GetServerInfoRequest())

    def echo(self, payload):
        """Admin.Echo: the payload (bytes) back."""
        return self._call(self._admin.Echo, service_pb2.EchoRequest(payload=payload)).payload

    def backup(self, name="", timeout=3600):
        """Admin.Backup (scope admin): a snapshot of the server's embedded store
        into backup_dir/NAME (default kls-backup-<UTC time>); the BackupResponse
        (path, datasets, kernels, jobs, files, bytes, linked, schema_version,
        attempts, seconds, kls_version). Waits for the whole backup, up to
        `timeout` seconds. KlsError(FAILED_PRECONDITION) when the server has no
        backup_dir or runs on PostgreSQL."""
        return self._call(self._admin.Backup, service_pb2.BackupRequest(name=name), timeout=timeout)

    # ---- Datasets -----------------------------------------------------------

    def upload(self, features, labels=None, keys=None, constraints=None, protocol=None, name=None,
               encoding="auto", chunk_bytes=_MIB, social=None, attributes=None, protocol_seed=1,
               protocol_options=None):
        """Datasets.Upload; returns the stored DatasetInfo (its `id` names the
        data set in submit).

        features:    n × d array, or the path of a CSV or LIBSVM file (the
                     `kls upload` layouts; labels and keys then come from the
                     file unless given here).
        labels:      n class ids ≥ 0, or None.
        keys:        n unique non-empty item keys, or None.
        constraints: m × 3 (i, j, kind) with kind +1 must-link / -1
                     cannot-link, or the path of a constraints file (i,j,kind lines).
        protocol:    instead of constraints, one of the papers' constraint
                     protocols ("admm", "bcd", "simplenpkl"; docs/PROTOCOLS.md)
                     drawn by the server from the labels with `protocol_seed`
                     — the same pairs `kls upload --protocol NAME --seed S`
                     gets; `protocol_options` sets the protocol's own
                     parameters (ConstraintProtocol fields, e.g.
                     {"fraction": 0.1} for bcd). The returned DatasetInfo's
                     `generated` says what was drawn.
        encoding:    "auto" (sparse rows when fewer than half the values are
                     non-zero), "dense" or "sparse".
        social:      makes it a social data set (the rows are the photos'
                     visual features; social_strength jobs learn from it): a
                     dict with one value per photo for "owner", "day",
                     "latitude", "longitude", and (a, b) pair lists "tags"
                     (photo, tag), "comments" (photo, author), "contacts"
                     (user, user), "groups" (user, group), "faves" (user,
                     photo); "num_users", "num_groups" and "vocabulary"
                     default to the largest id seen + 1 (as `kls upload --social`).
        attributes:  item attributes that ItemSelector filters read: a dict
                     {column: n values} (str, int, float or bool; None = no
                     value), the path of an attributes CSV (`kls upload
                     --attributes`), or CSV text (first line a header).
        """
        attributes_csv = _attributes_csv(attributes)
        if protocol is not None and constraints is not None:
            raise ValueError("give constraints or a protocol, not both")
        if isinstance(features, (str, os.PathLike)):
            path = os.fspath(features)
            features, file_labels, file_keys = _files.read_dataset(path)
            labels = file_labels if labels is None else labels
            keys = file_keys if keys is None else keys
            if name is None:
                # The file's stem, as `kls upload` names it ("iris.csv" → "iris").
                name = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
        x = _matrix(features, "features")
        n, d = x.shape
        if labels is not None:
            labels = np.asarray(labels).reshape(-1)
            if labels.shape[0] != n:
                raise ValueError("labels has %d entries for %d rows" % (labels.shape[0], n))
            labels = labels.astype(np.int64).tolist()
        if keys is not None:
            keys = [str(k) for k in keys]
            if len(keys) != n:
                raise ValueError("keys has %d entries for %d rows" % (len(keys), n))
        if isinstance(constraints, (str, os.PathLike)):
            constraints = _files.read_constraints(constraints)
        pairs = np.zeros((0, 3), dtype=np.int64) if constraints is None else np.asarray(constraints, dtype=np.int64)
        if pairs.size == 0:
            pairs = pairs.reshape(0, 3)
        if pairs.ndim != 2 or pairs.shape[1] != 3:
            raise ValueError("constraints must be (i, j, kind) triples, an m × 3 array; got shape %s" % (pairs.shape,))
        if encoding not in ("auto", "dense", "sparse"):
            raise ValueError("encoding = '%s' is not one of auto, dense, sparse" % encoding)
        sparse = encoding == "sparse" or (encoding == "auto" and 2 * np.count_nonzero(x) < x.size)
        budget = max(int(chunk_bytes), 1)
        community = None if social is None else _Social(social, n)
        if community is not None and pairs.shape[0]:
            raise ValueError("social data sets take no constraints")

        def messages():
            header = datasets_pb2.DatasetHeader(
                name=name or "", num_points=n, dim=d, has_labels=labels is not None,
                has_item_keys=keys is not None, num_constraints=pairs.shape[0])
            if protocol is not None:
                header.protocol.CopyFrom(datasets_pb2.ConstraintProtocol(
                    name=str(protocol), seed=int(protocol_seed), **(protocol_options or {})))
            if community is not None:
                header.social.CopyFrom(community.header)
            yield datasets_pb2.UploadDatasetRequest(header=header)
            row = 0
            while row < n:
                chunk = datasets_pb2.FeatureChunk(first_row=row)
                size = 0
                end = row
                while end < n and (size == 0 or size < budget):
                    if sparse:
                        (cols,) = np.nonzero(x[end])
                        chunk.sparse_rows.add(indices=cols.tolist(), values=x[end, cols].tolist())
                        size += 12 * len(cols) + 8
                    else:
                        size += 8 * d
                    if keys is not None:
                        size += len(keys[end]) + 2
                    end += 1
                if not sparse:
                    chunk.values.extend(x[row:end].ravel().tolist())
                if labels is not None:
                    chunk.labels.extend(labels[row:end])
                if keys is not None:
                    chunk.item_keys.extend(keys[row:end])
                yield datasets_pb2.UploadDatasetRequest(features=chunk)
                row = end
            per_chunk = max(1, budget // 12)
            for first in range(0, pairs.shape[0], per_chunk):
                block = pairs[first:first + per_chunk]
                yield datasets_pb2.UploadDatasetRequest(constraints=datasets_pb2.ConstraintChunk(
                    i=block[:, 0].tolist(), j=block[:, 1].tolist(), kind=block[:, 2].tolist()))
            if community is not None:
                for chunk in community.chunks(budget):
                    yield datasets_pb2.UploadDatasetRequest(social=chunk)
            for first in range(0, len(attributes_csv), budget):
                yield datasets_pb2.UploadDatasetRequest(
                    attributes=datasets_pb2.AttributesChunk(csv=attributes_csv[first:first + budget]))

        timeout = self._bulk_timeout(8.0 * n * d + 12.0 * pairs.shape[0] + len(attributes_csv))
        return self._call(self._datasets.Upload, messages(), timeout=timeout)

    def dataset(self, dataset_id):
        return self._call(self._datasets.Get, datasets_pb2.GetDatasetRequest(
            id=_id(dataset_id, datasets_pb2.DatasetInfo, "dataset")))

    def datasets(self):
        """Every stored data set (DatasetInfo list)."""
        return list(self._call(self._datasets.List, datasets_pb2.ListDatasetsRequest()).datasets)

    def set_attributes(self, dataset, attributes):
        """Datasets.SetAttributes: replaces the item attributes of `dataset`
        (a DatasetInfo, an id, or a name = the newest data set of that name)
        without re-learning; `attributes` as in upload (None or {} removes
        them). Returns the DatasetInfo with the new attributes_version."""
        dataset_id = dataset.id if isinstance(dataset, datasets_pb2.DatasetInfo) else str(dataset)
        csv = _attributes_csv(attributes) if attributes else b""

        def messages():
            yield datasets_pb2.SetAttributesRequest(
                dataset_id=dataset_id, attributes=datasets_pb2.AttributesChunk(csv=csv[:_MIB]))
            for first in range(_MIB, len(csv), _MIB):
                yield datasets_pb2.SetAttributesRequest(attributes=datasets_pb2.AttributesChunk(csv=csv[first:first + _MIB]))

        return self._call(self._datasets.SetAttributes, messages(), timeout=self._bulk_timeout(len(csv)))

    def delete_dataset(self, dataset_id):
        self._call(self._datasets.Delete, datasets_pb2.DeleteDatasetRequest(
            id=_id(dataset_id, datasets_pb2.DatasetInfo, "dataset")))

    # ---- Jobs ---------------------------------------------------------------

    #: submit's method names: the solver oneof of SubmitJobRequest, then the
    #: families whose options message (kls/v1/families/*.proto, marked with
    #: option (kls.v1.family)) travels in family_options, e.g. "itml".
    METHODS = tuple(f.name for f in jobs_pb2.SubmitJobRequest.DESCRIPTOR.oneofs_by_name["solver"].fields
                    if f.message_type.full_name != "google.protobuf.Any") + tuple(sorted(_FAMILY_MESSAGES))

    def submit(self, dataset, method, kernel, *, priority=0, deadline_seconds=0.0, graph=None, scaling=None,
               cross_validation=None, warm_start=None, baseline_guard=None, **options):
        """Jobs.Submit; returns the queued Job.

        dataset: a data-set id or DatasetInfo. method: one of Client.METHODS
        ("kl_admm", "bcd_npkl", "simple_npkl", "qsdp", "embedding", "onk",
        "mkl", "npk_ranking", "social_strength", "itml", "auto"). kernel: the output kernel's name.
        graph:   GraphSpec fields as a dict, e.g. {"k": 7, "weight": "binary"},
                 {"connect": "grow_k"} (qsdp regmvu: connect_error | grow_k | mst).
        scaling: "none", "zscore" or "minmax" (None = none).
        cross_validation: kl_admm / bcd_npkl / simple_npkl: choose C (gamma)
                 by cross-validation (`kls submit --c auto`); a dict of
                 CrossValidation fields, {} for the defaults, e.g.
                 {"folds": 5, "grid": [0.1, 1, 10], "num_threads": 2}.
        warm_start: kl_admm / bcd_npkl / simple_npkl: start from kernel
                 "NAME" or "NAME:VERSION" (`kls submit --warm-start`).
        baseline_guard: kl_admm / bcd_npkl / simple_npkl: False skips the
                 comparison with plain linear and RBF kernels and the k-NN
                 graph's diffusion kernel on held-out pairs
                 (`kls submit --no-baseline-guard`); None = on.
        options: fields of the method's options message (jobs.proto, or
                 kls/v1/families/*.proto for itml: gamma, lower, upper, ...; for auto:
                 candidates=["bcd_npkl/square", "rbf", "diffusion"], max_seconds, folds, clusters,
                 grid, seed — the server picks the kernel), e.g.
                 gamma=10, loss="hinge", problem="regpcp"; unset ones take the
                 core default. `algorithm=` names the options' `method` enum
                 (embedding: cmvu|mve|spe|kpca; mkl: kta|svm|two_layer|...).
        A field that does not belong to the method raises ValueError.
        """
        if method not in self.METHODS:
            raise ValueError("method = '%s' is not one of %s" % (method, ", ".join(self.METHODS)))
        request = jobs_pb2.SubmitJobRequest(
            dataset_id=_id(dataset, datasets_pb2.DatasetInfo, "dataset"), kernel_name=kernel,
            priority=priority, deadline_seconds=deadline_seconds)
        if graph is not None:
            _set_field(request, "graph", graph)
        if scaling is not None:
            _set_field(request, "scaling", scaling)
        if cross_validation is not None:
            request.cross_validation.SetInParent()
            for key, value in cross_validation.items():
                _set_field(request.cross_validation, key, value)
        if warm_start is not None:
            name, _, version = str(warm_start).partition(":")
            request.warm_start.kernel_name = name
            request.warm_start.version = int(version) if version else 0
        if baseline_guard is not None:
            request.baseline_guard = bool(baseline_guard)
        packed = method in _FAMILY_MESSAGES
        if packed:
            solver = _FAMILY_MESSAGES[method]()
        else:
            solver = getattr(request, method)
            solver.SetInParent()
        fields = solver.DESCRIPTOR.fields_by_name
        for key, value in options.items():
            field = "method" if key == "algorithm" and "method" in fields else key
            if field not in fields:
                valid = ["algorithm" if f == "method" else f for f in fields]
                raise ValueError("option '%s' does not belong to method %s (its options: %s)"
                                 % (key, method, ", ".join(valid)))
            _set_field(solver, field, value)
        if packed:
            request.family_options.Pack(solver)
        return self._call(self._jobs.Submit, request)

    def job(self, job):
        """Jobs.Get: the current snapshot of a job (id or Job)."""
        return self._call(self._jobs.Get, jobs_pb2.GetJobRequest(id=_id(job, jobs_pb2.Job, "job")))

    def jobs(self, state=None, dataset=None, page_size=0):
        """Jobs.List, oldest first, every page: state "queued" / "running" /
        ... (None = any), dataset id or DatasetInfo (None = any)."""
        request = jobs_pb2.ListJobsRequest(page_size=page_size)
        if state is not None:
            _set_field(request, "state", state)
        if dataset is not None:
            request.dataset_id = _id(dataset, datasets_pb2.DatasetInfo, "dataset")
        out = []
        while True:
            response = self._call(self._jobs.List, request)
            out.extend(response.jobs)
            if not response.next_page_token:
                return out
            request.page_token = response.next_page_token

    def cancel(self, job):
        """Jobs.Cancel: queued jobs end at once, running ones at the solver's
        next outer iteration. FAILED_PRECONDITION for a finished job."""
        return self._call(self._jobs.Cancel, jobs_pb2.CancelJobRequest(id=_id(job, jobs_pb2.Job, "job")))

    def watch(self, job, timeout=None):
        """Jobs.Watch: yields a Job snapshot per event (state changes and
        progress: job.progress.iteration, .objective, ...) until the job is
        terminal. No deadline unless `timeout` (seconds) is given; closing the
        generator early cancels the stream."""
        stream = None
        with _rpc:
            stream = self._jobs.Watch(jobs_pb2.WatchJobRequest(id=_id(job, jobs_pb2.Job, "job")),
                                      timeout=timeout, metadata=self._metadata)
        try:
            with _rpc:
                for event in stream:
                    yield event.job
        finally:
            stream.cancel()

    def wait(self, job, timeout=None, on_event=None, check=True):
        """Watches `job` to its end and returns the final Job. `on_event(job)`
        is called for every event. With check (the default), a job that ends
        FAILED raises KlsError(ABORTED, "job ... failed: ...") and one that is
        CANCELLED raises KlsError(CANCELLED, ...), as `kls watch` exits."""
        last = None
        for last in self.watch(job, timeout=timeout):
            if on_event is not None:
                on_event(last)
        if last is None or last.state not in _TERMINAL:
            last = self.job(job)  # the stream ended without a terminal event: ask once
        if check and last.state == jobs_pb2.FAILED:
            raise KlsError(grpc.StatusCode.ABORTED, "job %s failed: %s" % (last.id, last.error))
        if check and last.state == jobs_pb2.CANCELLED:
            raise KlsError(grpc.StatusCode.CANCELLED, "job %s was cancelled" % last.id)
        return last

    # ---- Kernels ------------------------------------------------------------

    def kernel(self, kernel):
        """Kernels.Get: the KernelInfo of a kernel reference."""
        return self._call(self._kernels.Get, kernels_pb2.GetKernelRequest(kernel=parse_kernel_ref(kernel)))

    def kernels(self, name=None):
        """Kernels.List: every version of every kernel (or of `name`)."""
        return list(self._call(self._kernels.List, kernels_pb2.ListKernelsRequest(name=name or "")).kernels)

    def delete_kernel(self, name, version=0):
        """Kernels.Delete: one version, or all (version 0)."""
        self._call(self._kernels.Delete, kernels_pb2.DeleteKernelRequest(name=name, version=version))

    def set_alias(self, name, alias, version):
        """Kernels.SetAlias: NAME@ALIAS then resolves to `version`."""
        return self._call(self._kernels.SetAlias, kernels_pb2.SetAliasRequest(name=name, alias=alias, version=version))

    def export(self, kernel, with_info=False):
        """Kernels.Export: the n × rank embedding V (K = V Vᵀ) as a float64
        array; (V, KernelInfo) with `with_info`."""
        ref = parse_kernel_ref(kernel)
        info = self.kernel(ref)  # the size sets the deadline
        timeout = self._bulk_timeout(8.0 * info.num_points * info.rank)
        v = None
        filled = 0
        with _rpc:
            stream = self._kernels.Export(kernels_pb2.ExportKernelRequest(kernel=ref), timeout=timeout,
                                          metadata=self._metadata)
            for chunk in stream:
                if v is None:
                    if not chunk.HasField("info"):
                        stream.cancel()
                        raise KlsError(grpc.StatusCode.DATA_LOSS, "export: the first chunk carries no kernel info")
                    info = chunk.info
                    v = np.empty(info.num_points * info.rank, dtype=np.float64)
                offset = chunk.first_row * info.rank
                count = len(chunk.values)
                if offset != filled or offset + count > v.size:
                    stream.cancel()
                    raise KlsError(grpc.StatusCode.DATA_LOSS,
                                   "export: chunk at row %d is out of sequence" % chunk.first_row)
                v[offset:offset + count] = chunk.values
                filled += count
        if v is None or filled != v.size:
            raise KlsError(grpc.StatusCode.DATA_LOSS, "export ended after %d of %d values"
                           % (filled, 0 if v is None else v.size))
        v = v.reshape(info.num_points, info.rank)
        return (v, info) if with_info else v

    def import_kernel(self, name, embedding, keys=None, chunk_bytes=_MIB):
        """Kernels.Import: stores V (n × dim; K = V Vᵀ) as the next version of
        kernel `name`, with optional item keys (one unique non-empty key per
        row). Returns its KernelInfo; nothing is stored on any error."""
        v = _matrix(embedding, "embedding")
        n, dim = v.shape
        if keys is not None:
            keys = [str(k) for k in keys]
            if len(keys) != n:
                raise ValueError("keys has %d keys for %d rows; give one per row or none" % (len(keys), n))
        per_chunk = max(1, int(chunk_bytes) // max(1, 8 * dim))

        def messages():
            yield kernels_pb2.ImportKernelChunk(header=kernels_pb2.ImportKernelHeader(
                name=name, num_points=n, dim=dim, has_item_keys=keys is not None))
            for first in range(0, n, per_chunk):
                rows = kernels_pb2.ImportKernelRows(first_row=first,
                                                    values=v[first:first + per_chunk].ravel().tolist())
                if keys is not None:
                    rows.item_keys.extend(keys[first:first + per_chunk])
                yield kernels_pb2.ImportKernelChunk(rows=rows)

        return self._call(self._kernels.Import, messages(), timeout=self._bulk_timeout(8.0 * n * dim))

    # ---- Queries ------------------------------------------------------------

    def similarity(self, kernel, pairs):
        """K_ij for each (i, j) in `pairs` (m × 2): a float64 array of m values."""
        i, j = _pairs(pairs)
        response = self._call(self._queries.Similarity,
                              queries_pb2.SimilarityRequest(kernel=parse_kernel_ref(kernel), i=i, j=j))
        return np.asarray(response.values, dtype=np.float64)

    @staticmethod
    def _items(items):
        return [ScoredItem(item.index, item.item_key or None, item.score) for item in items]

    def topk(self, kernel, *, item=None, key=None, vector=None, features=None, items=None, keys=None,
             vectors=None, k=10, exclude_self=False, neighbors=None, sigma=None, filter=None, exclude=None,
             allow=None, metric="inner_product", min_score=None, offset=0):
        """The k items most similar to a query: one `item` (an index), `key`
        (an item key), `vector` (a point of the embedding space, length =
        rank) or `features` (raw features of an item the kernel was not
        trained on; `neighbors` and `sigma` tune its harmonic extension) —
        returns [ScoredItem(index, key, score)] by descending score — or a
        batch of up to 1,000: `items`, `keys` or `vectors` (rows) — returns
        one such list per query, in order, from one pass over the items.

        filter:    an expression over the data set's attributes, `index` and
                   `key`, e.g. 'category in ["shoes"] and price < 100 and not
                   discontinued'; exact: the k best items that pass.
        exclude:   items never returned (indices, or keys as strings), e.g.
                   already seen; `allow`: only these items.
        metric:    "inner_product" (K_ij) or "cosine" (K_ij / sqrt(K_ii K_jj)).
        min_score: drop results scoring below it; offset: skip the best
                   `offset` first (paging, in the order of one large query).
        """
        given = [name for name, value in (("item", item), ("key", key), ("vector", vector), ("features", features),
                                          ("items", items), ("keys", keys), ("vectors", vectors))
                 if value is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of item, key, vector, features, items, keys or vectors (got %s)"
                             % (", ".join(given) or "none"))
        metrics = {"inner_product": queries_pb2.INNER_PRODUCT, "cosine": queries_pb2.COSINE}
        if metric not in metrics:
            raise ValueError("metric = %r is not one of inner_product, cosine" % (metric,))
        request = queries_pb2.TopKRequest(kernel=parse_kernel_ref(kernel), k=k, exclude_self=exclude_self,
                                          metric=metrics[metric], offset=offset)
        if min_score is not None:
            request.min_score = float(min_score)
        _fill_selector(request.select, filter, exclude, allow)
        if item is not None:
            request.item = int(item)
        elif key is not None:
            request.item_key = key
        elif vector is not None:
            request.vector.values.extend(np.asarray(vector, dtype=np.float64).ravel().tolist())
        elif features is not None:
            request.features.values.extend(np.asarray(features, dtype=np.float64).ravel().tolist())
            if neighbors is not None:
                request.features.neighbors = neighbors
            if sigma is not None:
                request.features.sigma = sigma
        elif items is not None:
            for i in np.asarray(items, dtype=np.int64).ravel().tolist():
                request.queries.add(item=i)
        elif keys is not None:
            for name in keys:
                request.queries.add(item_key=str(name))
        else:
            for row in _matrix(vectors, "vectors"):
                request.queries.add().vector.values.extend(row.tolist())
        response = self._call(self._queries.TopK, request)
        if request.queries:
            return [self._items(result.items) for result in response.results]
        return self._items(response.items)

    def rerank(self, kernel, candidates, prior=None, damping=None, k=0, filter=None, exclude=None, allow=None):
        """Re-ranks candidates (item indices, or item keys as strings) by
        VisualRank on the kernel restricted to them, with an optional prior
        (one score ≥ 0 per candidate, e.g. the text search's); `damping`
        λ_d ∈ [0, 1) (default 0.85), k results (0 = all). Returns RankedItems
        (a list of ScoredItem, best first, with `.iterations`)."""
        candidates = list(candidates)
        request = queries_pb2.ReRankRequest(kernel=parse_kernel_ref(kernel), k=k)
        if candidates and all(isinstance(c, str) for c in candidates):
            request.candidate_keys.extend(candidates)
        else:
            request.candidates.extend(int(c) for c in candidates)
        if prior is not None:
            request.prior.extend(np.asarray(prior, dtype=np.float64).ravel().tolist())
        if damping is not None:
            request.damping = damping
        _fill_selector(request.select, filter, exclude, allow)
        response = self._call(self._queries.ReRank, request)
        out = RankedItems(self._items(response.items))
        out.iterations = response.iterations
        return out

    def embed(self, kernel, rows=None, features=None, neighbors=None, sigma=None):
        """Rows of V (`rows`: indices), or the extension of V to new points
        (`features`: raw feature rows): an m × rank float64 array."""
        request = queries_pb2.EmbedRequest(kernel=parse_kernel_ref(kernel))
        if (rows is None) == (features is None):
            raise ValueError("give exactly one of rows or features")
        if rows is not None:
            request.rows.extend(np.asarray(rows, dtype=np.int64).ravel().tolist())
        else:
            x = _matrix(features, "features")
            request.dim = x.shape[1]
            request.features.extend(x.ravel().tolist())
            if neighbors is not None:
                request.neighbors = neighbors
            if sigma is not None:
                request.sigma = sigma
        response = self._call(self._queries.Embed, request)
        return np.asarray(response.values, dtype=np.float64).reshape(-1, max(response.rank, 1))

    def strength(self, kernel, pairs):
        """Social strength f(u, v) of a social_strength kernel for each (u, v) pair."""
        u, v = _pairs(pairs)
        response = self._call(self._queries.SocialStrength,
                              queries_pb2.SocialStrengthRequest(kernel=parse_kernel_ref(kernel), u=u, v=v))
        return np.asarray(response.values, dtype=np.float64)

    def recommend(self, kernel, user, k=10, groups=False, filter=None, exclude=None, allow=None):
        """Friends (or, with groups, groups) user has not yet linked, best
        first: [ScoredItem(index, key, score)]; filter / exclude / allow
        restrict the answers as in topk (groups: by group id, `index` only)."""
        request = queries_pb2.RecommendRequest(kernel=parse_kernel_ref(kernel), user=user, k=k)
        _fill_selector(request.select, filter, exclude, allow)
        method = self._queries.RecommendGroups if groups else self._queries.RecommendFriends
        return self._items(self._call(method, request).items)

    def classify(self, kernel, features):
        """Classes of new points under an onk or mkl model: (labels int32
        array, decision values float64 array), one per feature row."""
        x = _matrix(features, "features")
        request = queries_pb2.ClassifyRequest(kernel=parse_kernel_ref(kernel), dim=x.shape[1],
                                              features=x.ravel().tolist())
        response = self._call(self._queries.Classify, request)
        return (np.asarray(response.labels, dtype=np.int32),
                np.asarray(response.decision_values, dtype=np.float64))

    def classify_users(self, kernel, labelled, users=None, mass_normalization=False):
        """Harmonic classification of a social_strength model's users:
        labelled = {user: class} (or (user, class) pairs); returns (users,
        labels, scores) arrays for `users` (None = every user)."""
        pairs = list(labelled.items()) if isinstance(labelled, dict) else [tuple(p) for p in labelled]
        request = queries_pb2.ClassifyUsersRequest(
            kernel=parse_kernel_ref(kernel), labelled_users=[int(u) for u, _ in pairs],
            labels=[int(c) for _, c in pairs], users=[] if users is None else [int(u) for u in users],
            class_mass_normalization=mass_normalization)
        response = self._call(self._queries.ClassifyUsers, request)
        return (np.asarray(response.users, dtype=np.int32), np.asarray(response.labels, dtype=np.int32),
                np.asarray(response.scores, dtype=np.float64))
