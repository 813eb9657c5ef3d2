"""The chart's files on their own (no helm): metadata, CRDs, schema, values documentation."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import tomllib
from typing import Any

import pytest
import yaml

from tests.chart.helm import CHART, ROOT

PASSED_THROUGH = "(a Kubernetes type, passed through)"


def load_script(name: str) -> Any:
    path = ROOT / "hack" / name
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


values_table = load_script("values-table")


def chart() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "Chart.yaml").read_text()))


def schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


def test_chart_metadata_matches_the_package() -> None:
    meta = chart()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "draco"
    assert meta["appVersion"] == version
    assert meta["kubeVersion"] == ">=1.34.0-0"


def test_chart_crds_are_the_top_level_crds_byte_for_byte() -> None:
    top = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    packaged = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert top, "no CRDs in crds/"
    assert packaged == top


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]):
            out.append((path or "<root>", node))
        for key, child in node.get("properties", {}).items():
            out += walk(child, f"{path}.{key}" if path else key)
        if isinstance(node.get("items"), dict):
            out += walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            out += walk(node["additionalProperties"], f"{path}.*")
    return out


def test_schema_rejects_unknown_keys_in_every_object() -> None:
    """Every object either lists its keys (additionalProperties false), is a typed map
    (labels, annotations), or is a Kubernetes type passed through as such, said so."""
    loose = []
    for path, node in walk(schema()):
        extra = node.get("additionalProperties", True)
        if extra is False:
            assert node.get("properties"), f"{path}: closed object without properties"
            continue
        if isinstance(extra, dict) and extra.get("type") == "string":
            continue
        if PASSED_THROUGH in str(node.get("description", "")):
            continue
        loose.append(path)
    assert loose == []


def leaf_paths(node: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for key, child in node["properties"].items():
        path = f"{prefix}{key}"
        if child.get("additionalProperties") is False and "properties" in child and child.get("type") == "object" \
                and not path.endswith("issuerRef"):
            out |= leaf_paths(child, path + ".")
        else:
            out.add(path)
    return out


def test_every_value_is_documented_and_in_the_schema() -> None:
    rows = values_table.rows((CHART / "values.yaml").read_text())
    documented = {key for key, _, description in rows if description}
    assert documented == {key for key, _, _ in rows}
    assert documented == leaf_paths(schema())


@pytest.mark.parametrize(("text", "error"), [
    ("replicaCount: 2\n", "replicaCount has no `# --` comment"),
    ("# a header, not documentation\nreplicaCount: 2\n", "replicaCount has no `# --` comment"),
    ("image:\n  # -- documented\n  tag: x\n  pullPolicy: Always\n", "image.pullPolicy has no"),
    ("# -- a list\nitems:\n- a\n", "not a `key: value` line"),
])
def test_values_table_refuses_undocumented_or_block_style_values(text: str, error: str) -> None:
    with pytest.raises(values_table.ValuesError, match=error.replace("`", ".").replace("(", ".")):
        values_table.rows(text)


def test_values_table_rows_follow_nesting_and_comments() -> None:
    text = ("# -- top\n# continued\na: 1\nb:\n  c:\n    # -- deep | piped\n    d: {x: 1}\n"
            "  # -- back up\n  e: \"\"\n")
    assert values_table.rows(text) == [
        ("a", "1", "top continued"), ("b.c.d", "{x: 1}", "deep | piped"), ("b.e", '""', "back up")]
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "object", "properties": {
        "c": {"type": "object", "properties": {"d": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "e": {"type": "string"}}}}}
    assert "| `b.c.d` | map of strings | `{x: 1}` | deep \\| piped |" in values_table.table(text, schema)

