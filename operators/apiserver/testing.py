"""Test helpers around the embedded API server: kubectl, waiting, kopf in a thread."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from operators.apiserver.runner import ServerThread, kubeconfig

T = TypeVar("T")


def kubectl_binary() -> str:
    found = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl is not installed: the API tests drive the real kubectl "
                           "(bash .ci/run installs one when the machine has none)")
    return found


class Kubectl:
    """The real kubectl pointed at one embedded server through its own kubeconfig."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.binary = kubectl_binary()

    def __call__(self, *args: str, input: str | None = None, check: bool = True,
                 timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.config),
               "KUBECACHEDIR": str(self.config.parent / "kube-cache")}
        proc = subprocess.run([self.binary, *args], input=input, capture_output=True, text=True,
                              env=env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc


class EmbeddedCluster:
    """A running embedded server plus the handles tests need."""

    def __init__(self, workdir: Path, crds: list[dict[str, Any]] | None = None) -> None:
        self.thread = ServerThread(crds).start()
        self.url = self.thread.url
        self.kubeconfig = workdir / "kubeconfig"
        self.kubeconfig.write_text(kubeconfig(self.url))
        self.kubectl = Kubectl(self.kubeconfig)

    @property
    def server(self) -> Any:
        return self.thread.server

    def inject(self, group: str, version: str, plural: str, obj: dict[str, Any],
               namespace: str = "") -> dict[str, Any]:
        """Store an object past admission (as a newer client or a bug might have written it)."""
        def put() -> dict[str, Any]:
            rt = self.server.registry.get(group, version, plural)
            assert rt is not None, f"{plural}.{group}/{version} is not served"
            return dict(self.server.store.create(rt, namespace, obj))
        return dict(self.thread.call(put))

    def get(self, group: str, version: str, plural: str, name: str,
            namespace: str = "") -> dict[str, Any] | None:
        def read() -> dict[str, Any] | None:
            rt = self.server.registry.get(group, version, plural)
            return None if rt is None else self.server.store.find(rt, namespace, name)
        result = self.thread.call(read)
        return None if result is None else dict(result)

    def stop(self) -> None:
        self.thread.stop()


def wait_for(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
             what: str = "condition") -> T:
    """Poll until `check()` returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T = check()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
        last = check()
    return last

