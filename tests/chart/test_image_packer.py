"""hack/image's packer (hack/image_oci.py): the same folder gives the same digest, and
what it writes is an OCI layout and a docker archive that name the same manifest."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path

from tests.chart.helm import ROOT

sys.path.insert(0, str(ROOT / "hack"))
import image_oci  # noqa: E402

CONFIG = image_oci.ImageConfig(user="65532:65532", entrypoint=["draco"], cmd=["run"],
                               env=["PATH=/opt/draco/bin:/usr/bin"], workdir="/tmp", ports=[8081, 8080],
                               labels={"org.opencontainers.image.title": "draco"})


def tree(root: Path, stamp: float) -> Path:
    (root / "opt" / "draco" / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    script = root / "opt" / "draco" / "bin" / "draco"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").symlink_to("python3.11")
    os.link(script, root / "opt" / "draco" / "bin" / "kubectl-draco")
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (stamp, stamp))
    return root


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_two_builds_of_one_tree_are_one_digest_whatever_the_files_times(tmp_path: Path) -> None:
    a = image_oci.build(tree(tmp_path / "a", 1_000_000), CONFIG, "draco:0.1.0", epoch=1_700_000_000)
    b = image_oci.build(tree(tmp_path / "b", 2_000_000), CONFIG, "draco:0.1.0", epoch=1_700_000_000)
    assert a.manifest == b.manifest and a.blobs == b.blobs
    c = image_oci.build(tree(tmp_path / "c", 1_000_000), CONFIG, "draco:0.1.0", epoch=1_700_000_001)
    assert c.manifest != a.manifest  # the source date is part of what is built


def test_the_layer_is_sorted_with_one_time_numeric_owners_and_links_kept(tmp_path: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(image_oci.layer_tar(tree(tmp_path / "r", 5), 42))) as tar:
        members = tar.getmembers()
    names = [m.name.rstrip("/") for m in members]
    assert names == sorted(names, key=str.encode)
    assert {m.mtime for m in members} == {42}
    assert all(m.uname == "" and m.gname == "" for m in members)
    by = {m.name.rstrip("/"): m for m in members}
    assert by["usr/bin/python3"].issym() and by["usr/bin/python3"].linkname == "python3.11"
    assert by["opt/draco/bin/draco"].mode == 0o755
    linked = by["opt/draco/bin/kubectl-draco"]
    assert linked.islnk() and linked.linkname == "opt/draco/bin/draco"


def test_layout_and_archive_name_one_manifest_and_docker_finds_its_parts(tmp_path: Path) -> None:
    image = image_oci.build(tree(tmp_path / "r", 5), CONFIG, "draco:0.1.0", epoch=7)
    image_oci.write_layout(image, tmp_path / "oci")
    image_oci.write_archive(image, tmp_path / "draco.tar", epoch=7)
    layout = tmp_path / "oci"
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["digest"] == image.manifest
    assert entry["annotations"]["io.containerd.image.name"] == "docker.io/library/draco:0.1.0"
    blob = lambda d: (layout / "blobs" / "sha256" / d.removeprefix("sha256:")).read_bytes()  # noqa: E731
    manifest = json.loads(blob(image.manifest))
    assert sha(blob(image.manifest)) == image.manifest == entry["digest"]
    config = json.loads(blob(manifest["config"]["digest"]))
    assert config["config"]["User"] == "65532:65532" and config["config"]["Entrypoint"] == ["draco"]
    assert config["config"]["Cmd"] == ["run"]
    assert set(config["config"]["ExposedPorts"]) == {"8080/tcp", "8081/tcp"}
    (layer,) = manifest["layers"]
    compressed = blob(layer["digest"])
    assert sha(compressed) == layer["digest"] and len(compressed) == layer["size"]
    assert config["rootfs"]["diff_ids"] == [sha(gzip.decompress(compressed))]
    with tarfile.open(tmp_path / "draco.tar") as archive:
        files = {m.name.rstrip("/"): m for m in archive.getmembers()}
        assert {m.mtime for m in files.values()} == {7}
        (docker,) = json.loads(archive.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert docker["RepoTags"] == ["draco:0.1.0"]
        for part in (docker["Config"], *docker["Layers"], "index.json", "oci-layout"):
            assert part in files, part
        assert archive.extractfile("index.json").read() == (layout / "index.json").read_bytes()  # type: ignore[union-attr]
        assert "blobs" in files and files["blobs"].isdir()
