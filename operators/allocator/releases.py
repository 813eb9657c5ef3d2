"""The Kubernetes releases draco answers as: per minor, kube-scheduler's default feature
gates and the allocator behaviour of that release (`features.Semantics`).

draco allocates as the kube-scheduler of the cluster it talks to would with default
gates, so the release comes from the server's `/version` (`release_for_server`), or
from `--kubernetes-version` when there is no server (`--from`). Without either it is
1.37, the release draco anchors on (`DEFAULT_RELEASE`), so nothing changes for those
who never name one.

What each release's gates are was read from `pkg/features/kube_features.go` of
k8s.io/kubernetes at that minor (default at the release's own version); the behaviour
switches from the structured allocator kube-scheduler runs with those gates
(1.36/1.37: the `incubating` variant, 1.38: `stable`, which is 1.37's `incubating`
plus the changes `Semantics` names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from operators.allocator.features import DEFAULT_GATES, FeatureGates, Semantics


@dataclass(frozen=True, slots=True)
class Release:
    minor: int
    gates: FeatureGates  # kube-scheduler's defaults, with the release's semantics

    @property
    def name(self) -> str:
        return f"1.{self.minor}"


# DRAFractionalCapacityRange does not exist before 1.37.
_NEW_IN_137 = frozenset({"DRAFractionalCapacityRange"})


def _alpha_off(release: str) -> FeatureGates:
    """1.34 and 1.35: consumable capacity, binding conditions, device taints and
    partitionable devices alpha (off); admin access and prioritized lists beta (on)."""
    return FeatureGates(consumable_capacity=False, device_binding_conditions=False,
                        device_taints=False, partitionable_devices=False,
                        semantics=Semantics(release=release, unknown=_NEW_IN_137))


_138 = Semantics(
    release="1.38", semver_constraints=True, constraint_errors=True,
    capacity_name_conflicts=True, device_spellings=True, negative_requests_abort=True,
    live_share_blocks_exclusive=True, all_mode_node_failure=True,
    # GA and locked in 1.38 (admin access since 1.36, prioritized lists since 1.37)
    locked=frozenset({"DRAAdminAccess", "DRAPrioritizedList", "DRADeviceBindingConditions",
                      "DRADeviceTaints", "DRAPartitionableDevices"}))

RELEASES: dict[int, Release] = {
    34: Release(34, _alpha_off("1.34")),
    35: Release(35, _alpha_off("1.35")),
    # beta and on: consumable capacity, binding conditions, taints, partitionable devices
    36: Release(36, FeatureGates(semantics=Semantics(release="1.36", unknown=_NEW_IN_137))),
    # DRAFractionalCapacityRange is on only from compatibility version 1.37, and a 1.37
    # kube-scheduler runs at 1.36 by default: off (draco's differential shows it)
    37: Release(37, DEFAULT_GATES),
    # DRAFractionalCapacityRange GA and on
    38: Release(38, FeatureGates(fractional_capacity_range=True, semantics=_138)),
}
DEFAULT_RELEASE = RELEASES[37]
OLDEST, NEWEST = min(RELEASES), max(RELEASES)
assert DEFAULT_RELEASE.gates == DEFAULT_GATES

_VERSION = re.compile(r"v?1\.(\d+)(?:\.\d+)?(?:[-+].*)?")


def parse_release(text: str) -> Release:
    """`1.38`, `v1.38.0-beta.0`, `1.38.2`: the release of that minor; ValueError for a
    minor draco does not know (named, with the ones it does)."""
    match = _VERSION.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a Kubernetes version: {text!r} (expected e.g. 1.38 or v1.38.0)")
    minor = int(match.group(1))
    if minor not in RELEASES:
        raise ValueError(f"Kubernetes 1.{minor} is not a release draco answers as "
                         f"(1.{OLDEST} to 1.{NEWEST})")
    return RELEASES[minor]


def release_for_server(git_version: str) -> tuple[Release, str | None]:
    """The release to answer as for a server reporting GIT_VERSION, and a warning when
    it is not the server's own: draco's embedded server (`-draco`) and an unreadable
    version answer as the default release; a server older or newer than the releases
    draco knows, as the nearest one."""
    if not git_version or git_version.endswith("-draco"):
        return DEFAULT_RELEASE, None
    match = _VERSION.fullmatch(git_version.strip())
    if not match:
        return DEFAULT_RELEASE, (f"server version {git_version!r} is not one draco can read; "
                                 f"allocating as Kubernetes {DEFAULT_RELEASE.name}")
    minor = int(match.group(1))
    if minor in RELEASES:
        return RELEASES[minor], None
    nearest = RELEASES[OLDEST if minor < OLDEST else NEWEST]
    return nearest, (f"server version {git_version} is outside the releases draco knows "
                     f"(1.{OLDEST} to 1.{NEWEST}); allocating as Kubernetes {nearest.name}")


__all__ = ["DEFAULT_RELEASE", "NEWEST", "OLDEST", "RELEASES", "Release", "parse_release",
           "release_for_server"]
