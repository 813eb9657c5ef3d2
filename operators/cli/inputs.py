"""Reading Kubernetes objects for the view commands.

Every view command works either offline (`--from FILE`, repeatable) or against the
cluster of the current kubeconfig, and both paths hand the same plain dicts to the
pure layers, so a decision can be reproduced from YAML exactly as the controller
made it live.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml


class InputError(Exception):
    """Input that cannot be read at all; the message names the file and the problem."""


class UsageError(InputError):
    """Arguments that make no sense together: exit code 2, like argparse's own errors."""


class ClusterError(InputError):
    """No usable kubeconfig, or the cluster it names cannot be reached."""


def _documents(text: str, source: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield json.loads(text)
            return
        except json.JSONDecodeError:
            pass  # YAML is a superset of JSON; let the YAML parser give the error
    try:
        yield from yaml.safe_load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or one_line(exc)
        raise InputError(f"{source}{where}: not valid YAML or JSON: {problem}") from exc


def _flatten(doc: Any, source: str, index: int) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, source, index)
        return
    if not isinstance(doc, dict):
        raise InputError(
            f"{source}: document {index + 1} is a {type(doc).__name__}, not a Kubernetes object"
        )
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _flatten(item, source, index)
        return
    yield doc


def parse_text(text: str, source: str) -> list[dict[str, Any]]:
    """All objects in one YAML/JSON text (multi-document, `kind: List` and lists flattened)."""
    return [obj for obj, _ in _located(text, source)]


def _located(text: str, source: str) -> Iterator[tuple[dict[str, Any], str]]:
    for index, doc in enumerate(_documents(text, source)):
        for obj in _flatten(doc, source, index):
            yield obj, f"{source} (document {index + 1})"


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(API group, kind, namespace, name); None for an object without a usable name."""
    md = obj.get("metadata")
    kind, version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(md, dict) or not isinstance(kind, str) or not isinstance(md.get("name"), str):
        return None
    group = version.rpartition("/")[0] if isinstance(version, str) else ""
    return group, kind, str(md.get("namespace") or ""), md["name"]


class _Seen:
    """Where each object of the input came from: the same object twice is an error naming
    both places (the second would silently replace the first)."""

    def __init__(self) -> None:
        self.places: dict[tuple[str, str, str, str], str] = {}

    def add(self, obj: dict[str, Any], where: str) -> None:
        key = _identity(obj)
        if key is None:
            return
        first = self.places.get(key)
        if first is None:
            self.places[key] = where
        else:
            group, kind, ns, name = key
            what = f"{kind}{'.' + group if group else ''} {ns + '/' if ns else ''}{name}"
            raise InputError(f"{what} is in the input twice: {first} and {where}; one would "
                             "replace the other")


def load_objects(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Objects from files (`-` is standard input), in file order.

    Directories are read recursively (`*.yaml`, `*.yml`, `*.json`), as `kubectl apply -f`
    does, so a whole examples folder can be given at once.
    """
    objects: list[dict[str, Any]] = []
    seen = _Seen()

    def take(text: str, source: str) -> None:
        for obj, where in _located(text, source):
            seen.add(obj, where)
            objects.append(obj)

    for raw in paths:
        if raw == "-":
            take(sys.stdin.read(), "<stdin>")
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*") if p.suffix in {".yaml", ".yml", ".json"} and p.is_file()
            )
        else:
            files = [path]
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except FileNotFoundError as exc:
                raise InputError(f"{file}: no such file") from exc
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"{file}: cannot read: {exc}") from exc
            take(text, str(file))
    return objects


# (api path prefix, plural) for everything the views read from a live cluster.
CLUSTER_SOURCES: dict[str, tuple[str, str]] = {
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices"),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses"),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims"),
    "Pod": ("/api/v1", "pods"),
    "Node": ("/api/v1", "nodes"),
    "DeviceTaintRule": ("/apis/resource.draco.dev/v1alpha1", "devicetaintrules"),
    "ResourceSlicePatch": ("/apis/resource.draco.dev/v1alpha1", "resourceslicepatches"),
}


def load_cluster_objects(kinds: Iterable[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """List the given kinds from the current kubeconfig's cluster.

    Returns (objects, warnings): a kind the cluster does not serve (draco's CRDs not
    installed, say) is a warning, not a failure, so the rest of the view still shows.
    """
    from kubernetes.client.rest import ApiException

    api = kube_api()
    objects: list[dict[str, Any]] = []
    warnings: list[str] = []
    for kind in kinds:
        prefix, plural = CLUSTER_SOURCES[kind]
        try:
            method, url, headers, _, _ = api.param_serialize(
                "GET", f"{prefix}/{plural}", header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            resp = api.call_api(method, url, header_params=headers)
            resp.read()
        except ApiException as exc:
            warnings.append(f"cannot list {plural}: {exc.status} {exc.reason}")
            continue
        except Exception as exc:  # noqa: BLE001 - connection errors must name the cluster problem
            raise ClusterError(f"cannot reach the cluster at {api.configuration.host}: "
                               f"{connection_problem(exc)}") from exc
        if resp.status >= 400:
            warnings.append(f"cannot list {plural}: HTTP {resp.status}")
            continue
        try:
            listing = json.loads(resp.data or b"{}")
        except ValueError:
            warnings.append(f"cannot list {plural}: the answer is not JSON")
            continue
        api_version = prefix.removeprefix("/apis/").removeprefix("/api/")
        items = listing.get("items") if isinstance(listing, dict) else None
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            objects.append(item)
    return objects, warnings


def kubeconfig_location() -> str:
    return os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"


def kube_api(hint: str = "set KUBECONFIG, or read objects offline with --from FILE") -> Any:
    """An API client for the current kubeconfig (else the in-cluster service account);
    ClusterError naming the kubeconfig when neither can be loaded."""
    from kubernetes import client, config  # imported lazily: offline mode needs no client

    from operators.kube.client import KUBECONFIG_LOCK

    try:
        # KUBECONFIG read now: the client reads it once, at import.
        with KUBECONFIG_LOCK:
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None,
                                    context=os.environ.get("DRACO_KUBE_CONTEXT") or None)
    except Exception as exc:  # noqa: BLE001 - any config problem is the same user error
        try:
            config.load_incluster_config()
        except Exception:  # noqa: BLE001
            raise ClusterError(
                f"cannot load a kubeconfig from {kubeconfig_location()}: {one_line(exc)} ({hint})") from exc
    return client.ApiClient()


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def connection_problem(exc: BaseException) -> str:
    """The reason inside urllib3's nested connection errors (`Connection refused`), not
    their reprs of Python objects."""
    text = str(exc)
    found = re.findall(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if found:
        return found[-1].strip()
    for marker in ("timed out", "Name or service not known", "certificate verify failed"):
        if marker in text:
            return marker
    return one_line(exc)
