"""The pinned helm for the chart tests: built once by `hack/cluster build-helm`, cached."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "draco"
ALL_ENABLED = Path(__file__).resolve().parent / "values-all-enabled.yaml"
CERT_MANAGER = Path(__file__).resolve().parent / "values-cert-manager.yaml"


@functools.cache
def helm() -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "hack" / "cluster"), "build-helm"],
                          capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster build-helm failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def run_helm(*args: str, check: bool = True, timeout: float = 120,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([helm(), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@functools.cache
def template(*args: str, release: str = "draco", namespace: str = "draco-system") -> str:
    """`helm template` (cached per arguments: the chart does not change during a run,
    except the webhook certificates, which each test reads from one rendering)."""
    return run_helm("template", release, str(CHART), "--namespace", namespace, *args).stdout


def objects(rendered: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"{len(hits)} {kind} objects named {name!r}"
    return hits[0]
