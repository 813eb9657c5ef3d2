"""Pre-releases the Go module proxy serves only in part: the toolchain they ask for, and
stand-ins for the few modules they need that the proxy refuses.

Kubernetes 1.38.0-beta.0 is served as `k8s.io/kubernetes` and as most of its staging
modules, but the proxy answers 403 for two of them and for one pinned dependency:

- `k8s.io/apiextensions-api` (new in 1.38; kube-apiserver and kube-controller-manager
  import it). The k8s.io/kubernetes module zip cannot stand in: a module zip leaves out
  every folder with its own go.mod, so its `staging/` is empty. What 1.38 moved into this
  module is the external API of CustomResourceDefinitions (`pkg/apis/apiextensions/v1`
  and `v1beta1`: types, defaults, deep copies, protobuf) and their generated client,
  which until 1.37 lived in `k8s.io/apiextensions-apiserver`; 0.38's
  apiextensions-apiserver keeps the conversions to its internal types and aliases of the
  moved names. The stand-in is those packages of the served apiextensions-apiserver
  v0.37.2 without the conversion files, their import paths moved to the new module.
  One declaration is added: the JSON `null` literal the moved `marshal.go` files compare
  with, which 0.37.2 declared in a conversion file.
  Checked before adopting it (docs/development/test-bed.md): 0.38's internal CRD types
  differ from 0.37.2's only in comments, 0.38's generated conversions (which name every
  field of the external types) compile against it, and 0.38 keeps the OpenAPI model names
  (`io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.*`) the 0.37.2 files carry.
- `sigs.k8s.io/structured-merge-diff/v7` v7.0.1: pinned to the served v7.0.0.

Each stand-in is used only after the proxy refused the real module at the version asked
for, so once the release (or an rc) is served in full the build takes it unchanged.
Standard library only.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The go command fetches these from the module proxy (GOTOOLCHAIN=<version>); the other
# minors build with the local Go (GOTOOLCHAIN=local).
TOOLCHAINS = {"1.38": "go1.27.3"}


@dataclass(frozen=True)
class Assembled:
    """A module the proxy refuses, assembled from the packages an older served module
    held before a release moved them out."""

    module: str
    source: str
    source_version: str
    packages: tuple[str, ...]  # moved package roots (their subpackages move with them)
    left_behind: tuple[str, ...]  # file names that stay with the source module
    rewrites: tuple[tuple[str, str], ...] = ()  # other import paths the new release moved
    # (package, Go source) written as ADDED_FILE: what a carried file needs from a file
    # that stays behind.
    additions: tuple[tuple[str, str], ...] = ()
    # Generated client packages made again by the release's own code-generator (its
    # templates change between releases), from the moved API packages: (client-gen's
    # --input-base, its --input group/versions, clientset, listers, informers folders).
    client: tuple[str, tuple[str, ...], str, str, str] | None = None
    # The source folder that becomes the new module's root ("" keeps the paths).
    root: str = ""


ASSEMBLED = {
    "k8s.io/apiextensions-api": Assembled(
        module="k8s.io/apiextensions-api",
        source="k8s.io/apiextensions-apiserver",
        source_version="v0.37.2",
        packages=("pkg/apis/apiextensions/v1", "pkg/apis/apiextensions/v1beta1",
                  "pkg/client/applyconfiguration", "pkg/client/clientset/clientset",
                  "pkg/client/informers/externalversions", "pkg/client/listers"),
        # Conversions to the internal types: 0.38 keeps them in apiextensions-apiserver.
        left_behind=("conversion.go", "zz_generated.conversion.go"),
        rewrites=(("sigs.k8s.io/structured-merge-diff/v6", "sigs.k8s.io/structured-merge-diff/v7"),),
        # marshal.go compares with the JSON null literal that conversion.go declares.
        additions=tuple((f"pkg/apis/apiextensions/{version}",
                         f"package {version}\n\nvar nullLiteral = []byte(`null`)\n")
                        for version in ("v1", "v1beta1")),
        # As apiextensions-apiserver's hack/update-codegen.sh calls kube_codegen.sh's
        # gen_client (with watch, protobuf); the apply configurations are carried as they
        # are (applyconfiguration-gen's output for these types is the same in 0.37 and 0.38).
        client=("pkg/apis", ("apiextensions/v1", "apiextensions/v1beta1"),
                "pkg/client/clientset", "pkg/client/listers", "pkg/client/informers"),
    ),
}
ASSEMBLED["k8s.io/ktesting"] = Assembled(
    # 1.38 made k8s.io/kubernetes's test/utils/ktesting a staging module of its own; only
    # upstream's allocator suite (hack/upstream_allocator.py) needs it, not the cluster.
    module="k8s.io/ktesting",
    source="k8s.io/kubernetes",
    source_version="v1.37.2",
    root="test/utils/ktesting",
    packages=("test/utils/ktesting",),
    left_behind=(),
    # The one method 0.38's allocator suite calls that 1.37.2's copy lacks (its
    # "deadline" interrupt case), in terms of the WithTimeout that copy has: a deadline
    # already past cancels at once, with the cause given.
    additions=(("", "package ktesting\n\nimport \"time\"\n\n"
                    "func (tCtx TContext) WithDeadline(deadline time.Time, deadlineCause string) TContext {\n"
                    "\treturn tCtx.WithTimeout(time.Until(deadline), deadlineCause)\n}\n"),),
)
# Non-staging requirements the proxy refuses: module -> {asked version: served stand-in}.
PINNED = {"sigs.k8s.io/structured-merge-diff/v7": {"v7.0.1": "v7.0.0"}}
# Where an assembled stand-in goes inside the wrapper module (a `replace` to a folder).
STANDIN_DIR = "standin"
ADDED_FILE = "zz_draco_standin.go"

REFUSALS = ("403 Forbidden", "404 Not Found", "410 Gone", "not available",
            "unknown revision", "invalid version")


def refused(error: str) -> bool:
    """Whether a `go mod download` error is the proxy saying it has no such version (as
    opposed to a network or toolchain failure, which must stop the build)."""
    return any(marker in error for marker in REFUSALS)


def refused_by_proxy(module: str, version: str, workdir: Path, env: dict[str, str]) -> bool:
    """Whether the proxy refuses MODULE@VERSION (a stand-in is then needed); served: False.
    Any other failure to ask is no answer at all and stops the build."""
    served, answer = probe(module, version, workdir, env)
    if served:
        return False
    if not refused(answer):
        raise RuntimeError(f"cannot ask the module proxy for {module}@{version}: {answer}")
    return True


def requirements(gomod: str) -> dict[str, str]:
    """The `require` lines of a go.mod text: module -> version."""
    found: dict[str, str] = {}
    block = False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("require ("):
            block = True
            continue
        if block and line == ")":
            block = False
            continue
        if line.startswith("require "):
            line = line[len("require "):].strip()
        elif not block:
            continue
        parts = line.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def go_directive(gomod: str) -> str | None:
    match = re.search(r"^go\s+(\S+)\s*$", gomod, re.M)
    return match.group(1) if match else None


def rewrite_imports(text: str, assembled: Assembled) -> str:
    """Move the quoted import paths of the moved packages (and the other moves the new
    release made) to their new module; every other path is left as it is."""
    if assembled.root:
        moved = re.compile(rf'"{re.escape(assembled.source)}/{re.escape(assembled.root)}(/[^"]*)?"')
        text = moved.sub(lambda m: f'"{assembled.module}{m.group(1) or ""}"', text)
    else:
        roots = "|".join(re.escape(p) for p in assembled.packages)
        moved = re.compile(rf'"{re.escape(assembled.source)}/({roots})(/[^"]*)?"')
        text = moved.sub(lambda m: f'"{assembled.module}/{m.group(1)}{m.group(2) or ""}"', text)
    for old, new in assembled.rewrites:
        text = re.sub(rf'"{re.escape(old)}(/[^"]*)?"', rf'"{new}\1"', text)
    return text


def carried(name: str, assembled: Assembled) -> bool:
    """Whether a file of a moved package goes into the stand-in (sources, not tests, not
    what stays behind)."""
    return name.endswith(".go") and not name.endswith("_test.go") and name not in assembled.left_behind


def assemble(assembled: Assembled, source_dir: Path, target: Path, staging_version: str,
             go_line: str) -> list[str]:
    """Write the stand-in module into TARGET from the source module's folder; returns the
    packages written. Fails if a carried file still imports the source module (a package
    the list missed)."""
    shutil.rmtree(target, ignore_errors=True)
    written = []
    for root in assembled.packages:
        for folder in sorted(p for p in [source_dir / root, *(source_dir / root).rglob("*")]
                             if p.is_dir()):
            files = [f for f in sorted(folder.iterdir()) if f.is_file() and carried(f.name, assembled)]
            if not files:
                continue
            relative = folder.relative_to(source_dir / assembled.root)
            (target / relative).mkdir(parents=True, exist_ok=True)
            for file in files:
                text = rewrite_imports(file.read_text(), assembled)
                left = [m.group(0) for m in
                        re.finditer(rf'"{re.escape(assembled.source)}(/[^"]*)?"', text)]
                if left:
                    raise ValueError(f"{relative / file.name} still imports {left[0]}; "
                                     f"the stand-in for {assembled.module} misses a package")
                (target / relative / file.name).write_text(text)
                (target / relative / file.name).chmod(0o644)
            written.append(str(relative))
    for package, source in assembled.additions:
        (target / package / ADDED_FILE).write_text(source)
    header = source_dir / "hack" / "boilerplate.go.txt"
    if header.is_file():
        (target / "boilerplate.go.txt").write_text(header.read_text())
    (target / "go.mod").write_text(standin_gomod(assembled.module, staging_version, go_line))
    return written


def client_commands(assembled: Assembled, gobin: Path, header: Path) -> list[list[str]]:
    """The code-generator runs that make the stand-in's client (from the wrapper module's
    folder, which replaces the stand-in's module with its folder)."""
    if assembled.client is None:
        return []
    base, inputs, clientset, listers, informers = assembled.client
    folder = f"{STANDIN_DIR}/{assembled.module}"
    module = assembled.module
    apis = [f"{module}/{base}/{gv}" for gv in inputs]
    common = ["--go-header-file", str(header), "--plural-exceptions", ""]
    return [
        [str(gobin / "client-gen"), *common, "--output-dir", f"{folder}/{clientset}",
         "--output-pkg", f"{module}/{clientset}", "--clientset-name", "clientset",
         "--apply-configuration-package", f"{module}/pkg/client/applyconfiguration",
         "--input-base", f"{module}/{base}", "--prefers-protobuf=true",
         *[arg for gv in inputs for arg in ("--input", gv)]],
        [str(gobin / "lister-gen"), *common, "--output-dir", f"{folder}/{listers}",
         "--output-pkg", f"{module}/{listers}", *apis],
        [str(gobin / "informer-gen"), *common, "--output-dir", f"{folder}/{informers}",
         "--output-pkg", f"{module}/{informers}",
         "--versioned-clientset-package", f"{module}/{clientset}/clientset",
         "--listers-package", f"{module}/{listers}", *apis],
    ]


