"""Every failure a user can cause is one line naming the problem, with exit code 2 for
bad usage and 1 for input or a cluster that cannot be used; never a traceback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.apiserver.testing import EmbeddedCluster
from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "cluster.yaml")


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str) -> None:
    assert "Traceback" not in err
    assert not re.search(r"\{'|<[a-zA-Z_.]+ object at 0x|Retry\(total", err), err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err


# (argv, words the message must contain) — all bad usage: exit 2.
BAD_USAGE: list[tuple[list[str], str]] = [
    (["evictions", "--from", CLUSTER, "--grace-period", "1e400"], "--grace-period: must be a finite number"),
    (["evictions", "--from", CLUSTER, "--grace-period", "nan"], "--grace-period: must be a finite number"),
    (["evictions", "--from", CLUSTER, "--grace-period", "1e15"], "--grace-period: must be at least 0"),
    (["evictions", "--from", CLUSTER, "--grace-period", "-5"], "--grace-period: must be at least 0"),
    (["evictions", "--from", CLUSTER, "--grace-period", "soon"], "--grace-period: not a number"),
    (["evictions", "--from", CLUSTER, "--now", "yesterday"], "--now: not an RFC 3339 time"),
    (["run", "--qps", "0"], "--qps: must be greater than 0"),
    (["run", "--qps", "-1"], "--qps: must be greater than 0"),
    (["run", "--qps", "inf"], "--qps: must be a finite number"),
    (["run", "--burst", "0"], "--burst: must be between 1"),
    (["run", "--eviction-workers", "0"], "--eviction-workers: must be between 1"),
    (["run", "--eviction-workers", "-3"], "--eviction-workers: must be between 1"),
    (["run", "--eviction-workers", "2.5"], "--eviction-workers: not a whole number"),
    (["run", "--grace-period", "-5"], "--grace-period: must be at least 0"),
    (["run", "--metrics-port", "99999"], "--metrics-port: must be between 0 and 65535"),
    (["run", "--controllers", "eviction,scheduler"], "unknown controller(s) scheduler"),
    (["apiserver", "--port", "99999"], "--port: must be between 0 and 65535"),
    (["apiserver", "--port", "-1"], "--port: must be between 0 and 65535"),
    (["taint", "rack=r1", "k:NoSchedule"], "bad selector 'rack=r1'"),
    (["taint", "pool=a", "k:Sometimes"], "unknown effect 'Sometimes'"),
    (["taint", "pool=a", "no-effect"], "bad taint 'no-effect'"),
    (["taint", "pool=a", "a b:NoExecute"], "bad taint 'a b:NoExecute': key: name part must consist of"),
    (["taint", "pool=a", "k=v v:NoExecute"], "bad taint 'k=v v:NoExecute': value: a valid label must"),
    (["taint", "pool=a", "k:NoExecute", "--name", "Bad_Name"], "bad --name 'Bad_Name': a lowercase RFC 1123"),
    (["taint", "", "k:NoSchedule"], "--all"),
    (["devices", "--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_USAGE, ids=[" ".join(a[0][:1] + a[0][-2:]) for a in BAD_USAGE])
def test_bad_usage_is_exit_2_with_one_line(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = invoke(argv, capsys)
    assert code == 2
    assert message in err
    assert_one_line_error(err)


def test_unknown_option_prints_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = invoke(["devices", "--bogus"], capsys)
    assert code == 2 and err.startswith("usage: draco devices ")


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = invoke(["--version"], capsys)
    assert code == 0 and re.fullmatch(r"draco \d+\.\d+\.\d+\S*\n", out)
    code, out, _ = invoke(["--help"], capsys)
    assert code == 0
    assert "allocate" in out and "demo" in out
    # the description names all four controllers `draco run` runs
    for controller in ("device-taint eviction", "resourceslicepatch", "claim allocator", "narrowing"):
        assert controller in " ".join(out.lower().split())
    code, out, _ = invoke(["run", "--help"], capsys)
    assert "--metrics-address" in out and "no metrics server" in out
    help_for_format = out.split("--log-format")[-1]
    assert "json" in help_for_format and "terminal" in help_for_format


@pytest.fixture
def no_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    missing = tmp_path / "nowhere" / "config"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return missing


@pytest.mark.parametrize("argv", [
    ["taint", "pool=node-a", "example.com/maint:NoExecute-"],
    ["taint", "pool=node-a", "example.com/maint:NoExecute-", "--dry-run"],
    ["taint", "pool=node-a", "example.com/maint:NoExecute", "--dry-run"],
    ["devices"],
    ["evictions"],
    ["run"],
])
def test_no_kubeconfig_names_it(argv: list[str], no_kubeconfig: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = invoke(argv, capsys)
    assert code == 1
    assert f"cannot load a kubeconfig from {no_kubeconfig}" in err
    assert_one_line_error(err)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("argv", [["run"], ["devices"], ["taint", "pool=a", "k:NoExecute-"]])
def test_unreachable_cluster_is_one_line(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from operators.apiserver.runner import kubeconfig

    url = f"http://127.0.0.1:{_closed_port()}"
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(url))
    monkeypatch.setenv("KUBECONFIG", str(config))
    code, _, err = invoke(argv, capsys)
    assert code == 1
    assert "cannot reach the" in err and url in err and "Connection refused" in err
    assert_one_line_error(err)


RULE = """apiVersion: resource.draco.dev/v1alpha1
kind: DeviceTaintRule
metadata: {name: node-a-maint}
spec:
  deviceSelector: {pool: node-a}
  taint: {key: example.com/maint, effect: NoExecute}
