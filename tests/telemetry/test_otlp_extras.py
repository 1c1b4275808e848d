"""The [otlp] extra speaks HTTP/protobuf; gRPC is the [otlp-grpc] extra, named when missing."""

from __future__ import annotations

import sys

import pytest

from toolledger.errors import InvalidArgumentError
from toolledger.telemetry import configure


@pytest.mark.usefixtures("otel_globals")
def test_make_exporter_grpc_without_the_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A missing gRPC exporter is INVALID_ARGUMENT naming the pip command."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    with pytest.raises(InvalidArgumentError) as info:
        configure(endpoint="http://127.0.0.1:4317", protocol="grpc", metrics=False, logs=False)
    assert info.value.code == "INVALID_ARGUMENT"
    assert "pip install 'toolledger[otlp-grpc]'" in info.value.message
    assert info.value.details["extra"] == "otlp-grpc"


@pytest.mark.usefixtures("otel_globals")
def test_make_exporter_http_needs_no_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP/protobuf (the [otlp] extra) builds an exporter with the gRPC package absent."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc", None)
    handle = configure(
        endpoint="http://127.0.0.1:4318", protocol="http/protobuf", metrics=False, logs=False
    )
    try:
        assert handle.protocol == "http/protobuf"
        assert handle.endpoint is not None
    finally:
        handle.shutdown()
