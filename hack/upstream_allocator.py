"""Upstream's allocator test suite (`allocatortesting`) run against draco.

    python3 hack/upstream_allocator.py build VERSION        # the suite's test binary (cached)
    python3 hack/upstream_allocator.py run VERSION [--json FILE] [--draco BIN]
    python3 hack/upstream_allocator.py cel VERSION FILE     # upstream's CEL table as JSON

`k8s.io/dynamic-resource-allocation` is fetched through the Go module proxy at VERSION.
Its `allocatortesting` package is internal, so the module is copied into a scratch
folder of the test bed's cache, `hack/allocator-suite/draco_adapter_test.go` and the
compat file for that version (`compat_v036_test.go` up to 0.37, `compat_v038_test.go`
from 0.38) are placed beside upstream's own allocators (`structured/internal/draco`),
and the test binary is built there. Nothing of upstream's is copied into draco's
repository. From 0.38 draco answers as that release (`--kubernetes-version 1.38`);
0.36 and 0.37 run against draco's default release, 1.37.

Two hooks are added to the scratch copy of `allocatortesting` (each edit must match
upstream's text exactly once, else the build fails and says so): cases that expect an
error are compared on the verdict alone, not on upstream's wording, and upstream's
internal step counts (`expectNumAllocateOneInvocations`) are not compared, so those
cases are compared on their results instead of being skipped.

Standard library only, like the rest of the test bed's builds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cluster_build import (
    ClusterError,
    build_component,
    cache_root,
    go_env,
    module_dir,
    replace_line,
    run_go,
    say,
)
from cluster_standins import ASSEMBLED, TOOLCHAINS, requirements, standins

MODULE = "k8s.io/dynamic-resource-allocation"
# The releases draco supports, as the module's versions (v0.37.2 belongs to 1.37.2).
# 1.38's is its served beta: the modules the proxy refuses are stood in for as in
# hack/cluster_standins.py (none of them is code under test).
VERSIONS = {"1.38": "v0.38.0-beta.0", "1.37": "v0.37.2", "1.36": "v0.36.3"}
# Pre-releases the suite builds and runs on request, outside CI and the test bed's plan.
PREVIEWS: dict[str, str] = {}
ADAPTER = Path(__file__).resolve().parent / "allocator-suite" / "draco_adapter_test.go"
COMPAT = {"v0.36": "compat_v036_test.go", "v0.37": "compat_v036_test.go",
          "v0.38": "compat_v038_test.go"}
# The release draco answers as, per module version (none: draco's default, 1.37).
RELEASE_OF = {"v0.38.0-beta.0": "1.38"}
KNOWN = Path(__file__).resolve().parent / "allocator-suite" / "known.json"
COMPONENT = "upstream-allocator"
SUITE = "allocatortesting"

HOOKS = """package allocatortesting