"""


def test_taint_removal_honours_from_offline(tmp_path: Path, no_kubeconfig: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULE)
    argv = ["taint", "pool=node-a", "example.com/maint:NoExecute-", "--from", CLUSTER, "--from", str(rules)]
    code, out, err = invoke(argv, capsys)
    assert (code, out) == (0, "devicetaintrule.resource.draco.dev/node-a-maint deleted (dry run)\n"), err
    code, _, err = invoke([*argv[:3], "--from", CLUSTER], capsys)
    assert code == 1 and "no DeviceTaintRule with selector pool=node-a and taint example.com/maint:NoExecute" in err
    assert_one_line_error(err)


def test_taint_removal_dry_run_changes_nothing_live(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    cluster.kubectl("apply", "-f", "-", input=RULE)
    code, out, _ = invoke(["taint", "pool=node-a", "example.com/maint:NoExecute-", "--dry-run"], capsys)
    assert code == 0 and out.endswith("deleted (dry run)\n")
    assert cluster.kubectl("get", "dtr", "-o", "name").stdout.strip() == "devicetaintrule.resource.draco.dev/node-a-maint"
    code, out, _ = invoke(["taint", "pool=node-a", "example.com/maint:NoExecute-"], capsys)
    assert code == 0 and out == "devicetaintrule.resource.draco.dev/node-a-maint deleted\n"
    assert cluster.kubectl("get", "dtr", "-o", "name").stdout.strip() == ""


def test_metrics_port_in_use(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = invoke(["run", "--metrics-address", "127.0.0.1", "--metrics-port", str(port)], capsys)
    assert code == 1
    assert f"--metrics-port {port} on 127.0.0.1: Address already in use" in err
    assert_one_line_error(err)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


def _apiserver(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "operators", "apiserver", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def test_apiserver_port_in_use_says_so_before_listening(busy_port: int, tmp_path: Path) -> None:
    proc = _apiserver("--port", str(busy_port), "--kubeconfig-out", str(tmp_path / "k"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "listening" not in proc.stdout
    assert proc.stderr == f"error: --port {busy_port}: cannot listen on 127.0.0.1:{busy_port}: Address already in use\n"
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize(("content", "message"), [
    ("kind: CustomResourceDefinition\napiVersion: apiextensions.k8s.io/v1\nmetadata: {name: x}\nspec: {group: a}\n",
     "bad.yaml: CustomResourceDefinition x: spec.names: required"),
    ("a: [\n", "bad.yaml (line 2): not valid YAML"),
    ("kind: CustomResourceDefinition\nmetadata: {name: things.example.com}\nspec:\n  group: example.com\n"
     "  names: {plural: things, kind: Thing}\n  scope: Galaxy\n  versions: [{name: v1, served: true, storage: true}]\n",
     "bad.yaml: CustomResourceDefinition things.example.com: spec.scope: must be Namespaced or Cluster"),
])
def test_apiserver_names_the_malformed_crd_file(content: str, message: str, tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "bad.yaml").write_text(content)
    proc = _apiserver("--port", "0", "--crds", str(crds), "--kubeconfig-out", str(tmp_path / "k"), cwd=tmp_path)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert_one_line_error(proc.stderr)


def test_apiserver_kubeconfig_out_into_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "k"
    proc = _apiserver("--port", "0", "--kubeconfig-out", str(target), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == f"error: --kubeconfig-out {target}: folder {target.parent} does not exist\n"


def test_unreadable_input_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code, _, err = invoke(["evictions", "--from", str(missing)], capsys)
    assert (code, err) == (1, f"error: {missing}: no such file\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: [\n")
    code, _, err = invoke(["devices", "--from", str(broken)], capsys)
    assert code == 1 and str(broken) in err
    assert_one_line_error(err)


@pytest.mark.parametrize("command", ["devices", "allocate", "evictions"])
def test_the_same_object_twice_in_the_input_is_an_error_naming_both_places(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file given twice, or two files with one slice: the second copy would silently
    replace the first (a user's devices lost without a word)."""
    extra = tmp_path / "again.yaml"
    text = Path(CLUSTER).read_text()
    first_slice = text.index("kind: ResourceSlice")
    extra.write_text("apiVersion: resource.k8s.io/v1\n" + text[first_slice:].split("\n---")[0])
    code, _, err = invoke([command, "--from", CLUSTER, "--from", str(extra)], capsys)
    assert code == 1
    assert_one_line_error(err)
    assert "ResourceSlice.resource.k8s.io node-a-gpu.example.com-x7k2p is in the input twice: " \
           f"{CLUSTER} (document 5) and {extra} (document 1)" in err


