"""Tearing the real node down (`hack/cluster down`, and `up` after a killed run): every
process, container, mount, cgroup, network device, iptables chain, socket and file the
node made, removed; safe to run any number of times. Standard library only."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from cluster_build import ClusterError, say
from cluster_node_facts import (
    BRIDGE,
    CGROUP_ROOT,
    CNI_NETWORK,
    NODE_DIR,
    NODE_NAME,
    NODE_PROCESSES,
    node_binaries,
    node_owner,
    process_alive,
)


def _signal_all(cluster_dir: Path, names: tuple[str, ...], sig: int) -> list[int]:
    pids = []
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            pid = int((cluster_dir / f"{name}.pid").read_text())
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            if process_alive(pid) and exe == name:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
                pids.append(pid)
    return pids


def _stop_processes(cluster_dir: Path) -> None:
    for name in NODE_PROCESSES[:-1]:  # containerd last: it must outlive the kubelet
        _stop_one(cluster_dir, name)
    _kill_containers()
    _stop_one(cluster_dir, "containerd")
    _kill_containers()


def _stop_one(cluster_dir: Path, name: str) -> None:
    pids = _signal_all(cluster_dir, (name,), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _node_processes() -> list[int]:
    """This node's shims and runc (named by their command line, which carries NODE_DIR)
    and every process in the kubelet's pod cgroups (the containers and their pause)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if os.path.basename(argv[0].decode(errors="replace")) in (
                    "containerd-shim-runc-v2", "runc") and str(NODE_DIR).encode() in b" ".join(argv):
                found.add(int(entry.name))
    pods = CGROUP_ROOT / "pids" / "kubepods"
    if not pods.is_dir():
        pods = CGROUP_ROOT / "kubepods"  # a cgroup v2 host
    # The kubelet and runc remove pod cgroups while this walks them: whatever vanishes
    # meanwhile is skipped (os.walk ignores folders it can no longer list).
    for folder, _, files in os.walk(pods):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in Path(folder, "cgroup.procs").read_text().split())
    found.discard(os.getpid())
    return sorted(found)


def _kill_containers() -> None:
    """Every container and shim of this node, SIGKILLed (graceful stops are the
    kubelet's job while it runs; teardown only makes sure nothing is left)."""
    for _ in range(5):
        pids = _node_processes()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)


def _remove_shim_sockets() -> None:
    """containerd keeps shim sockets in /run/containerd/s whatever its state folder; with
    the shims gone, ours are the ones nobody listens on any more."""
    shims = Path("/run/containerd/s")
    for sock in shims.iterdir() if shims.is_dir() else []:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(sock))
            except ConnectionRefusedError:
                sock.unlink(missing_ok=True)
            except OSError:
                pass
    for folder in (shims, shims.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _unmount_all() -> None:
    """Every mount under NODE_DIR (overlay roots, volumes, netns, shm), deepest first."""
    for _ in range(3):
        mounts = []
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                point = line.split()[4].replace("\\040", " ")
                if point == str(NODE_DIR) or point.startswith(str(NODE_DIR) + "/"):
                    mounts.append(point)
        if not mounts:
            return
        for point in sorted(set(mounts), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)


def _remove_cgroups() -> None:
    """The kubelet's /kubepods tree in every hierarchy, leaves first (rmdir only: a
    cgroup with a process left in it stays, and says so)."""
    left = []
    for hierarchy in sorted(CGROUP_ROOT.iterdir()) if CGROUP_ROOT.is_dir() else []:
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        for folder, _, _ in sorted(os.walk(top), key=lambda w: -len(Path(w[0]).parts)):
            with contextlib.suppress(OSError):
                Path(folder).rmdir()
        try:
            top.rmdir()
        except OSError:
            left.append(str(top))
    if left:
        say(f"warning: cgroups still in use, left in place: {', '.join(left)}")


def _remove_network() -> None:
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    cni_cache = Path("/var/lib/cni/results")
    if cni_cache.is_dir():
        for entry in cni_cache.glob(f"{CNI_NETWORK}-*"):
            entry.unlink(missing_ok=True)


def _remove_proxy_rules() -> None:
    """kube-proxy's own cleanup of the KUBE-* chains it wrote."""
    proxy = node_binaries().get("kube-proxy")
    if proxy and Path(proxy).exists():
        subprocess.run([proxy, "--cleanup"], capture_output=True, timeout=60)


def kube_chains_exist() -> bool:
    listed = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True)
    return any(line.startswith("-N KUBE-") for line in listed.stdout.splitlines())


