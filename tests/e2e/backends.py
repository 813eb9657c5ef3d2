"""The two API servers the end-to-end tests run on, behind one small interface.

`EmbeddedBackend` is draco's own server (a fresh one per test). `RealBackend` is one
namespace of a real upstream control plane started once per session by `hack/cluster`
(kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok). Tests talk
to both through plain HTTP and the real kubectl, never through the embedded server's
internals, so the same assertions hold on both and the real server is the oracle.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from operators.apiserver.testing import EmbeddedCluster, Kubectl, wait_for

ROOT = Path(__file__).resolve().parents[2]
HACK_CLUSTER = ROOT / "hack" / "cluster"
HACK_IMAGE = ROOT / "hack" / "image"
# Cluster-scoped kinds a test may create; a real-cluster test leaves none behind.
CLUSTER_SCOPED = (
    "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies",
    "/apis/resource.draco.dev/v1alpha1/devicetaintrules",
    "/apis/resource.draco.dev/v1alpha1/resourceslicepatches",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/deviceclasses",
)
# Cluster-scoped kinds of upstream's that only some versions serve (cleaned where served).
UPSTREAM = ("/apis/resource.k8s.io/v1/devicetaintrules",)
OWNERSHIP = """\
A real-cluster test must own every cluster-scoped object it creates, so that no other
test reads it: ResourceSlices of the backend's own drivers (backend.driver,
backend.driver_for(kind)), DeviceTaintRules, DeviceHealthPolicies and ResourceSlicePatches
whose selector or filter names such a driver, DeviceClasses whose CEL selectors name one. A test that
needs an empty or cluster-wide selector runs on the embedded server or on a cluster of
its own (the `private_137` fixture)."""


def owner_driver(path: str, obj: dict[str, Any]) -> str:
    """The driver that makes OBJ (of the collection PATH) a test's own: the one its
    devices belong to, or the one its selector is limited to ("" when it names none)."""
    spec = obj.get("spec") or {}
    if path.endswith("/resourceslices"):
        return str(spec.get("driver") or "")
    if path.endswith(("/devicetaintrules", "/devicehealthpolicies")):
        return str((spec.get("deviceSelector") or {}).get("driver") or "")
    if path.endswith("/resourceslicepatches"):
        return str(((spec.get("devices") or {}).get("filter") or {}).get("driver") or "")
    # a DeviceClass: its selectors' CEL text, which a test limits with device.driver
    return " ".join(str((s.get("cel") or {}).get("expression") or "") for s in spec.get("selectors") or [])
def reuse_variable(k8s: str) -> str:
    """DRACO_CLUSTER_DIR names a running 1.34 cluster; DRACO_CLUSTER_DIR_137 a 1.37 one."""
    return "DRACO_CLUSTER_DIR" if k8s == "1.34" else f"DRACO_CLUSTER_DIR_{k8s.replace('.', '')}"


class RealCluster:
    """A control plane started by `hack/cluster up` (or reused from DRACO_CLUSTER_DIR)."""

    def __init__(self, directory: Path, owned: bool, private: bool = False) -> None:
        self.dir = directory
        self.owned = owned
        self.private = private  # one test's alone: no other test reads what it leaves
        info = json.loads((directory / "cluster.json").read_text())
        self.version: str = info["version"]
        self.kubectl_binary: str = info["kubectl"]
        self.audit_log = Path(info["audit_log"])
        self.url = f"https://127.0.0.1:{info['ports']['apiserver']}"
        pki = directory / "pki"
        self.ssl = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ssl.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.admin_kubeconfig = directory / "kubeconfig"

    @classmethod
    def start(cls, k8s: str, directory: Path, nodes: int = 2, private: bool = False,
              real_node: bool = False, extra: tuple[str, ...] = ()) -> RealCluster:
        """The shared cluster of version K8S (reused from DRACO_CLUSTER_DIR… if set), or
        with `private` one for a single test that reads or changes cluster-wide state
        (`real_node`: with the machine's one real node, `hack/cluster up --real-node`;
        `extra`: more `hack/cluster up` options, e.g. feature gates)."""
        reuse = None if private or real_node else os.environ.get(reuse_variable(k8s))
        if reuse:
            return cls(Path(reuse), owned=False).install_crds()
        proc = subprocess.run(
            [str(HACK_CLUSTER), "up", "--k8s", k8s, "--dir", str(directory), "--nodes", str(nodes),
             *(["--real-node"] if real_node else []), *extra],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=3000,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"hack/cluster up --k8s {k8s} failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-4000:]}")
        return cls(directory, owned=True, private=private or real_node).install_crds()

    def install_crds(self) -> RealCluster:
        """`kubectl apply -f crds/`, as a user installs draco's CRDs."""
        cluster = self
        crds = subprocess.run(
            [cluster.kubectl_binary, "--kubeconfig", str(cluster.admin_kubeconfig), "apply",
             "-f", str(ROOT / "crds")], capture_output=True, text=True, timeout=60)
        if crds.returncode != 0:
            cluster.stop()
            raise RuntimeError(f"kubectl apply -f crds/ failed on the real cluster:\n{crds.stderr}")
        subprocess.run(
            [cluster.kubectl_binary, "--kubeconfig", str(cluster.admin_kubeconfig), "wait",
             "--for=condition=Established", "crd", "--all", "--timeout=60s"],
            capture_output=True, text=True, timeout=90, check=True)
        return self

    def served(self, paths: tuple[str, ...]) -> list[str]:
        """Those of the collections PATHS this server serves (upstream's DeviceTaintRule
        exists from 1.37 only)."""
        out = []
        for path in paths:
            req = urllib.request.Request(self.url + path + "?limit=1", headers={"Accept": "application/json"})
            for attempt in range(60):
                try:
                    with urllib.request.urlopen(req, timeout=30, context=self.ssl):
                        out.append(path)
                    break
                except urllib.error.HTTPError as err:
                    if err.code == 404:
                        break
                    if err.code != 429 or attempt == 59:
                        raise
                    time.sleep(1)  # "storage is (re)initializing": the CRD's cache is starting
        return out

    def stop(self) -> None:
        if self.owned:
            subprocess.run([str(HACK_CLUSTER), "down", "--dir", str(self.dir)],
                           capture_output=True, timeout=180)