// Added by draco's hack/upstream_allocator.py to its scratch copy (never upstream's).
var (
\tDracoErrorVerdictOnly bool
\tDracoIgnoreStepCounts bool
)
"""
# (upstream's text, what replaces it): each must occur exactly once.
EDITS = (
    ("\t\t\tg.Expect(err).To(matchError)\n",
     "\t\t\tif DracoErrorVerdictOnly && tc.expectError != nil && err != nil {\n"
     "\t\t\t\tt.Logf(\"DRACO-VERDICT-ONLY: %v\", err)\n"
     "\t\t\t} else {\n"
     "\t\t\t\tg.Expect(err).To(matchError)\n"
     "\t\t\t}\n"),
    ("tc.expectNumAllocateOneInvocations > 0 && !ok {",
     "tc.expectNumAllocateOneInvocations > 0 && !ok && !DracoIgnoreStepCounts {"),
    ("expectNumAllocateOneInvocations := tc.expectNumAllocateOneInvocations; "
     "expectNumAllocateOneInvocations > 0 {",
     "expectNumAllocateOneInvocations := tc.expectNumAllocateOneInvocations; "
     "expectNumAllocateOneInvocations > 0 && !DracoIgnoreStepCounts {"),
)


# 0.38 checks the error through the test context and adds an errors.Is check; both are
# the wording-level comparison the verdict-only hook leaves out.
EDITS_038 = (
    ("\t\t\ttCtx.Require(err).To(matchError)\n"
     "\t\t\tif tc.expectErrorIs != nil {\n"
     "\t\t\t\ttCtx.Require(err).To(g.MatchError(tc.expectErrorIs))\n"
     "\t\t\t}\n",
     "\t\t\tif DracoErrorVerdictOnly && tc.expectError != nil && err != nil {\n"
     "\t\t\t\ttCtx.Logf(\"DRACO-VERDICT-ONLY: %v\", err)\n"
     "\t\t\t} else {\n"
     "\t\t\t\ttCtx.Require(err).To(matchError)\n"
     "\t\t\t\tif tc.expectErrorIs != nil {\n"
     "\t\t\t\t\ttCtx.Require(err).To(g.MatchError(tc.expectErrorIs))\n"
     "\t\t\t\t}\n"
     "\t\t\t}\n"),
    *EDITS[1:],
    # 0.38 hands the allocator its own slice type; the hook remembers each slice's API
    # object so that draco is asked with what an API server would store
    ("\t\tout[i] = &o\n\t}\n\treturn out\n}\n",
     "\t\tout[i] = &o\n\t\tDracoOriginals.Store(out[i], in[i])\n\t}\n\treturn out\n}\n"),
)
HOOKS_038 = HOOKS.replace("package allocatortesting\n", "package allocatortesting\n\n"
                          "import \"sync\"\n") + """
// DracoOriginals maps each converted slice to the API object it came from.
var DracoOriginals sync.Map
"""
EDITS_BY_VERSION = {"v0.38.0-beta.0": EDITS_038}
HOOKS_BY_VERSION = {"v0.38.0-beta.0": HOOKS_038}


def compat_file(version: str) -> Path:
    """The adapter's version-specific part for module VERSION."""
    minor = ".".join(version.split(".")[:2])
    return ADAPTER.parent / COMPAT.get(minor, "compat_v038_test.go")


def patch_suite(source: Path, edits: tuple[tuple[str, str], ...] = EDITS,
                hooks: str = HOOKS) -> None:
    """Add the hooks to allocatortesting in the scratch copy SOURCE."""
    suite = source / "structured" / "internal" / SUITE
    target = suite / "allocator_testing.go"
    text = target.read_text()
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise ClusterError(f"{target}: expected upstream's text once, found it {count} times "
                               f"(the suite changed; update hack/upstream_allocator.py): {old!r}")
        text = text.replace(old, new)
    target.write_text(text)
    (suite / "draco_hooks.go").write_text(hooks)


def stand_in(source: Path, version: str, toolchain: str) -> None:
    """Replace, in the scratch copy SOURCE, each requirement the proxy refuses by its
    stand-in (none where the proxy serves the real module)."""
    gomod = (source / "go.mod").read_text()
    required = requirements(gomod)
    wanted = [module for module in ASSEMBLED if required.get(module) == version]
    try:
        targets = standins(gomod, wanted, version, source, go_env(toolchain), say)
    except (RuntimeError, ValueError) as err:
        raise ClusterError(str(err)) from None
    if targets:
        lines = [replace_line(module, target) for module, target in targets.items()]
        (source / "go.mod").write_text(gomod + "\nreplace (\n" + "\n".join(lines) + "\n)\n")


def adapter_version(version: str = "") -> str:
    """Part of the cache key: a changed adapter, compat file, edit or hook rebuilds the
    binary. The same for every VERSION (hack/cluster_plan.py asks without one)."""
    import hashlib
    del version
    digest = hashlib.sha256(ADAPTER.read_bytes())
    for name in sorted(set(COMPAT.values())):
        digest.update((ADAPTER.parent / name).read_bytes())
    digest.update(repr(EDITS).encode())
    digest.update(HOOKS.encode())
    for key in sorted(EDITS_BY_VERSION):
        digest.update(repr(EDITS_BY_VERSION[key]).encode())
        digest.update(HOOKS_BY_VERSION.get(key, HOOKS).encode())
    return digest.hexdigest()[:10]