def _remove_kube_chains() -> None:
    """What kube-proxy's cleanup leaves: the kubelet's KUBE-* canary and firewall chains,
    in every table of both families (rules jumping to them first, then the chains)."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle"):
            listed = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True)
            if listed.returncode != 0:
                continue
            lines = listed.stdout.splitlines()
            for line in lines:
                words = line.split()
                if words[:1] == ["-A"] and not words[1].startswith("KUBE-") and \
                        any(w.startswith("KUBE-") for w in words[2:]):
                    subprocess.run([tool, "-w", "-t", table, "-D", *words[1:]], capture_output=True)
            chains = [line.split()[1] for line in lines
                      if line.startswith("-N KUBE-")]
            for chain in chains:
                subprocess.run([tool, "-w", "-t", table, "-F", chain], capture_output=True)
            for chain in chains:
                subprocess.run([tool, "-w", "-t", table, "-X", chain], capture_output=True)


def _remove_log_links() -> None:
    links = Path("/var/log/containers")
    if links.is_dir():
        for link in links.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and os.readlink(link).startswith(str(NODE_DIR)):
                    link.unlink()


def _restore_sysctls() -> None:
    with contextlib.suppress(OSError, ValueError):
        saved = json.loads((NODE_DIR / "sysctls.json").read_text())
        for key, value in saved.items():
            with contextlib.suppress(OSError):
                (Path("/proc/sys") / key).write_text(value + "\n")


def stop_node(cluster_dir: Path, quiet: bool = False) -> None:
    """Everything the real node of the cluster in CLUSTER_DIR made, gone; a no-op when
    there is nothing (or the node on this machine belongs to another cluster)."""
    owner = node_owner()
    if owner is not None and owner != cluster_dir:
        return
    if not NODE_DIR.exists() and not (cluster_dir / "kubelet.pid").exists():
        return
    # Every step runs even when one before it failed: teardown removes all it can, then
    # says what it could not.
    failed = []
    steps: list[tuple[str, Callable[[], None]]] = [
        ("stopping the processes", lambda: _stop_processes(cluster_dir)),
        ("kube-proxy --cleanup", _remove_proxy_rules), ("KUBE-* chains", _remove_kube_chains),
        ("shim sockets", _remove_shim_sockets), ("mounts", _unmount_all), ("cgroups", _remove_cgroups),
        ("the bridge", _remove_network), ("log links", _remove_log_links), ("sysctls", _restore_sysctls)]
    for what, step in steps:
        try:
            step()
        except (OSError, subprocess.SubprocessError) as err:
            failed.append(f"{what}: {err}")
    if failed:
        say("warning: parts of the teardown failed: " + "; ".join(failed))
    shutil.rmtree(NODE_DIR, ignore_errors=True)
    if NODE_DIR.exists():
        _unmount_all()
        shutil.rmtree(NODE_DIR, ignore_errors=True)
    if NODE_DIR.exists():
        raise ClusterError(f"could not remove {NODE_DIR}; see `grep {NODE_DIR} /proc/mounts`")
    for name in NODE_PROCESSES:
        (cluster_dir / f"{name}.pid").unlink(missing_ok=True)
    if not quiet:
        say(f"stopped the real node {NODE_NAME} and removed {NODE_DIR}")