class Backend:
    """One test's view of an API server: a namespace, a kubeconfig, HTTP and kubectl."""

    name: str
    url: str
    kubeconfig: Path
    kubectl: Kubectl
    ns: str
    node = "node-0"
    ssl_context: ssl.SSLContext | None = None
    # Unique per test: the DNS suffix of every driver the test's devices belong to.
    domain: str = ""

    def own_identity(self) -> str:
        """Draw this test's id; its drivers are `<kind>.<id>.e2e.example.com`."""
        test_id = uuid.uuid4().hex[:8]
        self.domain = f"{test_id}.e2e.example.com"
        return test_id

    @property
    def driver(self) -> str:
        """The test's own GPU driver: its slices publish under it, its rules name it."""
        return self.driver_for("gpu")

    def driver_for(self, kind: str) -> str:
        """Another driver of the test's own (a second kind of device)."""
        return f"{kind}.{self.domain}"

    def owns(self, path: str, obj: dict[str, Any]) -> bool:
        """Whether OBJ (of the cluster-scoped collection PATH) is limited to this test's drivers."""
        return f".{self.domain}" in owner_driver(path, obj)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """One API request; a 429 (the server's "storage is (re)initializing" just after a
        CRD was established, or its priority and fairness) is retried after the pause it
        asks for, for up to a minute, as client-go does."""
        deadline = time.monotonic() + 60
        while True:
            code, answer = self._request_once(method, path, body, content_type)
            if code != 429 or time.monotonic() > deadline:
                return code, answer
            details = answer.get("details") if isinstance(answer, dict) else None
            time.sleep(min(float((details or {}).get("retryAfterSeconds") or 1), 5))

    def _request_once(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": content_type,
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ssl_context) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, raw.decode(errors="replace")

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        code, body = self.request("POST", path, obj)
        assert code == 201, f"POST {path} answered {code}: {body}"
        return dict(body)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        code, body = self.request("PATCH", path, patch, "application/merge-patch+json")
        assert code == 200, f"PATCH {path} answered {code}: {body}"
        return dict(body)

    def get(self, path: str) -> dict[str, Any] | None:
        code, body = self.request("GET", path)
        if code == 404:
            return None
        assert code == 200, f"GET {path} answered {code}: {body}"
        return dict(body)

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        body = self.get(f"/api/v1/namespaces/{namespace or self.ns}/events") or {}
        return list(body.get("items", []))

    def write_kubeconfig(self, base: dict[str, Any], workdir: Path) -> Path:
        """The base kubeconfig with this test's namespace as the context's default."""
        cfg = json.loads(json.dumps(base))
        for ctx in cfg["contexts"]:
            ctx["context"]["namespace"] = self.ns
        path = workdir / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        return path

    @contextmanager
    def watching(self, path: str) -> Iterator[list[dict[str, Any]]]:
        """Record every watch event on PATH (a collection) while the block runs."""
        code, listed = self.request("GET", path)
        assert code == 200, listed
        rv = listed["metadata"]["resourceVersion"]
        events: list[dict[str, Any]] = []
        stop = threading.Event()
        sep = "&" if "?" in path else "?"
        url = f"{self.url}{path}{sep}watch=1&resourceVersion={rv}&timeoutSeconds=600"

        def run() -> None:
            try:
                with urllib.request.urlopen(url, timeout=600, context=self.ssl_context) as resp:
                    for line in resp:
                        if stop.is_set():
                            return
                        if line.strip():
                            events.append(json.loads(line))
            except OSError:
                return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            yield events
        finally:
            stop.set()

    def cleanup(self) -> None:
        """Leave nothing behind that a later test could see."""


