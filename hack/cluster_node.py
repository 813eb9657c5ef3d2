"""One real node beside the kwok nodes: containerd + runc, a CNI bridge, kubelet,
kube-proxy and the upstream DRA test driver's kubelet plugin, all on this machine.

Only one real node runs per machine: the kubelet's cgroups (`/kubepods`), the shim
sockets containerd keeps in `/run/containerd/s`, the bridge, the pod subnet and the
iptables chains are machine-wide. Its state lives under NODE_DIR (short, because unix
socket paths end at 108 bytes), its logs and pids in the cluster's folder. What these
machines need, found by trying, is said where it is set: no CAP_SYS_RESOURCE (so no
negative oom_score_adj), cgroup v1 (kubelet's `failCgroupV1: false` from 1.35 on), no
registry (the pause image is built here and imported).

Teardown (`stop_node`) leaves nothing behind and is safe to run any number of times,
also after a killed run: processes, containers and their shims, mounts, network
namespaces, the bridge, kube-proxy's chains, cgroups, CNI results, the state folder.

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from cluster_build import ClusterError, say
from cluster_node_build import PAUSE_IMAGE, apt_install
from cluster_node_facts import (
    BRIDGE,
    CGROUP_ROOT,
    CNI_NETWORK,
    KUBELET_SYSCTLS,
    NODE_DIR,
    NODE_LABEL,
    NODE_NAME,
    NODE_PROCESSES,
    POD_SUBNET,
    TEST_DRIVER,
    node_binaries,
    node_owner,
    process_alive,
)
from cluster_node_teardown import kube_chains_exist, stop_node


def node_ip() -> str:
    """The address of the default route's interface: where pods reach the API server."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # no packet is sent by a UDP connect
        except OSError as err:
            raise ClusterError(f"no default route to find the node's address ({err})") from None
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise ClusterError("the node's address is a loopback one; the kubelet refuses it")
    return address


def check_machine() -> None:
    """What the real node needs from this machine, each missing piece said plainly."""
    if os.geteuid() != 0:
        raise ClusterError("--real-node needs root (containerd, runc, cgroups, the bridge)")
    packages = {"iptables": "iptables", "ip": "iproute2", "umount": "mount"}
    missing = [pkg for tool, pkg in packages.items() if shutil.which(tool) is None]
    if missing:  # kube-proxy programs the Services with iptables
        apt_install(missing, "the real node needs " + ", ".join(missing))
    if not (CGROUP_ROOT / "memory").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").exists():
        raise ClusterError(f"no cgroup hierarchy under {CGROUP_ROOT}")


def _feature_gates(spec: str) -> dict[str, bool]:
    gates = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        gates[name] = value.strip().lower() == "true"
    return gates


