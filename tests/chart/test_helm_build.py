"""The pinned helm that hack/cluster builds: its version and the Kubernetes version it
assumes offline come from the link flags (helm's Makefile sets the same ones)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.chart.helm import ROOT, run_helm

sys.path.insert(0, str(ROOT / "hack"))
import cluster_helm  # noqa: E402


@pytest.mark.parametrize(("require", "expected"), [
    ("\tk8s.io/client-go v0.37.0\n", ("1", "37", "v1.37.0")),
    ("\tk8s.io/client-go v0.34.4 // indirect\n", ("1", "34", "v1.34.4")),
])
def test_kubernetes_version_follows_helms_client_go(tmp_path: Path, require: str,
                                                    expected: tuple[str, str, str]) -> None:
    (tmp_path / "go.mod").write_text(f"module helm.sh/helm/v3\n\nrequire (\n{require})\n")
    assert cluster_helm.kubernetes_of(tmp_path) == expected


def test_ldflags_stamp_helm_and_chartutil() -> None:
    flags = " ".join(cluster_helm.helm_ldflags("1", "37", "v1.37.0"))
    for stamp in ("helm.sh/helm/v3/internal/version.version=v3.22.0",
                  "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1",
                  "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37",
                  "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37",
                  "k8s.io/client-go/pkg/version.gitVersion=v1.37.0"):
        assert f"-X {stamp}" in flags


def test_built_helm_assumes_its_client_gos_kubernetes_offline(tmp_path: Path) -> None:
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.0.1\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: probe}\n"
        "data: {kube: {{ .Capabilities.KubeVersion.Version | quote }}}\n")
    out = run_helm("template", "probe", str(chart)).stdout
    assert 'kube: "v1.37.0"' in out
    assert run_helm("version", "--template", "{{ .Version }}").stdout == "v3.22.0"


def test_paths_lists_helm() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "hack" / "cluster"), "paths", "--k8s", "1.34"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("helm\t")]
    name, path, state = line.split("\t")
    assert path.endswith("helm-v3.22.0") and state == "built"