def regenerate_clients(targets: dict[str, str], staging_version: str, workdir: Path,
                       env: dict[str, str], log: Path) -> None:
    """Make the generated clients of the assembled stand-ins in TARGETS again with
    k8s.io/code-generator at the release's staging version. Run after the wrapper's
    go.mod exists (the generators load the stand-in through its `replace`)."""
    for module in targets:
        assembled = ASSEMBLED.get(module)
        if assembled is None or assembled.client is None:
            continue
        folder = workdir / STANDIN_DIR / module
        gobin = workdir / "codegen-bin"
        tools = [f"k8s.io/code-generator/cmd/{tool}@{staging_version}"
                 for tool in ("client-gen", "lister-gen", "informer-gen")]
        install_env = dict(env, GOBIN=str(gobin), GOFLAGS="-buildvcs=false")
        commands = [(["go", "install", *tools], install_env)]
        commands += [(command, env) for command in client_commands(assembled, gobin,
                                                                   folder / "boilerplate.go.txt")]
        _base, _inputs, clientset, listers, informers = assembled.client
        for generated in (clientset, listers, informers):
            shutil.rmtree(folder / generated, ignore_errors=True)
        for command, command_env in commands:
            with open(log, "a") as out:
                out.write(f"$ {' '.join(command)}\n")
                out.flush()
                proc = subprocess.run(command, cwd=workdir, env=command_env, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"making the client of the {module} stand-in failed: "
                                   f"`{' '.join(command[:2])} …` (log: {log})")


