"""What each claim asks for, resolved before the search starts, as upstream validates it.

One `Wanted` per request without subrequests and one per subrequest. Problems that
make a claim impossible to handle (a missing DeviceClass, a constraint of an unknown
kind, more than 32 results) are `AllocationError`s: upstream fails the whole
allocation with an error rather than reporting "no devices".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from operators.allocator.inventory import Candidate
from operators.model import (
    DeviceClass,
    DeviceConstraint,
    DeviceToleration,
    ModelError,
    RequestSpec,
    ResourceClaim,
)

# resource.k8s.io/v1 AllocationResultsMaxSize: results one claim's allocation may hold.
ALLOCATION_RESULTS_MAX_SIZE = 32


class AllocationError(Exception):
    """The allocation cannot be attempted or must stop (upstream returns an error)."""


class NodeFailure(AllocationError):
    """An error of this node only (1.38's `All` over a pool being updated or invalid):
    upstream lets kube-scheduler try the other nodes and reports it only when none fits."""


@dataclass(eq=False, slots=True)
class Wanted:
    """One request (or subrequest) to satisfy. `all_devices` is set in `All` mode."""

    claim_index: int
    request_index: int
    sub_index: int  # -1: a request without subrequests
    base: str  # the claim's request name
    sub: str  # the subrequest name, "" if none
    spec: RequestSpec
    device_class: DeviceClass
    count: int
    tolerations: tuple[DeviceToleration, ...]
    all_devices: list[Candidate] | None = None
    match_cache: dict[object, bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The result's `request`: `main` or `main/sub`."""
        return f"{self.base}/{self.sub}" if self.sub else self.base

    @property
    def admin_access(self) -> bool:
        return self.spec.admin_access if self.sub_index < 0 else False

    @property
    def all_mode(self) -> bool:
        return self.spec.allocation_mode == "All"


def claim_label(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


def extra_tolerations(claim: ResourceClaim) -> tuple[tuple[DeviceToleration, ...], str | None]:
    """The claim's annotation tolerations, and the problem if they cannot be read (they
    then tolerate nothing: a typo never lets a claim onto a tainted device)."""
    try:
        return claim.annotation_tolerations(), None
    except ModelError as e:
        return (), f"{e.path}: {e.message}"


def wanted_for_claim(
    claim_index: int, claim: ResourceClaim, classes: Mapping[str, DeviceClass],
    prepare: Callable[[Wanted], None] | None = None,
) -> list[list[Wanted]]:
    """Per request, its alternatives in the order to try them (one for `exactly`).

    `prepare` runs on each as soon as it is built, so that its errors come in the
    order upstream reports them (a later request's missing class after an earlier
    request's `All` problem)."""
    label = claim_label(claim)
    annotation, _ = extra_tolerations(claim)
    out: list[list[Wanted]] = []
    for ri, request in enumerate(claim.requests):
        alts: list[Wanted] = []
        for si, (result_name, spec) in enumerate(request.alternatives()):
            sub = result_name.partition("/")[2]
            cls = classes.get(spec.device_class_name)
            shown = sub or result_name
            if spec.unsupported:
                raise AllocationError(
                    f"claim {label}, request {shown}: uses {', '.join(spec.unsupported)}, "
                    "which draco does not support; it allocates no such claim rather than "
                    "ignore the field")
            if cls is None:
                raise AllocationError(
                    f"claim {label}, request {shown}: could not retrieve device class "
                    f"{spec.device_class_name}: deviceclass.resource.k8s.io "
                    f'"{spec.device_class_name}" not found'
                )
            tols = tuple(dict.fromkeys(spec.tolerations + annotation))
            w = Wanted(claim_index, ri, si if sub else -1, request.name, sub, spec, cls,
                       spec.count, tols)
            if prepare is not None:
                prepare(w)
            alts.append(w)
        if not alts:
            raise AllocationError(f"claim {label}, request {request.name}: nothing requested")
        out.append(alts)
    return out


def check_constraints(claim: ResourceClaim) -> tuple[DeviceConstraint, ...]:
    """matchAttribute or distinctAttribute, exactly one per constraint (the API's rule)."""
    for i, c in enumerate(claim.constraints):
        if (c.match_attribute is None) == (c.distinct_attribute is None):
            raise AllocationError(
                f"claim {claim_label(claim)}, constraint #{i}: empty constraint "
                "(unsupported constraint type?)"
            )
    return claim.constraints