def scratch_copy(version: str, work: Path, log: Path) -> tuple[Path, str]:
    """A writable copy of the module at VERSION in WORK, its refused requirements stood
    in for, and the Go toolchain that builds it."""
    (work / "go.mod").write_text("module draco.invalid/fetch\n\ngo 1.24.0\n")
    toolchain = TOOLCHAINS.get("1." + version.split(".")[1], "local")  # v0.38.x -> 1.38
    pristine = module_dir(MODULE, version, work, log, toolchain)
    source = work / "src"
    shutil.copytree(pristine, source)
    for path in source.rglob("*"):  # the module cache's files are read-only
        path.chmod(path.stat().st_mode | 0o200)
    source.chmod(source.stat().st_mode | 0o200)
    if toolchain != "local":
        stand_in(source, version, toolchain)
    return source, toolchain


def build(version: str) -> Path:
    """The suite's test binary for VERSION of the module (built once, then cached)."""
    def steps(work: Path, out: Path, log: Path) -> None:
        source, toolchain = scratch_copy(version, work, log)
        patch_suite(source, EDITS_BY_VERSION.get(version, EDITS),
                    HOOKS_BY_VERSION.get(version, HOOKS))
        adapter = source / "structured" / "internal" / "draco"
        adapter.mkdir()
        shutil.copy(ADAPTER, adapter / ADAPTER.name)
        compat = compat_file(version)
        shutil.copy(compat, adapter / compat.name)
        # -trimpath as every Go build of the test bed: the build cache keys a package by
        # it, so the Kubernetes build of the same minor and this one share what they compile
        run_go(["test", "-c", "-trimpath", "-o", str(out / "suite.test"), "./structured/internal/draco"],
               source, log, toolchain)
        shutil.rmtree(source, ignore_errors=True)
    built = build_component(COMPONENT, f"{version}-{adapter_version(version)}", steps)
    for stale in cache_root().glob(f"{COMPONENT}-{version}-*"):  # an older adapter's binary
        if stale != built and (stale / ".stamp").exists():
            shutil.rmtree(stale, ignore_errors=True)
    return built


CEL_EXPORT = ADAPTER.parent / "draco_cel_export_test.go"
CEL_COMPONENT = "upstream-cel"