def _containerd_config(paths: dict[str, Path]) -> str:
    d = NODE_DIR
    return f"""version = 3
root = "{d}/containerd/root"
state = "{d}/containerd/state"
temp = "{d}/containerd/tmp"
# Never below 0: without CAP_SYS_RESOURCE no process here may lower its score.
oom_score = 0

[grpc]
  address = "{d}/containerd.sock"

[plugins.'io.containerd.internal.v1.opt']
  path = "{d}/containerd/opt"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  # Clamp containers' oom_score_adj to containerd's own (0) instead of failing to set -997.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_cdi = true
  cdi_spec_dirs = ["{d}/cdi"]
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{paths['runc'] / 'runc'}"
        Root = "{d}/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{paths['cni']}"]
    conf_dir = "{d}/cni/net.d"
    max_conf_num = 1
    use_internal_loopback = true

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _cni_config() -> str:
    return json.dumps({
        "cniVersion": "1.0.0", "name": CNI_NETWORK,
        "plugins": [{
            "type": "bridge", "bridge": BRIDGE, "isGateway": True, "isDefaultGateway": True,
            "ipMasq": False, "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                     "dataDir": str(NODE_DIR / "cni" / "ipam")},
        }],
    }, indent=2) + "\n"


def _kubelet_config(ports: dict[str, int], gates: dict[str, bool]) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",  # containerd runs runc with SystemdCgroup = false
        "failCgroupV1": False,  # this machine is cgroup v1; true by default from 1.35
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{NODE_DIR}/containerd.sock",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "oomScoreAdj": 0,  # the default -999 needs CAP_SYS_RESOURCE
        "port": ports["kubelet"], "healthzPort": ports["kubelet-healthz"],
        "healthzBindAddress": "127.0.0.1", "readOnlyPort": 0,
        "localStorageCapacityIsolation": False,
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%",
                         "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "volumePluginDir": str(NODE_DIR / "kubelet" / "volume-plugins"),
        "podLogsDir": str(NODE_DIR / "pod-logs"),
        "registerWithTaints": [{"key": NODE_LABEL[0], "value": NODE_LABEL[1],
                                "effect": "NoSchedule"}],
        "featureGates": gates,
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
    }
    return json.dumps(config, indent=2) + "\n"


def _start(name: str, argv: list[str], cluster_dir: Path) -> None:
    # KUBECONFIG would win over --kubeconfig in the driver: never inherit the caller's.
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with open(cluster_dir / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=cluster_dir, env=env)
    (cluster_dir / f"{name}.pid").write_text(f"{proc.pid}\n")


def _log_tail(cluster_dir: Path, name: str) -> str:
    with contextlib.suppress(OSError):
        return "\n".join((cluster_dir / f"{name}.log").read_text(errors="replace")
                         .splitlines()[-25:])
    return "(no log)"


def _wait(check: Callable[[], bool], seconds: float, what: str, cluster_dir: Path,
          watch: list[str]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in watch:
            with contextlib.suppress(OSError, ValueError):
                pid = int((cluster_dir / f"{name}.pid").read_text())
                if not process_alive(pid):
                    raise ClusterError(f"{name} exited while waiting for {what}; the tail of "
                                       f"{cluster_dir / (name + '.log')}:\n"
                                       f"{_log_tail(cluster_dir, name)}")
        if check():
            return
        time.sleep(0.25)
    tails = "\n".join(f"--- {n}.log\n{_log_tail(cluster_dir, n)}" for n in watch[-1:])
    raise ClusterError(f"timed out after {seconds:.0f} s waiting for {what}\n{tails}")


def _http_ok(port: int, path: str) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port),
                                                                 timeout=2) as conn:
        conn.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return conn.recv(64).split(b" ")[1:2] == [b"200"]
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_node(cluster_dir: Path, kubeconfig: Path, paths: dict[str, Path], version: str,
               feature_gates: str, api_get: Callable[[str], tuple[int, object]]
               ) -> dict[str, object]:
    """Start the real node for the cluster in CLUSTER_DIR (API_GET(path) reads its API
    server) and wait until the Node is Ready and the driver's ResourceSlice is there.
    Returns what cluster.json records about it."""
    check_machine()
    owner = node_owner()
    if owner is not None and owner != cluster_dir:
        live = [n for n in NODE_PROCESSES if _pid_alive(owner, n)]
        if live:
            raise ClusterError(f"a real node already runs on this machine, for the cluster in "
                               f"{owner} ({', '.join(live)} up); one per machine: "
                               f"`hack/cluster down --dir {owner}` first")
    if owner is not None:
        stop_node(owner, quiet=True)  # whatever a killed run left behind
    elif kube_chains_exist():
        raise ClusterError("this machine's iptables already hold KUBE-* chains of a kubelet or "
                           "kube-proxy that is not draco's real node; the real node's teardown "
                           "removes them, so it will not start here")
    for sub in ("containerd", "cni/net.d", "cdi", "kubelet/pki", "runc", "pod-logs",
                "kubelet/plugins_registry", f"kubelet/plugins/{TEST_DRIVER}"):
        (NODE_DIR / sub).mkdir(parents=True, exist_ok=True)
    (NODE_DIR / "owner").write_text(f"{cluster_dir}\n")
    (NODE_DIR / "binaries.json").write_text(json.dumps({
        "ctr": str(paths["containerd"] / "ctr"),
        "kube-proxy": str(paths["kubernetes-node"] / "kube-proxy")}) + "\n")
    (NODE_DIR / "sysctls.json").write_text(json.dumps(_read_sysctls()) + "\n")
    address = node_ip()
    ports = {name: _free_port() for name in ("kubelet", "kubelet-healthz", "proxy-healthz",
                                             "proxy-metrics")}
    kube = paths["kubernetes-node"]
    (NODE_DIR / "containerd.toml").write_text(_containerd_config(paths))
    (NODE_DIR / "cni" / "net.d" / "10-draco.conflist").write_text(_cni_config())
    (NODE_DIR / "kubelet.yaml").write_text(_kubelet_config(ports, _feature_gates(feature_gates)))
    watch: list[str] = []
    started = time.monotonic()
    _start("containerd", [str(paths["containerd"] / "containerd"),
                          "--config", str(NODE_DIR / "containerd.toml")], cluster_dir)
    watch.append("containerd")
    ctr = [str(paths["containerd"] / "ctr"), "--address", str(NODE_DIR / "containerd.sock"),
           "-n", "k8s.io"]
    _wait(lambda: subprocess.run([*ctr, "version"], capture_output=True).returncode == 0,
          60, "containerd's socket", cluster_dir, watch)
    imported = subprocess.run([*ctr, "images", "import", str(kube / "pause.tar")],
                              capture_output=True, text=True)
    if imported.returncode != 0:
        raise ClusterError(f"importing the pause image failed: {imported.stderr.strip()}")
    _start("kubelet", [
        str(kube / "kubelet"), f"--kubeconfig={kubeconfig}",
        f"--config={NODE_DIR / 'kubelet.yaml'}", f"--root-dir={NODE_DIR / 'kubelet'}",
        f"--cert-dir={NODE_DIR / 'kubelet' / 'pki'}", f"--hostname-override={NODE_NAME}",
        f"--node-ip={address}", f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]}", "--v=2",
    ], cluster_dir)
    watch.append("kubelet")
    _start("kube-proxy", [
        str(kube / "kube-proxy"), f"--kubeconfig={kubeconfig}",
        f"--hostname-override={NODE_NAME}", "--proxy-mode=iptables",
        f"--cluster-cidr={POD_SUBNET}", "--conntrack-max-per-core=0", "--oom-score-adj=0",
        f"--healthz-bind-address=127.0.0.1:{ports['proxy-healthz']}",
        f"--metrics-bind-address=127.0.0.1:{ports['proxy-metrics']}",
    ], cluster_dir)
    watch.append("kube-proxy")
    _wait(lambda: _node_ready(api_get), 120, f"the real node {NODE_NAME} to be Ready",
          cluster_dir, watch)
    _wait(lambda: _http_ok(ports["proxy-healthz"], "/healthz"), 60, "kube-proxy's /healthz",
          cluster_dir, watch)
    # The driver publishes its ResourceSlice with the Node as owner: start it once the
    # Node exists. Its sockets go where this kubelet (root-dir above) looks for them.
    _start("dra-test-driver", [
        str(kube / "dra-test-driver"), f"--kubeconfig={kubeconfig}",
        f"--drivername={TEST_DRIVER}", "kubelet-plugin", f"--node-name={NODE_NAME}",
        f"--plugin-registration-path={NODE_DIR / 'kubelet' / 'plugins_registry'}",
        f"--datadir={NODE_DIR / 'kubelet' / 'plugins'}", f"--cdi-dir={NODE_DIR / 'cdi'}",
        "--num-devices=4",
    ], cluster_dir)
    watch.append("dra-test-driver")
    _wait(lambda: _slice_published(api_get), 60,
          f"{TEST_DRIVER}'s ResourceSlice for {NODE_NAME}", cluster_dir, watch)
    say(f"real node {NODE_NAME} ({address}) ready in {time.monotonic() - started:.0f} s")
    return {"name": NODE_NAME, "address": address, "driver": TEST_DRIVER,
            "label": "=".join(NODE_LABEL), "dir": str(NODE_DIR),
            "containerd_socket": str(NODE_DIR / "containerd.sock"),
            "ctr": str(paths["containerd"] / "ctr"), "ports": ports, "version": version}


def _node_ready(api_get: Callable[[str], tuple[int, object]]) -> bool:
    status, body = api_get(f"/api/v1/nodes/{NODE_NAME}")
    return status == 200 and isinstance(body, dict) and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in body.get("status", {}).get("conditions", []))


def _slice_published(api_get: Callable[[str], tuple[int, object]]) -> bool:
    status, body = api_get("/apis/resource.k8s.io/v1/resourceslices"
                           f"?fieldSelector=spec.nodeName%3D{NODE_NAME}")
    return status == 200 and isinstance(body, dict) and any(
        item.get("spec", {}).get("driver") == TEST_DRIVER for item in body.get("items", []))


def _pid_alive(cluster_dir: Path, name: str) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return process_alive(int((cluster_dir / f"{name}.pid").read_text()))
    return False


def _read_sysctls() -> dict[str, str]:
    out = {}
    for key in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            out[key] = (Path("/proc/sys") / key).read_text().strip()
    return out


def load_image(cluster_dir: Path, archive: Path) -> str:
    """Import an image archive into the real node's containerd (namespace k8s.io, as the
    kubelet sees it), keeping its name and digest; returns ctr's report."""
    if node_owner() != cluster_dir or not (NODE_DIR / "containerd.sock").exists():
        raise ClusterError(f"the cluster in {cluster_dir} has no real node "
                           f"(start it with `hack/cluster up --real-node`)")
    ctr = node_binaries().get("ctr", "ctr")
    proc = subprocess.run([ctr, "--address", str(NODE_DIR / "containerd.sock"), "-n", "k8s.io",
                           "images", "import", "--all-platforms", str(archive)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"ctr images import {archive} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()

