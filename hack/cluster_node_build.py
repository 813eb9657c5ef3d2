"""Building the real node's parts: kubelet, kube-proxy and the DRA test driver of the
cluster's Kubernetes version, containerd 2.x, runc, the CNI plugins and the pause image,
all from their Go modules (and pause.c from the Kubernetes module), cached and stamped
like the control plane (`cluster_build.build_component`).

Why these pins: containerd 2.x applies a DRA driver's CDI device edits (Debian's 1.6
runs pods but does not); v2.2 still supports cgroup v1 hosts like these (with a
deprecation warning), and runc v1.3.6 is the version its releases pin. runc is the one
cgo build: its nsenter is C, and the chart's `seccompProfile: RuntimeDefault` needs the
`seccomp` tag, which links libseccomp (Debian's libseccomp-dev).

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from cluster_build import (
    ClusterError,
    build_component,
    go_env,
    module_dir,
    run_counted,
    run_go,
    staged_modules,
    wrapper_module,
)

CONTAINERD = "v2.2.9"
RUNC = "v1.3.6"
CNI_PLUGINS = "v1.9.0"
CNI_BINARIES = ("bridge", "host-local")
# containerd v2.2's pinned sandbox image (its `pinned_images.sandbox` default); pause.c
# is the same program for every tag, so the one built here serves every kubelet version.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"


# Wait for dpkg's lock rather than fail on it: the background build (runc's libseccomp),
# the real node (iptables) and hack/image (mmdebstrap) may each install at the same time.
APT_WAIT = ("-o", "DPkg::Lock::Timeout=600")


def apt_install(packages: list[str], why: str) -> None:
    """Debian's PACKAGES, installed with apt-get when missing (as hack/image does for
    mmdebstrap); a machine without root or apt gets the command to run instead."""
    wanted = f"apt-get install {' '.join(packages)}"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ClusterError(f"{why}: run `{wanted}` (needs root and apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", *APT_WAIT, "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(install, capture_output=True, env=env).returncode == 0:
        return
    subprocess.run(["apt-get", *APT_WAIT, "update", "-q"], capture_output=True, env=env)  # no lists yet
    done = subprocess.run(install, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise ClusterError(f"{why}: `{wanted}` failed: {done.stderr.strip()[-500:]}")


def _has_libseccomp() -> bool:
    return shutil.which("pkg-config") is not None and subprocess.run(
        ["pkg-config", "--exists", "libseccomp"], capture_output=True).returncode == 0


def _version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
             "gitTreeState": "clean"}
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in stamp.items()]
    return " ".join(flags)


def build_node_kubernetes(version: str) -> Path:
    """kubelet, kube-proxy and the upstream DRA test driver of Kubernetes VERSION."""

    def build(work: Path, out: Path, log: Path) -> None:
        kdir = module_dir("k8s.io/kubernetes", version, work, log)
        staging_version = "v0." + version.split(".", 1)[1]
        wrapper_module(work, {"k8s.io/kubernetes": version},
                       {mod: staging_version for mod in staged_modules(kdir)})
        run_go(["build", "-trimpath", "-ldflags", _version_ldflags(version),
                "-o", str(out) + "/", "k8s.io/kubernetes/cmd/kubelet",
                "k8s.io/kubernetes/cmd/kube-proxy"], work, log)
        run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "dra-test-driver"),
                "k8s.io/kubernetes/test/e2e/dra/test-driver"], work, log)
        pause_source = kdir / "build" / "pause" / "linux" / "pause.c"
        _build_pause(pause_source, out, log)

    return build_component("kubernetes-node", version, build)


def _build_pause(source: Path, out: Path, log: Path) -> None:
    """pause.c linked statically, packed as a one-file OCI archive under PAUSE_IMAGE."""
    if shutil.which("gcc") is None:
        raise ClusterError("gcc is not installed (the real node's pause image is built from "
                           "Kubernetes' pause.c: apt-get install gcc libc6-dev)")
    with open(log, "a") as handle:
        proc = subprocess.run(
            ["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_IMAGE.split(':')[1]}",
             "-o", str(out / "pause"), str(source)],
            stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ClusterError(f"gcc -static pause.c failed (log: {log}; needs libc6-dev)")
    (out / "pause.tar").write_bytes(pause_archive((out / "pause").read_bytes()))


def pause_archive(binary: bytes) -> bytes:
    """An OCI image layout, tarred, holding one layer with /pause: what `ctr images
    import` reads. Fixed times and owners, so the digest depends on the binary alone."""
    layer_raw = io.BytesIO()
    with tarfile.open(fileobj=layer_raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("pause")
        info.size, info.mode, info.mtime = len(binary), 0o755, 0
        tar.addfile(info, io.BytesIO(binary))
    layer = layer_raw.getvalue()

    def blob(data: bytes) -> tuple[str, bytes]:
        return "sha256:" + hashlib.sha256(data).hexdigest(), data

    def js(obj: object) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()

    layer_digest, _ = blob(layer)
    config_digest, config = blob(js({
        "architecture": "amd64", "os": "linux",
        "config": {"User": "65535:65535", "Entrypoint": ["/pause"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))
    manifest_digest, manifest = blob(js({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer)}],
    }))
    index = js({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": len(manifest),
                       "annotations": {"io.containerd.image.name": PAUSE_IMAGE,
                                       "org.opencontainers.image.ref.name": "3.10.1"}}],
    })
    files = {
        "oci-layout": js({"imageLayoutVersion": "1.0.0"}), "index.json": index,
        f"blobs/sha256/{layer_digest[7:]}": layer, f"blobs/sha256/{config_digest[7:]}": config,
        f"blobs/sha256/{manifest_digest[7:]}": manifest,
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return out.getvalue()


def build_containerd() -> Path:
    """containerd, ctr and the runc shim, with the built-ins upstream's release has
    (btrfs drops itself without cgo; devmapper and zfs are left out)."""

    def build(work: Path, out: Path, log: Path) -> None:
        wrapper_module(work, {"github.com/containerd/containerd/v2": CONTAINERD}, {})
        base = "github.com/containerd/containerd/v2"
        version = f"-X {base}/version.Version={CONTAINERD} -X {base}/version.Package={base}"
        run_go(["build", "-trimpath", "-tags", "no_devmapper no_zfs urfave_cli_no_docs",
                "-ldflags", f"-s -w {version}", "-o", str(out) + "/",
                f"{base}/cmd/containerd", f"{base}/cmd/ctr"], work, log)
        run_go(["build", "-trimpath", "-tags", "no_grpc urfave_cli_no_docs",
                "-ldflags", f"-s -w {version}", "-o", str(out) + "/",
                f"{base}/cmd/containerd-shim-runc-v2"], work, log)

    return build_component("containerd", CONTAINERD, build)


def build_runc() -> Path:
    """runc with seccomp (cgo, libseccomp-dev)."""

    def build(work: Path, out: Path, log: Path) -> None:
        if not _has_libseccomp():
            apt_install(["libseccomp-dev", "pkg-config"],
                        "runc needs libseccomp's headers to build with seccomp (the chart sets "
                        "seccompProfile: RuntimeDefault)")
        wrapper_module(work, {"github.com/opencontainers/runc": RUNC}, {})
        env = go_env()
        env["CGO_ENABLED"] = "1"
        cmd = ["go", "build", "-trimpath", "-tags", "seccomp urfave_cli_no_docs",
               "-ldflags", f"-s -w -X main.version={RUNC.lstrip('v')}",
               "-o", str(out / "runc"), "github.com/opencontainers/runc"]
        with open(log, "a") as handle:
            handle.write(f"$ {' '.join(cmd)}\n")
            handle.flush()
            returncode, _ = run_counted(cmd, work, env, handle)
        if returncode != 0:
            raise ClusterError(f"building runc {RUNC} failed (log: {log})")

    return build_component("runc", RUNC, build)


def build_cni() -> Path:
    def build(work: Path, out: Path, log: Path) -> None:
        wrapper_module(work, {"github.com/containernetworking/plugins": CNI_PLUGINS}, {})
        base = "github.com/containernetworking/plugins/plugins"
        packages = {"bridge": "main/bridge", "host-local": "ipam/host-local"}
        run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out) + "/",
                *[f"{base}/{packages[name]}" for name in CNI_BINARIES]], work, log)

    return build_component("cni-plugins", CNI_PLUGINS, build)


def build_node(version: str) -> dict[str, Path]:
    """Every part of the real node, built (or found in the cache)."""
    return {"kubernetes-node": build_node_kubernetes(version), "containerd": build_containerd(),
            "runc": build_runc(), "cni": build_cni()}
