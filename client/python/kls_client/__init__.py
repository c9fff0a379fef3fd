"""kls_client: a Python client for KLS, the kernel learning service.

    import kls_client
    kls = kls_client.Client("127.0.0.1:50051", token=None)
    hits = kls.topk("products@prod", key="sku-123", k=10)   # [ScoredItem(index, key, score)]

The gRPC stubs (the `kls.v1` package next to this one) are generated from
proto/kls/v1 at build time; after `make build`, put build/python on
PYTHONPATH. Every failed call raises KlsError (.code is a grpc.StatusCode,
.message the server's text).
"""

from kls.v1 import datasets_pb2, jobs_pb2, kernels_pb2, queries_pb2, service_pb2

from ._client import Client, KlsError, RankedItems, ScoredItem, parse_kernel_ref, state_name
from ._files import read_constraints, read_csv, read_libsvm

__all__ = [
    "Client", "KlsError", "RankedItems", "ScoredItem", "parse_kernel_ref", "state_name",
    "read_csv", "read_libsvm", "read_constraints",
    "datasets_pb2", "jobs_pb2", "kernels_pb2", "queries_pb2", "service_pb2",
]
