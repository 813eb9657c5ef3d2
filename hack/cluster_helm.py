"""The helm CLI for draco's chart tests, built from its Go module at a pinned version, cached.

``go install helm.sh/helm/v3/cmd/helm@HELM`` builds helm with exactly its own go.mod (it has
no replace directives), so no wrapper module is needed.  The link flags do what helm's
Makefile does for a release: they stamp helm's own version, and the Kubernetes version that
helm's chartutil assumes for offline ``helm template``/``helm lint`` — left unset it is 1.20,
and a chart declaring ``kubeVersion: ">=1.34.0-0"`` would not render.  The Kubernetes version
is the client-go release helm's go.mod pins (v0.37.0 -> 1.37), as the Makefile derives it.

No ``-trimpath``: only the link step differs from a plain ``go install``, so a warm Go build
cache makes this a relink instead of a compile of helm's ~300 packages on a small machine.
Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path

from cluster_build import GC_FLAGS, ClusterError, build_component, go_env, module_dir, run_counted

HELM = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"


def kubernetes_of(helm_dir: Path) -> tuple[str, str, str]:
    """(major, minor, gitVersion) of the Kubernetes release whose client-go helm pins."""
    text = (helm_dir / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.(\d+)", text, re.M)
    if match is None:
        raise ClusterError(f"no k8s.io/client-go requirement in {helm_dir / 'go.mod'}")
    minor, patch = match.groups()
    return "1", minor, f"v1.{minor}.{patch}"


def helm_ldflags(major: str, minor: str, git_version: str) -> list[str]:
    flags = ["-s", "-w"]
    stamps = {
        f"{HELM_MODULE}/internal/version.version": HELM,
        f"{HELM_MODULE}/internal/version.gitTreeState": "clean",
        f"{HELM_MODULE}/internal/version.metadata": "",
        f"{HELM_MODULE}/pkg/chartutil.k8sVersionMajor": major,
        f"{HELM_MODULE}/pkg/chartutil.k8sVersionMinor": minor,
        f"{HELM_MODULE}/pkg/lint/rules.k8sVersionMajor": major,
        f"{HELM_MODULE}/pkg/lint/rules.k8sVersionMinor": minor,
        "k8s.io/client-go/pkg/version.gitVersion": git_version,
        "k8s.io/client-go/pkg/version.gitMajor": major,
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    flags += [f"-X {name}={value}" for name, value in stamps.items()]
    return flags


def build_helm() -> Path:
    """The folder holding ``helm`` (built once per cache, stamped last)."""

    def build(work: Path, out: Path, log: Path) -> None:
        hdir = module_dir(HELM_MODULE, HELM, work, log)
        major, minor, git_version = kubernetes_of(hdir)
        env = go_env()
        # `go install pkg@version` ignores any go.mod and rejects -mod=mod.
        env.update(GOFLAGS=f"-buildvcs=false -p=4 {GC_FLAGS}", GOBIN=str(out))
        argv = ["go", "install", "-ldflags", " ".join(helm_ldflags(major, minor, git_version)),
                f"{HELM_MODULE}/cmd/helm@{HELM}"]
        with open(log, "a") as handle:
            handle.write(f"$ {' '.join(argv)}\n")
            handle.flush()
            returncode, _ = run_counted(argv, work, env, handle)
        if returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            raise ClusterError(f"`go install {HELM_MODULE}/cmd/helm@{HELM}` failed "
                               f"(log: {log}):\n{tail}")
        if not (out / "helm").exists():
            raise ClusterError(f"go install wrote no helm binary into {out} (log: {log})")

    return build_component("helm", HELM, build)
