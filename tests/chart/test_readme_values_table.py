"""The README's values table is generated from values.yaml (hack/values-table) and current."""

from __future__ import annotations

from tests.chart.helm import CHART, ROOT
from tests.chart.test_chart_files import values_table


def test_readme_values_table_is_current() -> None:
    readme = (ROOT / "README.md").read_text()
    start, end = values_table.section(readme)
    assert readme[start:end] == "\n" + values_table.table((CHART / "values.yaml").read_text()), \
        "README.md's values table is stale: run hack/values-table --write README.md"
