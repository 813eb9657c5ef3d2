"""The Dockerfile, parsed (the image is not built in CI): a non-root image running
`draco run`, whose draco is the wheel built from this repository."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chart.helm import ROOT

DOCKERFILE = ROOT / "Dockerfile"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """Instructions with continuation lines joined and comments dropped, split in stages."""
    text = re.sub(r"\\\n", " ", path.read_text())
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op, rest = op.upper(), rest.strip()
        if op == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert m, line
            base = re.sub(r"\$\{(\w+)\}", lambda v: args.get(v[1], v[0]), m[1])
            stages.append(Stage(base, m[2]))
        elif not stages:
            assert op == "ARG", f"{op} before the first FROM"
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            stages[-1].instructions.append((op, rest))
    return args, stages


def test_multi_stage_on_python_311_slim() -> None:
    _, stages = parse(DOCKERFILE)
    assert len(stages) >= 2
    assert all(s.base == "python:3.11-slim" for s in stages)


def test_final_stage_runs_draco_run_as_a_numeric_non_root_user() -> None:
    _, stages = parse(DOCKERFILE)
    final = stages[-1]
    (user,) = final.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: runAsNonRoot needs a numeric, non-zero UID"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert [op for op, _ in final.instructions].index("USER") > max(
        i for i, (op, _) in enumerate(final.instructions) if op == "RUN"), "USER must come after every RUN"
    (entrypoint,) = final.all("ENTRYPOINT")
    (cmd,) = final.all("CMD")
    assert json.loads(entrypoint) == ["draco"]
    assert json.loads(cmd) == ["run"]


def test_the_wheel_built_in_one_stage_is_installed_in_the_final_one() -> None:
    _, stages = parse(DOCKERFILE)
    build = next(s for s in stages[:-1] if any("pip wheel" in r for r in s.all("RUN")))
    wheel_dir = re.search(r"--wheel-dir\s+(\S+)", " ".join(build.all("RUN")))
    assert wheel_dir is not None
    final = stages[-1]
    copies = [c for c in final.all("COPY") if f"--from={build.name}" in c]
    assert copies and wheel_dir[1] in copies[0], "the final stage copies the built wheels"
    install = " ".join(final.all("RUN"))
    assert re.search(rf"pip install --no-index --find-links {re.escape(wheel_dir[1])} draco\b", install)
    # what the build stage copies is what the wheel needs; .dockerignore lets it through
    copied = " ".join(build.all("COPY"))
    for needed in ("pyproject.toml", "README.md", "operators"):
        assert needed in copied


def test_dockerignore_sends_only_what_the_wheel_needs() -> None:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!operators/"} <= set(lines)


def test_the_image_exposes_the_chart_ports() -> None:
    _, stages = parse(DOCKERFILE)
    (exposed,) = stages[-1].all("EXPOSE")
    assert set(exposed.split()) == {"8080", "8081", "9443"}


def _hack_image() -> Any:
    """hack/image (a script without a .py suffix) as a module."""
    loader = importlib.machinery.SourceFileLoader("hack_image", str(ROOT / "hack" / "image"))
    spec = importlib.util.spec_from_loader("hack_image", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "hack"))
    loader.exec_module(module)
    return module


def test_the_dockerfile_and_hack_image_make_the_same_image() -> None:
    """Two recipes, one image: users with Docker build the Dockerfile, the test bed and
    users without a registry run hack/image. What the chart and a user rely on (the
    Python, the user, the entry point, the ports, the environment, the labels) agree."""
    hack = _hack_image()
    args, stages = parse(DOCKERFILE)
    final = stages[-1]
    config = hack.image_config(0)
    # Python: the Dockerfile's base tag and bookworm's python3 (3.11)
    assert args["PYTHON_IMAGE"] == "python:3.11-slim" and hack.SUITE == "bookworm"
    (user,) = final.all("USER")
    assert config.user == user == f"{hack.UID}:{hack.GID}"
    assert config.entrypoint == json.loads(final.all("ENTRYPOINT")[0])
    assert config.cmd == json.loads(final.all("CMD")[0])
    (workdir,) = final.all("WORKDIR")
    assert config.workdir == workdir
    (exposed,) = final.all("EXPOSE")
    assert sorted(config.ports) == sorted(int(p) for p in exposed.split())
    docker_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(final.all("ENV"))))
    image_env = dict(e.split("=", 1) for e in config.env)
    for name in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"):
        assert image_env[name] == docker_env[name], name
    docker_labels = dict(re.findall(r'([\w.]+)="([^"]*)"', " ".join(final.all("LABEL"))))
    assert docker_labels.items() <= config.labels.items()
    # files: both install draco's wheel offline, built from this checkout
    assert '"--find-links", "/tmp/wheels", "draco"' in (ROOT / "hack" / "image").read_text()
