"""hack/cluster's workload stack (Kueue and JobSet): what it takes from the releases'
manifests and how it points them at managers on the host (no network, no Go)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HACK = Path(__file__).resolve().parents[1] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import cluster_plan  # noqa: E402  (a script's module, stdlib only)
from cluster_build import ClusterError  # noqa: E402
from cluster_stack import parse_mapping, point_at_host, with_conversion  # noqa: E402
from cluster_workloads import conversion_crds  # noqa: E402

# Kueue v0.19.2's config/components/crd/kustomization.yaml, its patches part
KUEUE_KUSTOMIZATION = """\
patches:
# [WEBHOOK] To enable webhook, uncomment all the sections with [WEBHOOK] prefix.
- path: patches/webhook_in_localqueues.yaml
- path: patches/webhook_in_clusterqueues.yaml
- path: patches/webhook_in_cohorts.yaml
- path: patches/webhook_in_workloads.yaml
- path: patches/webhook_in_multikueueclusters.yaml
#- path: patches/webhook_in_resourceflavors.yaml
#- path: patches/cainjection_in_clusterqueues.yaml
"""


@pytest.mark.parametrize(("text", "group", "expected"), [
    (KUEUE_KUSTOMIZATION, "kueue.x-k8s.io",
     ["localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
      "workloads.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io"]),
    ("patches:\n- path: patches/webhook_in_jobsets.yaml\n\n- path: patches/cainjection_in_jobsets.yaml\n",
     "jobset.x-k8s.io", ["jobsets.jobset.x-k8s.io"]),
    ("patches: []\n", "x.io", []),
])
def test_the_conversion_webhooks_are_those_the_release_patches_in(
        text: str, group: str, expected: list[str]) -> None:
    assert conversion_crds(text, group) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("example.com/gpu=stack-gpu", {"name": "example.com/gpu", "deviceClassNames": ["stack-gpu"]}),
    ("gpus=a, b", {"name": "gpus", "deviceClassNames": ["a", "b"]}),
    ("example.com/gpu=", None),
    ("=stack-gpu", None),
    ("stack-gpu", None),
])
def test_a_device_class_mapping_is_resource_equals_classes(text: str, expected: dict[str, Any] | None) -> None:
    if expected is None:
        with pytest.raises(ClusterError):
            parse_mapping(text)
    else:
        assert parse_mapping(text) == expected


def _hook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": [resource]}]}


MUTATING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"}, "webhooks": [
                _hook("mclusterqueue.kb.io", "kueue.x-k8s.io", "clusterqueues",
                      "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"),
                _hook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
                _hook("mpod.kb.io", "", "pods", "/mutate--v1-pod")]}

# webhook name -> (URL, namespaceSelector, objectSelector) as installed
KUEUE_EXPECTED = {
    "mclusterqueue.kb.io": ("https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", None, None),
    "mjob.kb.io": ("https://127.0.0.1:9443/mutate-batch-v1-job", {"matchLabels": {"team": "gpu"}}, None),
    "mpod.kb.io": ("https://127.0.0.1:9443/mutate--v1-pod", {"matchLabels": {"team": "gpu"}}, None),
}
JOBSET_POD_SELECTOR = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
JOBSET_EXPECTED = {
    "mclusterqueue.kb.io": ("https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", None, None),
    "mjob.kb.io": ("https://127.0.0.1:9443/mutate-batch-v1-job", None, None),
    "mpod.kb.io": ("https://127.0.0.1:9443/mutate--v1-pod", None, JOBSET_POD_SELECTOR),
}


@pytest.mark.parametrize(("prefix", "managed", "jobset_pods", "expected"), [
    ("kueue-", ("team", "gpu"), False, KUEUE_EXPECTED),
    ("jobset-", None, True, JOBSET_EXPECTED),
])
def test_the_release_webhooks_are_called_at_the_host_process(
        prefix: str, managed: tuple[str, str] | None, jobset_pods: bool,
        expected: dict[str, tuple[str, Any, Any]]) -> None:
    (installed,) = point_at_host([MUTATING], prefix, 9443, "Q0E=", managed, jobset_pods)
    assert installed["metadata"]["name"] == f"{prefix}mutating-webhook-configuration"
    got = {h["name"]: (h["clientConfig"]["url"], h.get("namespaceSelector"), h.get("objectSelector"))
           for h in installed["webhooks"]}
    assert got == expected
    assert all(h["clientConfig"] == {"url": expected[h["name"]][0], "caBundle": "Q0E="}
               for h in installed["webhooks"])
    assert "url" not in MUTATING["webhooks"][0]["clientConfig"], "the release's objects are left as read"


def test_only_the_named_crds_get_the_conversion_webhook() -> None:
    crds = [{"metadata": {"name": n}, "spec": {"group": "kueue.x-k8s.io"}}
            for n in ("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")]
    out = with_conversion(crds, ["workloads.kueue.x-k8s.io"], 9443, "Q0E=")
    assert out[0]["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="},
        "conversionReviewVersions": ["v1"]}}
    assert "conversion" not in out[1]["spec"]


def test_kueue_and_jobset_build_right_after_the_control_plane_they_run_on() -> None:
    steps = [(s.stage, s.component, s.version) for s in cluster_plan.plan(real_node=False, helm=False)]
    at = steps.index(("stack", "kueue", "v0.19.2"))
    assert steps[at + 1] == ("stack", "jobset", "v0.10.1")
    assert steps[at - 1][0] == "1.37"


@pytest.mark.parametrize(("args", "code", "said"), [
    (("stack", "up"), 2, "stack up needs --dir"),
    (("stack", "up", "--dir", "{tmp}"), 1, "holds no running cluster"),
    (("stack", "up", "--dir", "{tmp}", "--managed-label", "no-value"), 1, "--managed-label wants KEY=VALUE"),
    (("stack", "up", "--dir", "{tmp}", "--device-class-mapping", "gpu"), 1, "wants RESOURCE=CLASS"),
    (("stack", "start", "--dir", "{tmp}"), 2, "invalid choice"),
])
def test_the_stack_needs_a_running_cluster_and_says_so(
        tmp_path: Path, args: tuple[str, ...], code: int, said: str) -> None:
    proc = subprocess.run([sys.executable, str(HACK / "cluster"), *(a.format(tmp=tmp_path) for a in args)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == code and said in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("status", "body", "ready"), [
    (200, {"status": {"conditions": None}}, False),  # just created: its controller has not run
    (200, {"status": None}, False),
    (200, {}, False),
    (404, None, False),
    (200, {"status": {"conditions": [{"type": "Established", "status": "True"}]}}, True),
])
def test_a_crd_is_established_only_once_its_condition_says_so(status: int, body: Any, ready: bool) -> None:
    from cluster_stack import established
    assert established(lambda method, path, obj: (status, body), "x.example.com") is ready
