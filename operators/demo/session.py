"""One run of the demo: a cluster (embedded or real), draco's controllers, the steps,
the summary, and the cleanup.

The controllers and draco's view commands are handed in by `operators.cli.demo`
(`Hooks`), so the demo runs exactly what `draco run` runs without this package
importing the command line.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

import yaml

from operators.demo import scenario as sc
from operators.demo.api import KINDS, Api, ApiError
from operators.demo.logfile import to_file
from operators.demo.narrate import Narrator
from operators.demo.steps import STEPS, Context, Step, StepFailed, Views
from operators.demo.usage import measure

DEFAULT_STEP_TIMEOUT = 20.0
CRDS = ("devicetaintrules.resource.draco.dev", "resourceslicepatches.resource.draco.dev")
# Cluster-scoped kinds the demo creates on a real cluster, removed in this order.
CLUSTER_KINDS = ("DeviceTaintRule", "ResourceSlicePatch", "ResourceSlice", "DeviceClass", "Node")


class DemoError(Exception):
    """The demo cannot start or run at all (no cluster, unreadable kubeconfig...)."""


class Controllers(Protocol):
    native_id: int | None

    def stop(self) -> None: ...


@dataclass
class Hooks:
    controllers: Sequence[str]
    start_controllers: Callable[[Sequence[str]], Controllers]
    views: Views


@dataclass
class Options:
    keep: bool = False
    cluster_dir: Path | None = None
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    steps: Sequence[Step] = STEPS


class Embedded:
    """draco's embedded API server in a thread of this process."""

    real = False

    def __init__(self, workdir: Path, names: sc.Names) -> None:
        self.workdir, self.names = workdir, names
        self.thread: Any = None
        self.kubeconfig = workdir / "kubeconfig"

    def start(self) -> str:
        from operators.apiserver.runner import ServerThread, kubeconfig

        try:
            self.thread = ServerThread().start()
        except Exception as exc:  # noqa: BLE001 - a port or CRD problem, in one line
            raise DemoError(f"the embedded API server did not start: {exc}") from exc
        config = yaml.safe_load(kubeconfig(self.thread.url, context="draco-demo"))
        config["contexts"][0]["context"]["namespace"] = self.names.namespace
        self.kubeconfig.write_text(yaml.safe_dump(config))
        return str(self.thread.url)

    def prepare(self, api: Api) -> None:
        api.create(sc.namespace(self.names))

    def describe(self) -> str:
        return "draco's embedded API server (in memory; no scheduler, no kubelets)"

    def bind(self, namespace: str, pod: str, node: str) -> None:
        """What kube-scheduler's binding does, written straight into the server's store:
        the embedded server serves no pods/binding and refuses nodeName in pod updates."""
        server = self.thread.server

        def write() -> None:
            rt = server.registry.get("", "v1", "pods")
            current = server.store.get(rt, namespace, pod)
            updated = {**current, "spec": {**current["spec"], "nodeName": node}}
            server.store.update(rt, namespace, pod, updated, check_rv=False)
        self.thread.call(write)

    def cleanup(self, api: Api, say: Narrator) -> None:
        """Nothing to remove: the server's memory goes with it."""

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()


