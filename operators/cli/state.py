"""Building the tracker the view commands read, from files or from the cluster.

The view commands share the controllers' tracker and overlays, so what `draco devices`
shows is exactly the device view the controllers act on.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from operators.cli.inputs import CLUSTER_SOURCES, load_cluster_objects, load_objects
from operators.cli.output import FORMATS, warn
from operators.model import ModelError, NamespacedName, ObjectRef
from operators.model.objects import ref_of
from operators.tracker import Tracker
from operators.tracker.overlay import Overlay

# Kinds that matter to no view: accepted in --from files without a complaint.
IGNORED_KINDS = frozenset({
    "Node", "Namespace", "Event", "ConfigMap", "Secret", "ServiceAccount", "Lease",
    "PodDisruptionBudget", "ResourceClaimTemplate", "CustomResourceDefinition", "Deployment",
    "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Service", "DeviceHealthPolicy",
})


def standard_overlays() -> list[Overlay]:
    """The overlays every controller and view uses, in composition order.

    Patches come first (they change attributes), taints after (they add taints).
    """
    overlays: list[Overlay] = []
    try:
        from operators.tracker.slice_patches import SlicePatchOverlay
    except ImportError:  # pragma: no cover - only while the patches layer is absent
        pass
    else:
        overlays.append(SlicePatchOverlay())
    try:
        from operators.tracker.taint_rules import TaintRuleOverlay
    except ImportError:  # pragma: no cover
        pass
    else:
        overlays.append(TaintRuleOverlay())
    from operators.tracker.gangs import GangOverlay
    overlays.append(GangOverlay())  # no device effect: the gangs the allocator and narrowing read
    return overlays


def add_source_options(parser: argparse.ArgumentParser, *, formats: Iterable[str] = FORMATS) -> None:
    parser.add_argument(
        "--from", dest="sources", action="append", default=[], metavar="FILE",
        help="read objects from FILE (YAML or JSON, multi-document or a List; "
             "repeat once per file; '-' is stdin) instead of the current kubeconfig's cluster",
    )
    parser.add_argument("-o", "--output", choices=tuple(formats), default="table",
                        help="output format (default: table)")


def error_record(ref: ObjectRef, message: str) -> dict[str, str]:
    name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return {"object": f"{ref.kind or 'object'}/{name}", "message": message}


def build_tracker(
    objects: Iterable[dict[str, Any]],
    *,
    clock: Callable[[], datetime] | None = None,
    overlays: Iterable[Overlay] | None = None,
) -> Tracker:
    tracker = Tracker(clock=clock) if clock is not None else Tracker()
    for overlay in standard_overlays() if overlays is None else overlays:
        tracker.register_overlay(overlay)
    with tracker.batch():
        for obj in objects:
            kind = obj.get("kind")
            if isinstance(kind, str) and kind in IGNORED_KINDS:
                continue
            try:
                tracker.apply({"type": "ADDED", "object": obj})
            except Exception as exc:  # noqa: BLE001 - one object must not take the view down
                ref = ref_of(obj)
                tracker.errors[ref] = ModelError(
                    ref, "", f"draco could not process this object ({type(exc).__name__}: {exc}); "
                             "this is a bug in draco, please report it")
    return tracker


def tracker_errors(tracker: Tracker) -> list[dict[str, str]]:
    errors: list[ModelError] = list(tracker.errors.values())
    records = [error_record(e.ref, f"{e.path}: {e.message}" if e.path else e.message)
               for e in errors]
    return sorted(records, key=lambda r: (r["object"], r["message"]))


def load_state(
    args: argparse.Namespace, *, clock: Callable[[], datetime] | None = None
) -> tuple[Tracker, list[dict[str, Any]]]:
    """The tracker for `--from` files or the live cluster, plus the raw objects read."""
    objects = source_objects(args)
    return build_tracker(objects, clock=clock), objects


# Kinds that live in a namespace: in a --from file without one, they are in "default",
# where `kubectl apply -f` would create them.
NAMESPACED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod", "Gang", "PodGroup",
                              "PodDisruptionBudget", "Event", "ConfigMap", "Secret", "Deployment",
                              "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Service",
                              "ServiceAccount", "Lease"})
DEFAULT_NAMESPACE = "default"


def default_namespace() -> str:
    """Where names and objects without a namespace are: "default", or the namespace
    `kubectl draco -n NS` was given (DRACO_NAMESPACE), as kubectl reads a bare NAME."""
    return os.environ.get("DRACO_NAMESPACE") or DEFAULT_NAMESPACE


def object_key(text: str) -> NamespacedName | None:
    """NAMESPACE/NAME, or NAME alone in `default_namespace()`; None when malformed."""
    ns, sep, name = text.partition("/")
    if not sep:
        ns, name = default_namespace(), text
    if not name or "/" in name or not ns:
        return None
    return NamespacedName(ns, name)


def default_namespaces(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for obj in objects:
        md = obj.get("metadata")
        if obj.get("kind") in NAMESPACED_KINDS and isinstance(md, dict) and not md.get("namespace"):
            md["namespace"] = default_namespace()
    return objects


def source_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The objects of the `--from` files, or of the live cluster (warnings on stderr)."""
    if args.sources:
        return default_namespaces(load_objects(args.sources))
    objects, warnings = load_cluster_objects(CLUSTER_SOURCES)
    for w in warnings:
        warn(w)
    return objects


def rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """`--now` values: RFC 3339 with `Z` or an offset; naive times are taken as UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {text!r}") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
