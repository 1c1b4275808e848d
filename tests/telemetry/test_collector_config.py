"""collector-config/: valid YAML, consistent pipelines, known components, loopback only."""

from __future__ import annotations

import copy
import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolledger.telemetry import attributes as a

DIR = Path(__file__).resolve().parents[2] / "collector-config"
BASE = DIR / "otelcol.yaml"
OVERLAYS = sorted((DIR / "overlays").glob("*.yaml"))

# Component types of the Collector core and contrib distributions (otelcol-contrib).
KNOWN = {
    "receivers": {
        "otlp",
        "jaeger",
        "zipkin",
        "prometheus",
        "filelog",
        "hostmetrics",
        "kafka",
    },
    "processors": {
        "batch",
        "memory_limiter",
        "transform",
        "redaction",
        "attributes",
        "resource",
        "filter",
        "tail_sampling",
        "probabilistic_sampler",
        "span",
        "k8sattributes",
        "resourcedetection",
        "groupbytrace",
    },
    "exporters": {
        "debug",
        "file",
        "otlp",
        "otlphttp",
        "otlp_grpc",
        "otlp_http",
        "nop",
        "prometheus",
        "kafka",
        "zipkin",
        "loadbalancing",
    },
    "extensions": {"health_check", "pprof", "zpages", "basicauth", "bearertokenauth"},
    "connectors": {"forward", "spanmetrics", "servicegraph", "count", "routing"},
}


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), path
    return doc


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The Collector's merge of several --config files: maps merge, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def configs() -> list[tuple[str, dict[str, Any]]]:
    base = load(BASE)
    return [("otelcol.yaml", base)] + [
        (f"otelcol.yaml+{p.name}", merge(base, load(p))) for p in OVERLAYS
    ]


def ctype(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def test_collector_config_files_exist_with_overlays() -> None:
    assert BASE.is_file()
    assert {p.stem for p in OVERLAYS} == {"jaeger-tempo", "phoenix", "langfuse", "mlflow"}
    readme = (DIR / "README.md").read_text(encoding="utf-8")
    for p in OVERLAYS:
        assert (
            f"--config collector-config/otelcol.yaml --config collector-config/overlays/{p.name}"
            in (readme)
        )


@pytest.mark.parametrize(("name", "config"), configs(), ids=[n for n, _ in configs()])
def test_collector_pipelines_name_only_defined_known_components(name, config) -> None:
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics", "logs"}
    for section in ("receivers", "processors", "exporters", "extensions", "connectors"):
        for component_id in config.get(section) or {}:
            assert ctype(component_id) in KNOWN[section], (name, section, component_id)
    for pipeline in pipelines.values():
        for section in ("receivers", "processors", "exporters"):
            for component_id in pipeline.get(section, []):
                assert component_id in (config.get(section) or {}), (name, component_id)
    for component_id in config["service"].get("extensions", []):
        assert component_id in (config.get("extensions") or {})


@pytest.mark.parametrize(("name", "config"), configs(), ids=[n for n, _ in configs()])
def test_collector_receivers_bind_to_loopback(name, config) -> None:
    endpoints = []
    for receiver in config["receivers"].values():
        for proto in (receiver.get("protocols") or {}).values():
            endpoints.append(proto["endpoint"])
    assert sorted(endpoints) == ["127.0.0.1:4317", "127.0.0.1:4318"]
    for endpoint in endpoints:
        host = endpoint.rsplit(":", 1)[0]
        assert ipaddress.ip_address(host).is_loopback


@pytest.mark.parametrize(("name", "config"), configs(), ids=[n for n, _ in configs()])
def test_collector_batches_in_exporters_with_memory_limiter(name, config) -> None:
    pipelines = config["service"]["pipelines"]
    assert all(p["processors"][0] == "memory_limiter" for p in pipelines.values())
    traces = pipelines["traces"]
    assert not any(ctype(p) == "batch" for p in config["processors"])
    for exporter_id in traces["exporters"]:
        if ctype(exporter_id).startswith("otlp"):
            queue = config["exporters"][exporter_id]["sending_queue"]
            assert queue["enabled"] is True
            assert queue["batch"]["flush_timeout"]


def test_collector_transform_deletes_content_and_intent_and_redaction_runs() -> None:
    config = load(BASE)
    processors = config["service"]["pipelines"]["traces"]["processors"]
    assert "transform/privacy" in processors
    assert processors.index("transform/privacy") < processors.index("redaction")
    statements = " ".join(
        s
        for group in config["processors"]["transform/privacy"]["trace_statements"]
        for s in group["statements"]
    )
    deleted = set(re.findall(r'delete_key\(attributes, "([^"]+)"\)', statements))
    projected = {a.OI_INPUT_VALUE, a.OI_OUTPUT_VALUE, a.OI_METADATA}
    assert deleted == set(a.CONTENT_ATTRIBUTES) | set(a.INTENT_ATTRIBUTES) | projected
    assert "delete_matching_keys(attributes" in statements  # the flattened llm messages
    assert processors.index("transform/privacy") < processors.index("redaction")
    logs = config["service"]["pipelines"]["logs"]["processors"]
    assert "transform/privacy" in logs
    redaction = config["processors"]["redaction"]
    assert redaction["allow_all_keys"] is True
    for pattern in redaction["blocked_values"]:
        re.compile(pattern.replace("(?i)", ""))  # RE2 syntax used here is also valid in Python
    assert re.search(redaction["blocked_values"][0], "key sk-ant-api03-abcdefghijklmnopqrstuv")


def test_collector_has_debug_file_and_backend_exporters() -> None:
    exporters = load(BASE)["service"]["pipelines"]["traces"]["exporters"]
    assert {ctype(e) for e in exporters} == {"debug", "file", "otlp_grpc"}