class Real:
    """A cluster started by `hack/cluster up --dir DIR`, in a namespace of the demo's own."""

    real = True

    def __init__(self, workdir: Path, names: sc.Names, cluster_dir: Path) -> None:
        self.workdir, self.names, self.dir = workdir, names, cluster_dir
        self.kubeconfig = workdir / "kubeconfig"
        self.installed_crds: list[str] = []

    def start(self) -> str:
        source = self.dir / "kubeconfig"
        try:
            config = yaml.safe_load(source.read_text())
            config["contexts"][0]["context"]["namespace"] = self.names.namespace
        except FileNotFoundError as exc:
            raise DemoError(f"--cluster-dir {self.dir}: no kubeconfig there (start a cluster with "
                            f"`hack/cluster up --k8s 1.34 --dir {self.dir} --nodes 2`)") from exc
        except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError) as exc:
            raise DemoError(f"{source}: not a kubeconfig draco can use: {' '.join(str(exc).split())}") from exc
        self.kubeconfig.write_text(yaml.safe_dump(config))
        return str(config["clusters"][0]["cluster"].get("server", "?"))

    def prepare(self, api: Api) -> None:
        status, _ = api.request("GET", "/version")
        if status != 200:
            raise DemoError(f"the API server at {api.host} answered /version with HTTP {status}")
        self._install_crds(api)
        for kind in CLUSTER_KINDS:  # an earlier demo kept with --keep, or interrupted
            for obj in api.list(kind, selector=sc.LABEL_SELECTOR):
                api.delete(kind, obj["metadata"]["name"])
        for ns in api.list("Namespace", selector=sc.LABEL_SELECTOR):
            api.delete("Namespace", ns["metadata"]["name"])
        api.create(sc.namespace(self.names))

    def _install_crds(self, api: Api) -> None:
        from operators.apiserver.runner import PACKAGED_CRDS, read_crds

        for crd in read_crds([PACKAGED_CRDS]):
            name = crd["metadata"]["name"]
            if api.get("CustomResourceDefinition", name) is None:
                api.create(crd)
                self.installed_crds.append(name)

        def established(name: str) -> bool:
            conds = ((api.get("CustomResourceDefinition", name) or {}).get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)

        deadline = time.monotonic() + 30
        while not all(established(n) for n in self.installed_crds):
            if time.monotonic() > deadline:
                raise DemoError(f"draco's CRDs were not Established within 30 s: {', '.join(self.installed_crds)}")
            time.sleep(0.2)

    def describe(self) -> str:
        return f"the cluster of {self.dir} (kube-scheduler binds the pods, kwok plays the kubelets)"

    def cleanup(self, api: Api, say: Narrator) -> None:
        """Remove what the demo made, while the controllers still run (they may hold finalizers)."""
        api.delete("Namespace", self.names.namespace)
        left: list[str] = []
        for kind in CLUSTER_KINDS:
            for obj in api.list(kind, selector=sc.LABEL_SELECTOR):
                api.delete(kind, obj["metadata"]["name"])
                left.append(f"{kind}/{obj['metadata']['name']}")
        deadline = time.monotonic() + 30
        while left and time.monotonic() < deadline:
            left = [k for k in left if api.get(k.split("/")[0], k.split("/", 1)[1]) is not None]
            time.sleep(0.2)
        for name in self.installed_crds:
            api.delete("CustomResourceDefinition", name)
        removed = "the demo's namespace and cluster-scoped objects"
        if self.installed_crds:
            removed += " and draco's CRDs (the demo installed them)"
        if left:
            say.line(f"warning: still there after 30 s: {', '.join(left)}")
        else:
            say.line(f"Cleaned up {removed}.")

    def stop(self) -> None:
        """The cluster is the user's: it keeps running."""


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def follow_along(say: Narrator, kubeconfig: Path, names: sc.Names, keep: bool, kubectl: str) -> None:
    say.line("Follow along in another terminal" + ("" if keep else " (--keep leaves it running to look around)") + ":")
    ns = names.namespace
    draco = draco_command()
    say.verbatim("\n".join([
        f"export KUBECONFIG={kubeconfig}",
        f"{kubectl} get resourceclaims,pods -n {ns} -o wide",
        f"{kubectl} get resourceslices,deviceclasses,resourceslicepatches,devicetaintrules",
        f"{kubectl} wait --for=condition=EvictionInProgress=false devicetaintrule/{sc.RULE} --timeout=60s",
        f"{draco} devices; {draco} allocate; {draco} evictions",
    ]), indent="")


def draco_command() -> str:
    """draco as another terminal can run it: that terminal has not activated this venv,
    so the full path of the `draco` script next to this Python (or `python -m operators`)."""
    script = Path(sys.executable).parent / "draco"
    return str(script) if script.exists() else f"{sys.executable} -m operators"


def kubectl_for(cluster_dir: Path | None) -> str:
    """`kubectl`, or the one `hack/cluster` built when none is on PATH."""
    import json
    import shutil

    if cluster_dir is None or shutil.which("kubectl"):
        return "kubectl"
    try:
        return str(json.loads((cluster_dir / "cluster.json").read_text())["kubectl"])
    except (OSError, ValueError, KeyError, TypeError):
        return "kubectl"


