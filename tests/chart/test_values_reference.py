"""docs/reference/values.md is generated from the chart's schema and values.yaml
(hack/values-table) and current, so the documented values are the ones helm accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.chart.helm import CHART, ROOT
from tests.chart.test_chart_files import values_table

PAGE = ROOT / "docs" / "reference" / "values.md"


def schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


def test_values_reference_is_current() -> None:
    generated = values_table.page((CHART / "values.yaml").read_text(), schema())
    assert PAGE.read_text() == generated, \
        "docs/reference/values.md is stale: run hack/values-table --write docs/reference/values.md"


def test_every_value_has_a_row_with_its_type_and_default() -> None:
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| `")]
    assert len(rows) == len(values_table.rows((CHART / "values.yaml").read_text()))
    assert "| `client.qps` | number; > 0 | `200` |" in PAGE.read_text()
    assert "| `webhook.failurePolicy` | string; one of `Ignore`, `Fail` | `Ignore` |" in PAGE.read_text()


SMALL = {"properties": {
    "a": {"type": "integer", "minimum": 1, "maximum": 9},
    "b": {"type": "object", "properties": {"c": {"type": "string", "description": "from the schema"}}},
    "r": {"type": "object", "description": "Container resources (a Kubernetes type, passed through)"},
}}


def test_schema_types_and_descriptions_win_over_comments() -> None:
    text = "# -- a number\na: 2\nb:\n  # -- from the comment\n  c: x\n# -- resources, sized\nr: {}\n"
    table = values_table.table(text, SMALL)
    assert "| `a` | integer; 1 to 9 | `2` | a number |" in table
    assert "| `b.c` | string | `x` | from the schema |" in table
    assert "| `r` | object (Container resources, a Kubernetes type) | `{}` | resources, sized |" in table


@pytest.mark.parametrize(("text", "error"), [
    ("# -- a\na: 2\nb:\n  # -- c\n  c: x\n# -- r\nr: {}\n# -- extra\nz: 1\n", "values.yaml sets keys the schema does not have: z"),
    ("# -- a\na: 2\n# -- r\nr: {}\n", "the schema has keys values.yaml does not set: b.c"),
])
def test_schema_and_values_must_name_the_same_keys(text: str, error: str) -> None:
    with pytest.raises(values_table.ValuesError, match=error):
        values_table.table(text, SMALL)


def test_pipes_in_code_survive_a_table_cell() -> None:
    assert values_table.code("a|b") == "<code>a&#124;b</code>"
    assert values_table.code("ab") == "`ab`"