class EmbeddedBackend(Backend):
    name = "embedded"

    def __init__(self, workdir: Path) -> None:
        self.own_identity()
        self.cluster = EmbeddedCluster(workdir)
        self.url = self.cluster.url
        self.ns = "e2e"
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": self.ns}})
        self.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": self.node}})
        base = yaml.safe_load(self.cluster.kubeconfig.read_text())
        self.kubeconfig = self.write_kubeconfig(base, workdir)
        self.kubectl = Kubectl(self.kubeconfig)

    def cleanup(self) -> None:
        self.cluster.stop()


class RealBackend(Backend):
    """One test's namespace and drivers on a cluster that other tests share.

    The test owns what it reads: its namespace, and the cluster-scoped objects limited to
    its drivers (see OWNERSHIP). Cleanup removes exactly those; the last backend of the
    cluster to clean up then finds the cluster-scoped collections empty, or the test
    that just ran created something it did not own, and fails saying what.
    """

    name = "real"
    live: dict[str, set[str]] = {}  # cluster URL -> ids of the backends not yet cleaned up

    def __init__(self, cluster: RealCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.url = cluster.url
        self.ssl_context = cluster.ssl
        self.id = self.own_identity()
        self.ns = f"e2e-{self.id}"
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": self.ns}})
        self.live.setdefault(self.url, set()).add(self.id)
        base = yaml.safe_load(cluster.admin_kubeconfig.read_text())
        self.kubeconfig = self.write_kubeconfig(base, workdir)
        self.kubectl = Kubectl(self.kubeconfig)
        self.kubectl.binary = cluster.kubectl_binary

    def cluster_scoped(self) -> list[tuple[str, dict[str, Any]]]:
        """Every object of the cluster-scoped collections tests create: (path, object)."""
        out = []
        for path in (*CLUSTER_SCOPED, *self.cluster.served(UPSTREAM)):
            listed = self.get(path) or {}
            out += [(path, obj) for obj in listed.get("items") or []]
        return out

    def delete_all(self, objects: list[tuple[str, dict[str, Any]]]) -> None:
        for path, obj in objects:
            code, body = self.request("DELETE", f"{path}/{quoted(obj['metadata']['name'])}")
            assert code in (200, 202, 404), f"cleanup: DELETE {path}/{obj['metadata']['name']} answered {code}: {body}"

    def cleanup(self) -> None:
        ns = f"/api/v1/namespaces/{self.ns}"
        pods, claims = f"{ns}/pods", f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaims"
        for path in (f"{pods}?gracePeriodSeconds=0", claims):
            code, body = self.request("DELETE", path)
            assert code == 200, f"cleanup: DELETE {path} answered {code}: {body}"
        wait_for(lambda: not self.get(pods)["items"] and not self.get(claims)["items"],  # type: ignore[index]
                 60, what=f"pods and claims of {self.ns} to be gone")
        self.delete_all([(path, obj) for path, obj in self.cluster_scoped() if self.owns(path, obj)])
        live = self.live.get(self.url, set())
        live.discard(self.id)
        strays = [] if live or self.cluster.private else self.cluster_scoped()
        self.delete_all(strays)
        self.request("DELETE", ns)
        assert not strays, (
            "cluster-scoped objects no test owns were left on the shared cluster: "
            + ", ".join(f"{path.rsplit('/', 1)[1]}/{obj['metadata']['name']}" for path, obj in strays)
            + "\n" + OWNERSHIP)


def quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
