"""The [otlp] extra speaks HTTP/protobuf; gRPC is the [otlp-grpc] extra, named when missing."""

from __future__ import annotations

import sys

import pytest

from toolledger.errors import InvalidArgumentError
from toolledger.telemetry._configure import make_exporter


def test_make_exporter_grpc_without_the_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A missing gRPC exporter is INVALID_ARGUMENT with the pip command, not ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    with pytest.raises(InvalidArgumentError) as info:
        make_exporter("http://127.0.0.1:4317", "grpc")
    assert info.value.code == "INVALID_ARGUMENT"
    assert "pip install 'toolledger[otlp-grpc]'" in info.value.message
    assert info.value.details["extra"] == "otlp-grpc"


def test_make_exporter_http_needs_no_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP/protobuf (the [otlp] extra) builds an exporter with the gRPC package absent."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    exporter = make_exporter("http://127.0.0.1:4318/v1/traces", "http/protobuf")
    try:
        assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.http")
    finally:
        exporter.shutdown()
