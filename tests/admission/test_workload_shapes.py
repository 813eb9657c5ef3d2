"""Reading Kueue v0.19.2's Workload (v1beta2) as its Go types define it: the compressed
TAS assignment, PodSet defaults, admitted counts, check states, and clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from operators.admission.workload import (
    TopologyDomain,
    WorkloadError,
    our_checks,
    parse_workload,
    topology_domains,
)
from tests.admission.kueue import admission_check, gpu_template, hosts, pod_set, workload

H = "kubernetes.io/hostname"
B = "cloud.provider.com/topology-block"

# (case, topologyAssignment, expected [(labels, pods)])
TAS: list[tuple[str, dict[str, Any], list[tuple[tuple[tuple[str, str], ...], int]]]] = [
    ("hostname level, individual roots and counts", hosts(("n-1", 2), ("n-2", 1))["topologyAssignment"],
     [(((H, "n-1"),), 2), (((H, "n-2"),), 1)]),
    ("a universal value and a universal count",
     {"levels": [B, H], "slices": [{"domainCount": 2, "valuesPerLevel": [
         {"universal": "b1"}, {"individual": {"roots": ["x", "y"]}}], "podCounts": {"universal": 3}}]},
     [(((B, "b1"), (H, "x")), 3), (((B, "b1"), (H, "y")), 3)]),
    ("prefix and suffix around the roots",
     {"levels": [H], "slices": [{"domainCount": 2, "valuesPerLevel": [
         {"individual": {"prefix": "node-", "suffix": "-gpu", "roots": ["1", "2"]}}],
         "podCounts": {"individual": [1, 4]}}]},
     [(((H, "node-1-gpu"),), 1), (((H, "node-2-gpu"),), 4)]),
    ("slices add up, in order",
     {"levels": [H], "slices": [
         {"domainCount": 1, "valuesPerLevel": [{"universal": "a"}], "podCounts": {"universal": 2}},
         {"domainCount": 1, "valuesPerLevel": [{"universal": "b"}], "podCounts": {"universal": 1}}]},
     [(((H, "a"),), 2), (((H, "b"),), 1)]),
]


@pytest.mark.parametrize(("ta", "expected"), [c[1:] for c in TAS], ids=[c[0] for c in TAS])
def test_tas_assignments_expand_to_domains(ta: dict[str, Any],
                                           expected: list[tuple[tuple[tuple[str, str], ...], int]]) -> None:
    assert topology_domains(ta) == tuple(TopologyDomain(labels, pods) for labels, pods in expected)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("no levels", {"levels": [], "slices": []}, "levels: must name at least one level"),
    ("both universal and individual",
     {"levels": [H], "slices": [{"domainCount": 1, "valuesPerLevel": [
         {"universal": "a", "individual": {"roots": ["a"]}}], "podCounts": {"universal": 1}}]},
     "valuesPerLevel[0]: exactly one of universal, individual must be set"),
    ("roots shorter than domainCount",
     {"levels": [H], "slices": [{"domainCount": 2, "valuesPerLevel": [
         {"individual": {"roots": ["a"]}}], "podCounts": {"universal": 1}}]},
     "individual.roots: has 1 values for domainCount 2"),
    ("values for another number of levels",
     {"levels": [B, H], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "a"}],
                                     "podCounts": {"universal": 1}}]},
     "valuesPerLevel: has 1 entries for 2 levels"),
    ("a pod count of zero",
     {"levels": [H], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "a"}],
                                 "podCounts": {"individual": [0]}}]},
     "podCounts.individual[0]: must be at least 1, not 0"),
]


@pytest.mark.parametrize(("ta", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_unreadable_assignments_name_the_field(ta: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as e:
        topology_domains(ta)
    assert message in str(e.value)


def test_a_domain_matches_nodes_by_label_or_by_name_for_the_hostname() -> None:
    d = TopologyDomain(((B, "b1"), (H, "n-1")), 1)
    assert d.matches("n-1", {B: "b1"})
    assert d.matches("other", {B: "b1", H: "n-1"})
    assert not d.matches("n-1", {B: "b2"})
    assert not d.matches("n-1", {})


def test_the_workload_as_the_check_reads_it() -> None:
    raw = workload("w", [pod_set("launcher", 1), pod_set("x", 4)],
                   assignments={"x": {"count": 3, **hosts(("n-1", 3))}})
    raw["spec"]["podSets"][1].pop("name")  # Kueue's default name is "main"
    raw["status"]["admission"]["podSetAssignments"][1]["name"] = "main"
    wl = parse_workload(raw)
    assert [(p.name, p.count) for p in wl.pod_sets] == [("launcher", 1), ("main", 3)]
    assert wl.pod_sets[1].topology == (TopologyDomain(((H, "n-1"),), 3),)
    assert wl.pod_sets[0].flavors == ("default",)
    assert wl.quota_reserved and wl.over is None
    assert wl.check("draco-devices") is not None and wl.check("draco-devices").state == "Pending"  # type: ignore[union-attr]
    unreserved = parse_workload(workload("w", [pod_set("a", 1)], quota=False))
    assert not unreserved.quota_reserved and unreserved.over == "its quota reservation is gone"
    finished = parse_workload(workload("w", [pod_set("a", 1)], conditions=[
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""}]))
    assert finished.over == "finished"
    evicted = parse_workload(workload("w", [pod_set("a", 1)], conditions=[
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": ""}]))
    assert evicted.over == "evicted"


def test_unreadable_workloads_name_the_field() -> None:
    raw = workload("w", [pod_set("a", 1)])
    raw["spec"]["podSets"][0]["count"] = "two"
    with pytest.raises(WorkloadError, match=r"spec.podSets\[0\].count: must be an integer"):
        parse_workload(raw)
    raw = workload("w", [pod_set("a", 1)])
    raw["status"]["admissionChecks"][0]["state"] = "Maybe"
    with pytest.raises(WorkloadError, match=r"status.admissionChecks\[0\].state: unknown state 'Maybe'"):
        parse_workload(raw)


def test_only_checks_of_draco_s_controller_name_are_its() -> None:
    assert our_checks([admission_check("a"), admission_check("b", "kueue.x-k8s.io/provisioning-request"),
                       gpu_template()]) == frozenset({"a"})