def standin_gomod(module: str, staging_version: str, go_line: str) -> str:
    """The stand-in's go.mod: its siblings at the release's staging version (the wrapper
    replaces them with the served ones); the rest is resolved by `-mod=mod`."""
    siblings = ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go")
    lines = [f"module {module}", "", f"go {go_line}", "", "require ("]
    lines += [f"\t{mod} {staging_version}" for mod in siblings]
    lines.append(")")
    return "\n".join(lines) + "\n"


def probe(module: str, version: str, workdir: Path, env: dict[str, str]) -> tuple[bool, str]:
    """(served, Dir or error) for MODULE@VERSION through the module proxy."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=workdir,
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        return False, proc.stderr.strip() or f"exit {proc.returncode}"
    if info.get("Error"):
        return False, str(info["Error"])
    return True, str(info.get("Dir", ""))


def standins(kubernetes_gomod: str, staged: list[str], staging_version: str, workdir: Path,
             env: dict[str, str], say: Callable[[str], None] = print) -> dict[str, str]:
    """The wrapper's extra `replace` targets for this release: a folder for each staged
    module the proxy refuses and that has a stand-in, a served version for each pinned
    requirement the proxy refuses. Modules the proxy serves get nothing here."""
    targets: dict[str, str] = {}
    go_line = go_directive(kubernetes_gomod) or "1.24.0"
    for module in staged:
        assembled = ASSEMBLED.get(module)
        if assembled is None:
            continue
        if not refused_by_proxy(module, staging_version, workdir, env):
            continue
        ok, source_dir = probe(assembled.source, assembled.source_version, workdir, env)
        if not ok:
            raise RuntimeError(f"cannot download {assembled.source}@{assembled.source_version}: "
                               f"{source_dir}")
        folder = f"./{STANDIN_DIR}/{module}"
        assemble(assembled, Path(source_dir), workdir / folder, staging_version, go_line)
        say(f"{module}@{staging_version} is refused by the proxy; standing in: "
            f"{assembled.source}@{assembled.source_version}'s {', '.join(assembled.packages)}")
        targets[module] = folder
    required = requirements(kubernetes_gomod)
    for module, pins in PINNED.items():
        asked = required.get(module)
        if asked not in pins:
            continue
        if not refused_by_proxy(module, asked, workdir, env):
            continue
        say(f"{module}@{asked} is refused by the proxy; pinned to {pins[asked]}")
        targets[module] = pins[asked]
    return targets
