"""What the real node's start and its teardown both know: where its state lives, its
name, bridge and processes, and how to tell a live process. A module of its own so that
`cluster_node` (start) and `cluster_node_teardown` (stop) import it and not each other.

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

NODE_DIR = Path(os.environ.get("DRACO_NODE_DIR", "/var/lib/draco-node"))
NODE_NAME = "real-0"
NODE_LABEL = ("draco.dev/real-node", "true")
BRIDGE = "draco0"
POD_SUBNET = "10.88.0.0/24"  # clear of the services (10.0.0.0/24) and kwok's 10.244.0.0/16
CNI_NETWORK = "draco-real"
TEST_DRIVER = "test-driver.cdi.k8s.io"
NODE_PROCESSES = ("dra-test-driver", "kube-proxy", "kubelet", "containerd")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The kernel settings the kubelet writes at start (setupKernelTunables); put back on stop.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
                   "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes")


def process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def node_owner() -> Path | None:
    with contextlib.suppress(OSError):
        return Path((NODE_DIR / "owner").read_text().strip())
    return None


def node_binaries() -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads((NODE_DIR / "binaries.json").read_text()))
    return {}
