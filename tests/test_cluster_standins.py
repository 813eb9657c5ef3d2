"""hack/cluster's build of pre-releases: which toolchain, which modules stand in for the
ones the Go module proxy refuses, and how a stand-in is assembled (no network, no Go)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[1] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import cluster_build  # noqa: E402  (a script's module, stdlib only)
import cluster_standins  # noqa: E402
from cluster_standins import ASSEMBLED, Assembled  # noqa: E402

APIEXT = ASSEMBLED["k8s.io/apiextensions-api"]


@pytest.mark.parametrize(("error", "is_refusal"), [
    ("k8s.io/ktesting@v0.38.0-beta.0: reading https://proxy.golang.org/k8s.io/ktesting/@v/"
     "v0.38.0-beta.0.info: 403 Forbidden\n\tserver response: This module version is not available.",
     True),
    ("reading https://proxy.golang.org/x/@v/v9.9.9.info: 404 Not Found", True),
    ("dial tcp: lookup proxy.golang.org: no such host", False),
    ("k8s.io/kubernetes@v1.38.0-beta.0 requires go >= 1.27.0 (running go 1.26.8; GOTOOLCHAIN=local)",
     False),
])
def test_only_the_proxys_no_counts_as_a_refusal(error: str, is_refusal: bool) -> None:
    assert cluster_standins.refused(error) is is_refusal


def test_requirements_are_read_from_blocks_and_single_lines() -> None:
    gomod = ("module k8s.io/kubernetes\n\ngo 1.27.0\n\ngodebug default=go1.27\n\n"
             "require github.com/a/b v1.0.0\n"
             "require (\n\tsigs.k8s.io/structured-merge-diff/v7 v7.0.1\n"
             "\tgithub.com/c/d v0.2.0 // indirect\n)\n\n"
             "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n")
    assert cluster_standins.requirements(gomod) == {
        "github.com/a/b": "v1.0.0", "sigs.k8s.io/structured-merge-diff/v7": "v7.0.1",
        "github.com/c/d": "v0.2.0"}
    assert cluster_standins.go_directive(gomod) == "1.27.0"


@pytest.mark.parametrize(("before", "after"), [
    ('"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"',
     '"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1"'),
    ('"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"',
     '"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1beta1"'),
    ('"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1/fake"',
     '"k8s.io/apiextensions-api/pkg/client/clientset/clientset/typed/apiextensions/v1/fake"'),
    # the internal types and the server stay in apiextensions-apiserver
    ('"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"',
     '"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"'),
    ('"k8s.io/apiextensions-apiserver/pkg/apiserver"', '"k8s.io/apiextensions-apiserver/pkg/apiserver"'),
    ('"sigs.k8s.io/structured-merge-diff/v6/typed"', '"sigs.k8s.io/structured-merge-diff/v7/typed"'),
    # OpenAPI model names are no import paths: 1.38 keeps them
    ('"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"',
     '"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"'),
])
def test_imports_of_moved_packages_move_to_the_new_module(before: str, after: str) -> None:
    assert cluster_standins.rewrite_imports(f"import (\n\tv1 {before}\n)\n", APIEXT) == \
        f"import (\n\tv1 {after}\n)\n"


@pytest.mark.parametrize(("before", "after"), [
    ('"k8s.io/kubernetes/test/utils/ktesting"', '"k8s.io/ktesting"'),
    ('"k8s.io/kubernetes/test/utils/ktesting/initoption"', '"k8s.io/ktesting/initoption"'),
    ('"k8s.io/kubernetes/test/utils/ktestingx"', '"k8s.io/kubernetes/test/utils/ktestingx"'),
    ('"k8s.io/klog/v2/ktesting"', '"k8s.io/klog/v2/ktesting"'),
])
def test_a_folder_that_becomes_a_module_root_moves_with_its_subpackages(before: str, after: str) -> None:
    assert cluster_standins.rewrite_imports(before, ASSEMBLED["k8s.io/ktesting"]) == after


@pytest.mark.parametrize(("name", "carried"), [
    ("types.go", True), ("zz_generated.defaults.go", True), ("generated.pb.go", True),
    ("conversion.go", False), ("zz_generated.conversion.go", False), ("types_test.go", False),
    ("generated.proto", False),
])
def test_conversions_and_tests_stay_behind(name: str, carried: bool) -> None:
    assert cluster_standins.carried(name, APIEXT) is carried


SMALL = Assembled(module="example.com/new", source="example.com/old", source_version="v0.1.0",
                  packages=("pkg/api",), left_behind=("conversion.go",))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_stand_in_holds_the_moved_packages_with_their_imports_moved(tmp_path: Path) -> None:
    source = tmp_path / "old"
    write(source / "pkg/api/types.go", 'package api\n\nimport _ "example.com/old/pkg/api/sub"\n')
    write(source / "pkg/api/conversion.go", 'package api\n\nimport _ "example.com/old/internal"\n')
    write(source / "pkg/api/sub/sub.go", "package sub\n")
    write(source / "pkg/server/server.go", "package server\n")
    target = tmp_path / "standin"
    written = cluster_standins.assemble(SMALL, source, target, "v0.38.0-beta.0", "1.27.0")
    assert written == ["pkg/api", "pkg/api/sub"]
    assert (target / "pkg/api/types.go").read_text() == \
        'package api\n\nimport _ "example.com/new/pkg/api/sub"\n'
    assert not (target / "pkg/api/conversion.go").exists()
    assert not (target / "pkg/server").exists()
    gomod = (target / "go.mod").read_text()
    assert gomod.startswith("module example.com/new\n\ngo 1.27.0\n")
    assert "\tk8s.io/apimachinery v0.38.0-beta.0\n" in gomod


def test_a_stand_in_that_still_needs_its_source_module_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "old"
    write(source / "pkg/api/types.go", 'package api\n\nimport _ "example.com/old/internal"\n')
    with pytest.raises(ValueError, match="still imports"):
        cluster_standins.assemble(SMALL, source, tmp_path / "standin", "v0.1.0", "1.27.0")


GOMOD_138 = ("module k8s.io/kubernetes\n\ngo 1.27.0\n\nrequire (\n"
             "\tsigs.k8s.io/structured-merge-diff/v7 v7.0.1\n)\n")


def fake_proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, served: set[str],
               broken: frozenset[str] = frozenset()) -> list[str]:
    asked: list[str] = []
    sources = {}
    for assembled in ASSEMBLED.values():
        sources[assembled.source] = tmp_path / "sources" / assembled.source
        for root in assembled.packages:
            write(sources[assembled.source] / root / "doc.go", "package x\n")

    def probe(module: str, version: str, workdir: Path, env: dict[str, str]) -> tuple[bool, str]:
        asked.append(f"{module}@{version}")
        if f"{module}@{version}" in broken:
            return False, "dial tcp: i/o timeout"
        if module in sources:
            return True, str(sources[module])
        if f"{module}@{version}" in served:
            return True, "/served"
        return False, "403 Forbidden"

    monkeypatch.setattr(cluster_standins, "probe", probe)
    return asked


def test_stand_ins_are_used_only_where_the_proxy_refuses(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_proxy(monkeypatch, tmp_path, served=set())
    staged = ["k8s.io/api", "k8s.io/apiextensions-api", "k8s.io/ktesting"]
    targets = cluster_standins.standins(GOMOD_138, staged, "v0.38.0-beta.0", tmp_path, {},
                                        say=lambda _: None)
    assert targets == {"k8s.io/apiextensions-api": "./standin/k8s.io/apiextensions-api",
                       "k8s.io/ktesting": "./standin/k8s.io/ktesting",
                       "sigs.k8s.io/structured-merge-diff/v7": "v7.0.0"}
    assert (tmp_path / "standin/k8s.io/apiextensions-api/pkg/apis/apiextensions/v1/doc.go").is_file()
    # k8s.io/kubernetes's test/utils/ktesting becomes the root of k8s.io/ktesting
    assert (tmp_path / "standin/k8s.io/ktesting/doc.go").is_file()
    assert (tmp_path / "standin/k8s.io/ktesting/go.mod").is_file()


def test_a_served_release_takes_no_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked = fake_proxy(monkeypatch, tmp_path, served={
        "k8s.io/apiextensions-api@v0.38.0", "sigs.k8s.io/structured-merge-diff/v7@v7.0.1"})
    targets = cluster_standins.standins(GOMOD_138, ["k8s.io/apiextensions-api"], "v0.38.0", tmp_path,
                                        {}, say=lambda _: None)
    assert targets == {}
    assert asked == ["k8s.io/apiextensions-api@v0.38.0", "sigs.k8s.io/structured-merge-diff/v7@v7.0.1"]


def test_a_network_failure_is_no_refusal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_proxy(monkeypatch, tmp_path, served=set(), broken=frozenset({"k8s.io/apiextensions-api@v0.38.0"}))
    with pytest.raises(RuntimeError, match="i/o timeout"):
        cluster_standins.standins(GOMOD_138, ["k8s.io/apiextensions-api"], "v0.38.0", tmp_path, {},
                                  say=lambda _: None)


@pytest.mark.parametrize(("k8s", "version", "toolchain", "kubectl_built"), [
    ("1.34", "v1.34.4", "local", True),
    ("1.35", "v1.35.8", "local", True),
    ("1.36", "v1.36.3", "local", False),
    ("1.37", "v1.37.2", "local", False),
    ("1.38", "v1.38.0-beta.0", "go1.27.3", True),
])
def test_each_minor_builds_with_its_toolchain_and_kubectl_where_pypi_has_none(
        k8s: str, version: str, toolchain: str, kubectl_built: bool) -> None:
    assert cluster_build.kubernetes_version(k8s) == version
    assert cluster_build.minor_of(version) == k8s
    assert cluster_build.toolchain_for(version) == toolchain
    assert ("kubectl" in cluster_build.kube_binaries(version)) is kubectl_built


def test_the_wrapper_replaces_with_versions_and_with_stand_in_folders(tmp_path: Path) -> None:
    cluster_build.wrapper_module(
        tmp_path, {"k8s.io/kubernetes": "v1.38.0-beta.0"},
        {"k8s.io/api": "v0.38.0-beta.0", "k8s.io/apiextensions-api": "./standin/k8s.io/apiextensions-api"},
        go_line="1.27.0")
    text = (tmp_path / "go.mod").read_text()
    assert "\ngo 1.27.0\n" in text
    assert "\tk8s.io/api => k8s.io/api v0.38.0-beta.0\n" in text
    assert "\tk8s.io/apiextensions-api => ./standin/k8s.io/apiextensions-api\n" in text
