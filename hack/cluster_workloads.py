"""The workload stack of the test bed: Kueue and JobSet, built from their Go modules.

GPU clusters run pods through Kueue (quota, admission, topology-aware scheduling) and
workload controllers such as JobSet; draco's real-cluster tests meet both as a user's
cluster has them. Each is built like the Kubernetes components (`cluster_build`): one
`go build` of its manager from the module proxy at a pinned version, through a wrapper
module, into ``<cache>/<name>-<version>/`` stamped last. Beside the binary the build
keeps what the release installs from the same module: its CRDs
(config/components/crd/bases), its webhook configurations
(config/components/webhook/manifests.yaml, with the kustomize patches the release
applies to them) and the CRDs its release gives a conversion webhook, in ``install.json``.
Starting them on a running cluster is `cluster_stack`'s. Standard library only.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster_build import (
    ClusterError,
    build_component,
    component_dir,
    go_env,
    run_counted,
    run_go,
    wrapper_module,
)
from cluster_standins import go_directive


@dataclass(frozen=True)
class Manager:
    """One controller manager of the stack and where its release keeps what it installs."""

    name: str  # the binary's name and the cache folder's, without the version
    module: str
    version: str
    package: str  # the manager's main package
    version_package: str  # whose GitVersion/GitCommit/BuildDate the release's Makefile sets
    name_prefix: str  # config/default's namePrefix: the installed objects' names start with it


KUEUE = Manager("kueue", "sigs.k8s.io/kueue", "v0.19.2", "sigs.k8s.io/kueue/cmd/kueue",
                "sigs.k8s.io/kueue/pkg/version", "kueue-")
JOBSET = Manager("jobset", "sigs.k8s.io/jobset", "v0.10.1", "sigs.k8s.io/jobset",
                 "sigs.k8s.io/jobset/pkg/version", "jobset-")
MANAGERS = (KUEUE, JOBSET)

CRD_DIR = "config/components/crd"
WEBHOOK_MANIFESTS = "config/components/webhook/manifests.yaml"
WEBHOOK_PATCHES = "config/components/webhook/patches"


def module_info(module: str, version: str, work: Path, log: Path) -> dict[str, object]:
    """`go mod download -json MODULE@VERSION`: its folder in the module cache and, where
    the proxy says, the commit the tag names."""
    with open(log, "a") as out:
        returncode, output = run_counted(["go", "mod", "download", "-json", f"{module}@{version}"],
                                         work, go_env(), subprocess.PIPE, out)
    if returncode != 0:
        raise ClusterError(f"cannot download Go module {module}@{version} (log: {log})")
    return dict(json.loads(output))


def conversion_crds(kustomization: str, group: str) -> list[str]:
    """The CRDs the release's crd kustomization gives a conversion webhook: the
    `patches/webhook_in_<plural>.yaml` lines it does not comment out."""
    plurals = re.findall(r"^\s*-\s*path:\s*patches/webhook_in_([a-z0-9]+)\.yaml\s*$", kustomization, re.M)
    return [f"{plural}.{group}" for plural in plurals]


def crd_group(crd_file: Path) -> str:
    """kubebuilder names a CRD's file `<group>_<plural>.yaml`."""
    return crd_file.name.split("_", 1)[0]


def collect_install(manager: Manager, mdir: Path, out: Path) -> dict[str, object]:
    """Copy what the release installs out of the module into OUT; say what it is."""
    bases = sorted((mdir / CRD_DIR / "bases").glob("*.yaml"))
    if not bases:
        raise ClusterError(f"{manager.module}@{manager.version} has no CRDs under {CRD_DIR}/bases")
    (out / "crds").mkdir()
    for crd in bases:
        shutil.copy(crd, out / "crds" / crd.name)
    kustomization = (mdir / CRD_DIR / "kustomization.yaml").read_text()
    shutil.copy(mdir / WEBHOOK_MANIFESTS, out / "webhooks.yaml")
    patches = sorted((mdir / WEBHOOK_PATCHES).glob("*.yaml")) if (mdir / WEBHOOK_PATCHES).is_dir() else []
    if patches:
        (out / "webhook-patches").mkdir()
        for patch in patches:
            shutil.copy(patch, out / "webhook-patches" / patch.name)
    return {
        "crds": [f"crds/{crd.name}" for crd in bases],
        "conversion": conversion_crds(kustomization, crd_group(bases[0])),
        "webhooks": "webhooks.yaml",
        "webhook_patches": [f"webhook-patches/{p.name}" for p in patches],
        "name_prefix": manager.name_prefix,
    }


def build_manager(manager: Manager) -> Path:
    def build(work: Path, out: Path, log: Path) -> None:
        info = module_info(manager.module, manager.version, work, log)
        mdir = Path(str(info["Dir"]))
        # the wrapper at the release's own language version (Kueue's go.mod says 1.26)
        go_line = go_directive((mdir / "go.mod").read_text()) or "1.24.0"
        wrapper_module(work, {manager.module: manager.version}, {}, go_line)
        origin = info.get("Origin")
        commit = str(origin.get("Hash") or "") if isinstance(origin, dict) else ""
        stamp = {"GitVersion": manager.version, "GitCommit": commit,
                 "BuildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        ldflags = ["-s", "-w"] + [f"-X {manager.version_package}.{k}={v}" for k, v in stamp.items() if v]
        run_go(["build", "-trimpath", "-ldflags", " ".join(ldflags), "-o", str(out / manager.name),
                manager.package], work, log)
        install = collect_install(manager, mdir, out)
        install.update(module=manager.module, version=manager.version, commit=commit)
        (out / "install.json").write_text(json.dumps(install, indent=1) + "\n")

    return build_component(manager.name, manager.version, build)


def build_kueue() -> Path:
    return build_manager(KUEUE)


def build_jobset() -> Path:
    return build_manager(JOBSET)


BUILDS: dict[str, Callable[[], Path]] = {"kueue": build_kueue, "jobset": build_jobset}


def build_stack() -> dict[str, Path]:
    """Both managers (cached): name -> the folder with the binary and install.json."""
    return {manager.name: BUILDS[manager.name]() for manager in MANAGERS}


def stack_paths() -> list[tuple[str, str, Path]]:
    return [(m.name, m.version, component_dir(m.name, m.version)) for m in MANAGERS]
