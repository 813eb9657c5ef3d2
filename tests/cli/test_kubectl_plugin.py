"""`kubectl draco`: found by the real kubectl's plugin discovery, driven with kubectl's
own connection flags (`--kubeconfig`, `--context`, `-n`) anywhere on the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from operators.apiserver.runner import kubeconfig
from operators.apiserver.testing import EmbeddedCluster, kubectl_binary
from operators.cli.kubectl_plugin import PluginUsage, split

BIN = Path(sys.executable).parent  # where pip put kubectl-draco beside draco


def test_connection_flags_in_every_form_become_the_environment() -> None:
    env, rest = split(["devices", "--context", "c1", "-o", "json", "-nteam-a",
                       "--kubeconfig=/tmp/k", "--from", "x.yaml"])
    assert env == {"DRACO_KUBE_CONTEXT": "c1", "DRACO_NAMESPACE": "team-a", "KUBECONFIG": "/tmp/k"}
    assert rest == ["devices", "-o", "json", "--from", "x.yaml"]
    assert split(["allocate", "-n", "b", "--", "--context", "x"]) == (
        {"DRACO_NAMESPACE": "b"}, ["allocate", "--", "--context", "x"])
    for bad in (["devices", "--context"], ["devices", "--namespace="]):
        with pytest.raises(PluginUsage):
            split(bad)


def plugin(*args: str, path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "DRACO_NAMESPACE")}
    env["PATH"] = path
    env["HOME"] = str(cwd)  # no ~/.kube/config of the machine's
    return subprocess.run([kubectl_binary(), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60, check=False)


def test_the_real_kubectl_finds_and_runs_the_plugin(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    # two contexts: the current one points nowhere, --context picks the embedded server
    config = yaml.safe_load(kubeconfig(cluster.url, "draco"))
    broken = yaml.safe_load(kubeconfig("https://127.0.0.1:1", "broken"))
    for key in ("clusters", "users", "contexts"):
        config[key] += broken[key]
    config["current-context"] = "broken"
    path = tmp_path / "two-contexts.yaml"
    path.write_text(yaml.safe_dump(config))
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                  "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "train", "namespace": "team-a"},
         "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}]))
    search = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    listed = plugin("plugin", "list", path=search, cwd=tmp_path)
    assert "kubectl-draco" in listed.stdout, listed.stdout + listed.stderr
    devices = plugin("draco", "devices", "--kubeconfig", str(path), "--context", "draco", "-o", "json",
                     path=search, cwd=tmp_path)
    assert devices.returncode == 0, devices.stderr
    assert "gpu-0" in devices.stdout
    allocated = plugin("draco", "allocate", "-n", "team-a", "--claim", "train", "-o", "json",
                       f"--kubeconfig={path}", "--context=draco", path=search, cwd=tmp_path)
    assert allocated.returncode == 0, allocated.stderr
    record = json.loads(allocated.stdout)["claims"]["team-a/train"]
    assert record["status"] == "allocated" and record["results"][0]["device"] == "gpu-0"
    # the broken current context, as kubectl would use it: a clear error, no traceback
    failed = plugin("draco", "devices", "--kubeconfig", str(path), path=search, cwd=tmp_path)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert "error:" in failed.stderr
    run = plugin("draco", "run", path=search, cwd=tmp_path)
    assert run.returncode == 2 and "unknown command 'run'" in run.stderr
