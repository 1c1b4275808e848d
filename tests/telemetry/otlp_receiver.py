"""A real OTLP trace receiver for tests and benchmarks: HTTP/protobuf and gRPC on 127.0.0.1.

Built from ``opentelemetry-proto`` (the request/response messages and the generated gRPC
service) and ``grpcio``, which the OTLP exporter already brings. Free ports are chosen by
the OS (port 0). Decoded spans are plain dicts.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["Receiver", "decode_value", "grpc_receiver", "http_receiver"]

_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def decode_value(value: AnyValue) -> Any:
    """Return the Python value of an OTLP ``AnyValue``."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(decode_value(v) for v in value.array_value.values)
    if which is None:
        return None
    return getattr(value, which)


class Receiver:
    """Collected export requests, decoded into span dicts."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.endpoint = ""
        self._cond = threading.Condition()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()

    def spans(self) -> list[dict[str, Any]]:
        """Every span received so far, in arrival order."""
        out: list[dict[str, Any]] = []
        with self._cond:
            requests = list(self.requests)
        for req in requests:
            for rs in req.resource_spans:
                resource = {kv.key: decode_value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent_span_id": s.parent_span_id.hex() or None,
                                "kind": _KINDS.get(s.kind, str(s.kind)),
                                "attributes": {
                                    kv.key: decode_value(kv.value) for kv in s.attributes
                                },
                                "links": [(lk.trace_id.hex(), lk.span_id.hex()) for lk in s.links],
                                "events": [
                                    {
                                        "name": e.name,
                                        "time": e.time_unix_nano,
                                        "attributes": {
                                            kv.key: decode_value(kv.value) for kv in e.attributes
                                        },
                                    }
                                    for e in s.events
                                ],
                                "status_code": s.status.code,
                                "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano,
                                "scope": ss.scope.name,
                                "scope_version": ss.scope.version,
                                "schema_url": ss.schema_url,
                                "resource": resource,
                            }
                        )
        return out

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait (bounded) until ``count`` spans arrived; return all spans."""
        with self._cond:
            self._cond.wait_for(lambda: self._count() >= count, timeout)
        return self.spans()

    def _count(self) -> int:
        return sum(
            len(ss.spans) for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans
        )


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
        self.receiver.add(request)
        payload = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


@contextmanager
def http_receiver() -> Iterator[Receiver]:
    """Run an OTLP/HTTP receiver; ``receiver.endpoint`` is its base URL."""
    receiver = Receiver()
    handler = type("Handler", (_Handler,), {"receiver": receiver})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        self.receiver.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def grpc_receiver() -> Iterator[Receiver]:
    """Run an OTLP/gRPC receiver; ``receiver.endpoint`` is ``http://127.0.0.1:PORT``."""
    receiver = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Servicer(receiver), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        server.stop(grace=None)