class _Refusing:
    """An HTTP server answering /version with 403 for its first REFUSALS requests (a
    kube-apiserver whose RBAC caches are not filled yet), then 200."""

    def __init__(self, refusals: int) -> None:
        import http.server
        import threading

        outer = self
        self.asked = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's spelling
                outer.asked += 1
                ok = outer.asked > refusals
                body = b'{"major": "1", "minor": "37", "gitVersion": "v1.37.2"}' if ok else b"{}"
                self.send_response(200 if ok else 403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.mark.parametrize(("refusals", "passes"), [(2, True), (1000, False)])
def test_draco_run_asks_again_while_the_api_server_refuses_everyone_for_a_moment(
        refusals: int, passes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted kube-apiserver answers 403 until its caches are filled: draco run's
    preflight asks again for a while (a pod would otherwise crash-loop), then gives up
    with the one-line error."""
    from operators.apiserver.runner import kubeconfig
    from operators.cli import run as run_module
    from operators.cli.inputs import ClusterError

    server = _Refusing(refusals)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(server.url))
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setattr(run_module, "DENIED_GRACE_S", 0.5)
    monkeypatch.setattr(run_module, "DENIED_RETRY_S", 0.05)
    try:
        if passes:
            assert run_module.preflight() == server.url
            assert server.asked == refusals + 1
        else:
            with pytest.raises(ClusterError, match=r"refused the credentials .*\(HTTP 403\)"):
                run_module.preflight()
            assert server.asked > 1, "asked again before giving up"
    finally:
        server.server.shutdown()