def run_demo(options: Options, hooks: Hooks, out: TextIO) -> int:
    """The whole demo; the exit code (0 every step happened, 1 one did not, 130 Ctrl-C)."""
    say = Narrator(out)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="draco-demo-"))
    log_path = workdir / "draco.log"
    sink = to_file(log_path)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    # Ctrl-C interrupts even where the parent shell ignored SIGINT (a background job).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    names = sc.Names() if options.cluster_dir is None else sc.Names(namespace=f"draco-demo-{uuid.uuid4().hex[:5]}")
    cluster: Embedded | Real = (Embedded(workdir, names) if options.cluster_dir is None
                                else Real(workdir, names, options.cluster_dir))
    api: Api | None = None
    controllers: Controllers | None = None
    done = 0
    code = 1
    try:
        url = cluster.start()
        os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
        try:
            api = Api(str(cluster.kubeconfig))
        except Exception as exc:  # noqa: BLE001 - any kubeconfig defect, in one line
            raise DemoError(f"{cluster.kubeconfig}: not a kubeconfig draco can use: "
                            f"{' '.join(str(exc).split())[:300]}") from exc
        cluster.prepare(api)
        say.line(f"draco demo: draco's controllers on {cluster.describe()}")
        say.table([("API server", url),
                   ("controllers", f"{', '.join(hooks.controllers)} (as `draco run` runs them)"),
                   ("kubeconfig", f"{cluster.kubeconfig} (namespace {names.namespace})"),
                   ("logs", f"{log_path} (the controllers' JSON logs)")], indent="  ")
        say.line()
        follow_along(say, cluster.kubeconfig, names, options.keep, kubectl_for(options.cluster_dir))
        controllers = hooks.start_controllers(hooks.controllers)
        threads = {"controllers": controllers.native_id}
        if isinstance(cluster, Embedded) and cluster.thread is not None:
            threads["API server"] = cluster.thread._thread.native_id
        at_start = measure(threads)
        ctx = Context(api=api, names=names, real=cluster.real, say=say, views=hooks.views,
                      timeout=options.step_timeout,
                      bind=cluster.bind if isinstance(cluster, Embedded) else None)
        for number, step in enumerate(options.steps, 1):
            say.step(number, len(options.steps), step.title)
            try:
                step.run(ctx)
            except StepFailed as exc:
                say.failed(str(exc))
                say.line()
                sys.stderr.write(f"error: draco demo failed at step {number}/{len(options.steps)} ({step.title}): "
                                 f"it did not happen as narrated. The controllers' logs: {log_path}\n")
                return 1
            done += 1
        usage = measure(threads)
        say.line()
        say.line(f"draco demo passed: {done}/{len(options.steps)} steps in {time.monotonic() - started:.1f} s, "
                 f"each checked against the API server. draco's resource use: {usage.summary(at_start)}.")
        code = 0
        if options.keep:
            say.line("Still running (--keep): the API server and the controllers stay up. Ctrl-C stops them.")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        if code == 0:
            say.line("Stopped.")
        else:
            say.line(f"\nInterrupted after {done} step(s).")
            code = 130
    except (DemoError, ApiError) as exc:
        sys.stderr.write(f"error: draco demo: {exc}\n")
        code = 1
    finally:
        try:
            _finish(cluster, api, controllers, say, options.keep)
        except KeyboardInterrupt:
            pass
        except ApiError as exc:
            say.line(f"warning: cleanup incomplete: {exc}")
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        sink.flush()
    return code


def _finish(cluster: Embedded | Real, api: Api | None, controllers: Controllers | None,
            say: Narrator, keep: bool) -> None:
    try:
        if api is not None and not keep:
            cluster.cleanup(api, say)
        elif api is not None and cluster.real:
            kinds = ",".join(KINDS[k][1] for k in ("Namespace", *CLUSTER_KINDS))
            say.line(f"Kept (--keep): remove it all with kubectl delete {kinds} -l {sc.LABEL_SELECTOR}")
    finally:
        if controllers is not None:
            controllers.stop()
        cluster.stop()
        if api is not None:
            api.close()
