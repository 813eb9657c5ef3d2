"""Starting Kueue and JobSet on a running test cluster, the way their releases install them.

`hack/cluster stack up --dir DIR` (after `hack/cluster up --k8s 1.37 --dir DIR`):

- **CRDs** from the module (`cluster_workloads`), with the conversion webhooks the
  release's kustomization adds; applied server-side, then waited for until Established.
- **Webhooks** served to the real kube-apiserver: each manager runs on the host and
  serves its webhooks on 127.0.0.1 (a free port), with a serving certificate for
  127.0.0.1 signed by the cluster's own CA; the release's webhook configurations are
  installed with `clientConfig.url` https://127.0.0.1:PORT/<the release's path> and that
  CA as caBundle. The managers' internal certificate management (which writes Secrets
  for an in-cluster Service) is off (`internalCertManagement.enable: false`).
- **Kueue's Configuration**: the integrations `batch/job`, `pod` and
  `jobset.x-k8s.io/jobset`; Pod-based integrations only in namespaces labelled with
  the managed label (`managedJobsNamespaceSelector`), and Kueue's job webhooks only
  called for those namespaces, so a shared cluster's other tests never meet Kueue;
  topology-aware scheduling and the DRA integration on (their v0.19 defaults) with the
  `deviceClassMappings` given by `--device-class-mapping`; no leader election, no metrics
  server, no visibility API server (VisibilityOnDemand=false: it would listen on a fixed
  port for every cluster of the machine).
- **Readiness**: both managers' /readyz answer, and a dry-run create of a Kueue
  ResourceFlavor and of a JobSet passes through the apiserver, so every webhook answers.

Logs are `DIR/kueue.log` and `DIR/jobset.log`, PIDs `DIR/<name>.pid` (`hack/cluster down`
stops them with the cluster; `hack/cluster stack down` alone); `DIR/stack.json` says
what runs. Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_build import ClusterError, say
from cluster_pki import openssl
from cluster_workloads import JOBSET, KUEUE, MANAGERS, build_stack

STACK = tuple(m.name for m in MANAGERS)  # the processes, as DIR/<name>.pid names them
MANAGED_LABEL = ("draco.dev/workload-stack", "managed")
# Kueue reads its metrics server's certificate from this fixed path whenever its
# internal certificate management is off (cmd/kueue); its metrics server stays off here,
# but the file must exist for the manager to start.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
JOBSET_POD_SELECTOR_KEY = "jobset.sigs.k8s.io/jobset-name"

Call = Callable[[str, str, object | None], tuple[int, object]]
Start = Callable[[str, list[str], Path], int]
Alive = Callable[[int, str | None], bool]


def parse_mapping(text: str) -> dict[str, object]:
    """RESOURCE=CLASS[,CLASS…] -> one of Kueue's deviceClassMappings."""
    resource, _, classes = text.partition("=")
    names = [c.strip() for c in classes.split(",") if c.strip()]
    if not resource or not names:
        raise ClusterError(f"--device-class-mapping wants RESOURCE=CLASS[,CLASS…], got {text!r}")
    return {"name": resource.strip(), "deviceClassNames": names}


def serving_cert(pki: Path, certs: Path) -> None:
    """tls.crt/tls.key for 127.0.0.1, signed by the cluster's CA (which the API server's
    webhook clients are then given as caBundle)."""
    if (certs / "tls.crt").exists() and (certs / "tls.key").exists():
        return
    certs.mkdir(parents=True, exist_ok=True)
    (certs / "serving.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       "extendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
            "-subj", "/CN=draco-workload-stack", cwd=certs)
    openssl("x509", "-req", "-in", "tls.csr", "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
            "-CAcreateserial", "-out", "tls.crt", "-days", "3650", "-extfile", "serving.ext", cwd=certs)


def kueue_metrics_certs(certs: Path) -> None:
    if (KUEUE_METRICS_CERTS / "tls.crt").exists() and (KUEUE_METRICS_CERTS / "tls.key").exists():
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(certs / name, KUEUE_METRICS_CERTS / name)
    except OSError as err:
        raise ClusterError(
            f"Kueue (internal certificates off) will not start without {KUEUE_METRICS_CERTS}/tls.crt "
            f"and tls.key, and they cannot be written here: {err}") from None