def export_cel(version: str, into: Path) -> list[dict[str, object]]:
    """Upstream's CEL table (`cel/compile_test.go`, TestCEL's cases) at VERSION, as JSON
    objects; the test binary that writes it is built once and cached."""
    import hashlib

    def steps(work: Path, out: Path, log: Path) -> None:
        source, toolchain = scratch_copy(version, work, log)
        shutil.copy(CEL_EXPORT, source / "cel" / CEL_EXPORT.name)
        run_go(["test", "-c", "-trimpath", "-o", str(out / "cel.test"), "./cel"], source, log, toolchain)
        shutil.rmtree(source, ignore_errors=True)
    key = hashlib.sha256(CEL_EXPORT.read_bytes()).hexdigest()[:10]
    binary = build_component(CEL_COMPONENT, f"{version}-{key}", steps) / "cel.test"
    proc = subprocess.run([str(binary), "-test.run", "^TestDracoExport$"], cwd=binary.parent,
                          env=dict(go_env(), DRACO_CEL_EXPORT=str(into)), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)
    if proc.returncode != 0 or not into.exists():
        raise ClusterError(f"exporting upstream's CEL table at {version} failed (exit "
                           f"{proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    cases = json.loads(into.read_text())
    assert isinstance(cases, list)
    return cases


@dataclass
class Case:
    name: str
    result: str = "run"  # pass, fail, skip
    verdict_only: bool = False
    output: list[str] = field(default_factory=list)


def run(version: str, draco: str, timeout: float = 1200) -> dict[str, Case]:
    """Every case of the suite at VERSION against DRACO (`draco` executable), by name."""
    binary = build(version) / "suite.test"
    env = dict(go_env(), DRACO_BIN=str(Path(shutil.which(draco) or draco).resolve()))
    if version in RELEASE_OF:
        env["DRACO_KUBERNETES_VERSION"] = RELEASE_OF[version]
    proc = subprocess.run(
        ["go", "tool", "test2json", "-t", str(binary), "-test.v=test2json",
         "-test.run", "^(TestAllocator|TestLexicographicalAllocator)$"],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout,
        cwd=binary.parent)
    cases: dict[str, Case] = {}
    for line in proc.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test = event.get("Test") or ""
        if "/" not in test:  # the two top-level tests: their verdict is their cases'
            continue
        case = cases.setdefault(test, Case(test))
        action = event.get("Action")
        if action == "output":
            text = event.get("Output", "")
            case.output.append(text)
            if "DRACO-VERDICT-ONLY" in text:
                case.verdict_only = True
        elif action in ("pass", "fail", "skip"):
            case.result = action
    # A case that has subtests of its own (interrupt/off, ...) counts by its subtests.
    parents = {name.rsplit("/", 1)[0] for name in cases if name.count("/") > 1}
    for name in parents:
        cases.pop(name, None)
    if not cases:
        raise ClusterError(f"the suite at {version} ran no case (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    return cases


def known() -> dict[str, dict[str, str]]:
    """The table of cases that do not pass, per version: case -> why (the reason's text)."""
    data = json.loads(KNOWN.read_text())
    reasons = data.get("reasons", {})
    return {version: {case: reasons.get(key, key) for case, key in cases.items()}
            for version, cases in data.get("cases", {}).items()}


def summary(cases: dict[str, Case]) -> dict[str, int]:
    out = {"pass": 0, "fail": 0, "skip": 0, "verdict_only": 0}
    for case in cases.values():
        out[case.result] = out.get(case.result, 0) + 1
        out["verdict_only"] += case.verdict_only and case.result == "pass"
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="hack/upstream_allocator.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the suite's test binary for VERSION (cached)")
    b.add_argument("version", choices=sorted({*VERSIONS.values(), *PREVIEWS.values()}))
    r = sub.add_parser("run", help="run the suite against draco; one line per case that "
                       "does not pass")
    r.add_argument("version", choices=sorted({*VERSIONS.values(), *PREVIEWS.values()}))
    r.add_argument("--draco", default=shutil.which("draco") or "draco")
    r.add_argument("--json", default=None, metavar="FILE", help="write every case's result")
    c = sub.add_parser("cel", help="write upstream's CEL table (TestCEL) at VERSION as JSON")
    c.add_argument("version", choices=sorted({*VERSIONS.values(), *PREVIEWS.values()}))
    c.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build(args.version) / "suite.test")
            return 0
        if args.command == "cel":
            print(f"{len(export_cel(args.version, args.file.resolve()))} cases -> {args.file}")
            return 0
        cases = run(args.version, args.draco)
    except (ClusterError, subprocess.TimeoutExpired) as exc:
        print(f"hack/upstream_allocator.py: {exc}", file=sys.stderr)
        return 1
    table = known().get(args.version, {})
    for case in sorted(cases.values(), key=lambda c: c.name):
        if case.result == "fail":
            print(f"FAIL {case.name}" + (f"  (listed: {table[case.name]})"
                                         if case.name in table else ""))
        elif case.result == "skip":
            why = next((line.strip() for line in case.output if "SKIP" in line), "")
            print(f"SKIP {case.name}  {why}")
    print(json.dumps(summary(cases)))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {name: {"result": c.result, "verdictOnly": c.verdict_only, "output": "".join(c.output)}
             for name, c in sorted(cases.items())}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