def kubectl_json(kubectl: str, kubeconfig: Path, manifest: Path) -> list[dict[str, Any]]:
    """A YAML manifest's objects as JSON (kubectl's client-side dry run does the YAML)."""
    proc = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "create", "--dry-run=client",
                           "--validate=false", "-o", "json", "-f", str(manifest)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if proc.returncode != 0:
        raise ClusterError(f"kubectl could not read {manifest}: {proc.stderr.strip()[-2000:]}")
    objects, text, at = [], proc.stdout, 0  # one JSON document per YAML document
    decoder = json.JSONDecoder()
    while text[at:].strip():
        obj, end = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        objects += obj["items"] if obj.get("kind") == "List" else [obj]
        at = end
    return objects


def kubectl_apply(kubectl: str, kubeconfig: Path, objects: list[dict[str, Any]], what: str) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    proc = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "apply", "--server-side",
                           "--force-conflicts", "--field-manager=draco-test-bed", "-f", "-"],
                          input=body, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise ClusterError(f"applying {what} failed: {proc.stderr.strip()[-3000:]}")


def conversion_webhook(url: str, ca_bundle: str) -> dict[str, object]:
    return {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": url, "caBundle": ca_bundle}, "conversionReviewVersions": ["v1"]}}


def with_conversion(crds: list[dict[str, Any]], conversion: list[str], port: int,
                    ca_bundle: str) -> list[dict[str, Any]]:
    """The CRDs, those named in CONVERSION converted by the manager on the host."""
    out = json.loads(json.dumps(crds))
    for crd in out:
        if crd["metadata"]["name"] in conversion:
            crd["spec"]["conversion"] = conversion_webhook(f"https://127.0.0.1:{port}/convert", ca_bundle)
    return list(out)


def crds(build: Path, kubectl: str, kubeconfig: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    install = json.loads((build / "install.json").read_text())
    read = [crd for path in install["crds"] for crd in kubectl_json(kubectl, kubeconfig, build / path)]
    return with_conversion(read, install["conversion"], port, ca_bundle)


def to_url(webhook: dict[str, Any], port: int, ca_bundle: str) -> None:
    """The release's Service reference -> the manager on the host, by URL."""
    path = (webhook.get("clientConfig", {}).get("service") or {}).get("path") or "/"
    webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def point_at_host(objects: list[dict[str, Any]], name_prefix: str, port: int, ca_bundle: str,
                  managed: tuple[str, str] | None, jobset_pods: bool) -> list[dict[str, Any]]:
    """The release's webhook configurations as installed here: named as config/default
    names them, each webhook called at the manager on the host. MANAGED (Kueue's): the
    job webhooks (those for objects outside kueue.x-k8s.io) are called only in namespaces
    with that label, where the release calls them everywhere but kube-system and
    kueue-system. JOBSET_PODS: JobSet's pod webhooks see only pods of a JobSet, as the
    release's kustomize patches make them."""
    out = json.loads(json.dumps(objects))
    for obj in out:
        obj["metadata"]["name"] = name_prefix + obj["metadata"]["name"]
        for hook in obj.get("webhooks", []):
            to_url(hook, port, ca_bundle)
            groups = {g for rule in hook.get("rules", []) for g in rule.get("apiGroups", [])}
            if managed is not None and not groups <= {"kueue.x-k8s.io"}:
                hook["namespaceSelector"] = {"matchLabels": {managed[0]: managed[1]}}
            resources = {r for rule in hook.get("rules", []) for r in rule.get("resources", [])}
            if jobset_pods and resources == {"pods"}:
                hook["objectSelector"] = {"matchExpressions": [
                    {"key": JOBSET_POD_SELECTOR_KEY, "operator": "Exists"}]}
    return out


def webhook_configurations(build: Path, kubectl: str, kubeconfig: Path, port: int, ca_bundle: str,
                           managed: tuple[str, str] | None) -> list[dict[str, Any]]:
    install = json.loads((build / "install.json").read_text())
    objects = kubectl_json(kubectl, kubeconfig, build / install["webhooks"])
    patches = "".join((build / p).read_text() for p in install.get("webhook_patches", []))
    return point_at_host(objects, install["name_prefix"], port, ca_bundle, managed,
                         jobset_pods=JOBSET_POD_SELECTOR_KEY in patches)


def established(call: Call, name: str) -> bool:
    status, body = call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", None)
    if status != 200 or not isinstance(body, dict):
        return False
    # a CRD just created may show `conditions: null` until its controller sets them
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (body.get("status") or {}).get("conditions") or [])


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy


def http_ok(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def wait_until(check: Callable[[], bool], seconds: float, what: str,
               alive_check: Callable[[], None] = lambda: None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive_check()
        if check():
            return
        time.sleep(0.5)
    raise ClusterError(f"timed out after {seconds:.0f} s waiting for {what}")


def probe_objects() -> list[tuple[str, dict[str, Any]]]:
    """Dry-run creates whose success shows each manager's webhooks answer the API server."""
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "stack-readiness-probe"}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "stack-readiness-probe"},
              "spec": {"replicatedJobs": [{"name": "probe", "replicas": 1, "template": {"spec": {
                  "template": {"spec": {"restartPolicy": "Never", "containers": [
                      {"name": "c", "image": "registry.invalid/probe"}]}}}}}]}}
    return [("/apis/kueue.x-k8s.io/v1beta2/resourceflavors?dryRun=All", flavor),
            ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All", jobset)]


def configurations(ports: dict[str, int], certs: Path, managed: tuple[str, str],
                   mappings: list[dict[str, object]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Kueue's and JobSet's Configuration files: webhooks on loopback with the given
    certificates, no internal certificate management, no leader election, no metrics
    server; Kueue with the integrations the tests use and its DRA mappings."""
    kueue = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": "kueue-system",
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": {managed[0]: managed[1]}},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": ports["kueue-webhook"], "host": "127.0.0.1", "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "leaderElection": {"leaderElect": False},
        "integrations": {"frameworks": ["batch/job", "pod", "jobset.x-k8s.io/jobset"]},
        "resources": {"deviceClassMappings": mappings} if mappings else {},
    }
    jobset = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "webhook": {"port": ports["jobset-webhook"], "host": "127.0.0.1", "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        "leaderElection": {"leaderElect": False},
    }
    return kueue, jobset


def stack_up(cluster_dir: Path, call: Call, start: Start, alive: Alive, free_port: Callable[[], int],
             mappings: list[dict[str, object]], managed: tuple[str, str]) -> dict[str, Any]:
    info = json.loads((cluster_dir / "cluster.json").read_text())
    kubeconfig, kubectl = Path(info["kubeconfig"]), str(info["kubectl"])
    for name in STACK:
        pid_file = cluster_dir / f"{name}.pid"
        if pid_file.exists() and alive(int(pid_file.read_text() or 0), name):
            raise ClusterError(f"{cluster_dir} already runs the workload stack ({name} is up); "
                               f"`hack/cluster stack down --dir {cluster_dir}` first")
    builds = build_stack()
    started = time.monotonic()
    certs = cluster_dir / "stack-certs"
    serving_cert(cluster_dir / "pki", certs)
    kueue_metrics_certs(certs)
    ca_bundle = base64.b64encode((cluster_dir / "pki" / "ca.crt").read_bytes()).decode()
    ports = {f"{m.name}-{use}": free_port() for m in MANAGERS for use in ("webhook", "health")}
    all_crds = []
    for m in MANAGERS:
        all_crds += crds(builds[m.name], kubectl, kubeconfig, ports[f"{m.name}-webhook"], ca_bundle)
    kubectl_apply(kubectl, kubeconfig, all_crds, "the Kueue and JobSet CRDs")
    names = [crd["metadata"]["name"] for crd in all_crds]
    wait_until(lambda: all(established(call, n) for n in names), 120, "the stack's CRDs to be Established")
    for namespace in ("kueue-system", "jobset-system"):  # the releases' own namespaces
        call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": namespace}})
    kueue_config, jobset_config = configurations(ports, certs, managed, mappings)
    # JSON is YAML: both managers read their Configuration with a YAML decoder
    (cluster_dir / "kueue-config.yaml").write_text(json.dumps(kueue_config, indent=1) + "\n")
    (cluster_dir / "jobset-config.yaml").write_text(json.dumps(jobset_config, indent=1) + "\n")
    argv = {
        KUEUE.name: [str(builds["kueue"] / "kueue"), f"--config={cluster_dir / 'kueue-config.yaml'}",
                     f"--kubeconfig={kubeconfig}", "--feature-gates=VisibilityOnDemand=false"],
        JOBSET.name: [str(builds["jobset"] / "jobset"), f"--config={cluster_dir / 'jobset-config.yaml'}",
                      f"--kubeconfig={kubeconfig}", "--metrics-bind-address=0",
                      f"--health-probe-bind-address=127.0.0.1:{ports['jobset-health']}",
                      "--leader-elect=false"],
    }
    running: list[str] = []
    try:
        for m in MANAGERS:
            start(m.name, argv[m.name], cluster_dir)
            running.append(m.name)

        def still_running() -> None:
            for name in running:
                if not alive(int((cluster_dir / f"{name}.pid").read_text()), name):
                    tail = "\n".join((cluster_dir / f"{name}.log").read_text(errors="replace")
                                     .splitlines()[-20:])
                    raise ClusterError(f"{name} exited during start; the tail of its log:\n{tail}")

        for m in MANAGERS:
            wait_until(lambda m=m: http_ok(f"http://127.0.0.1:{ports[m.name + '-health']}/readyz"),
                       180, f"{m.name}'s /readyz", still_running)
        hooks = []
        for m in MANAGERS:
            hooks += webhook_configurations(builds[m.name], kubectl, kubeconfig, ports[f"{m.name}-webhook"],
                                            ca_bundle, managed if m is KUEUE else None)
        kubectl_apply(kubectl, kubeconfig, hooks, "the Kueue and JobSet webhook configurations")
        for path, obj in probe_objects():
            answers: list[object] = []

            def passes(path: str = path, obj: dict[str, Any] = obj, answers: list[object] = answers) -> bool:
                status, body = call("POST", path, obj)
                answers[:] = [status, body]
                return status == 201

            try:
                wait_until(passes, 120, f"the webhooks to answer a dry-run create ({path})", still_running)
            except ClusterError as err:
                raise ClusterError(f"{err}; the last answer: {answers}") from None
    except BaseException:
        stop_stack(cluster_dir, call, alive, quiet=True)
        raise
    state = {
        "kueue": {"version": KUEUE.version, "webhook_port": ports["kueue-webhook"],
                  "health_port": ports["kueue-health"], "config": str(cluster_dir / "kueue-config.yaml")},
        "jobset": {"version": JOBSET.version, "webhook_port": ports["jobset-webhook"],
                   "health_port": ports["jobset-health"], "config": str(cluster_dir / "jobset-config.yaml")},
        "managed_namespace_label": {managed[0]: managed[1]},
        "device_class_mappings": mappings,
        "webhook_configurations": [(h["kind"], h["metadata"]["name"]) for h in hooks],
        "start": round(time.monotonic() - started, 1),
    }
    (cluster_dir / "stack.json").write_text(json.dumps(state, indent=1) + "\n")
    say(f"Kueue {KUEUE.version} and JobSet {JOBSET.version} ready in {state['start']} s "
        f"(logs: {cluster_dir}/kueue.log, jobset.log)")
    return state


def stop_processes(cluster_dir: Path, names: tuple[str, ...], alive: Alive) -> None:
    """SIGTERM to each of NAMES that still runs as itself, SIGKILL after 10 s."""
    pids: dict[str, int] = {}
    for name in names:
        try:
            pid = int((cluster_dir / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if alive(pid, name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            pids[name] = pid
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = {n: p for n, p in pids.items() if alive(p, None)}
        time.sleep(0.1)
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop_stack(cluster_dir: Path, call: Call, alive: Alive, quiet: bool = False) -> None:
    """Remove the stack's webhook configurations first (so the cluster's pods are never
    sent to a webhook that is gone), then stop the managers."""
    for m in MANAGERS:
        for plural, base in (("mutatingwebhookconfigurations", "mutating-webhook-configuration"),
                             ("validatingwebhookconfigurations", "validating-webhook-configuration")):
            with contextlib.suppress(OSError):
                call("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{m.name_prefix}{base}", None)
    stop_processes(cluster_dir, STACK, alive)
    with contextlib.suppress(OSError):
        (cluster_dir / "stack.json").unlink()
    if not quiet:
        say(f"stopped Kueue and JobSet in {cluster_dir}")
