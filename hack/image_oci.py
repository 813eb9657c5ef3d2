"""A small OCI image packer: one root filesystem folder in, an OCI image layout and a
`docker load`-able archive out, byte for byte the same for the same input.

No packaged tool fits on these machines (no Docker daemon, no registry, no buildah or
umoci in bookworm's main that writes both formats reproducibly), and what an image is
fits in a page: a gzipped tar of the files (the layer), a JSON config naming the
layer's uncompressed digest, a manifest naming both by digest, and an index. The docker
archive is the same blobs with docker's `manifest.json` beside them (as `docker save`
writes since Docker 25), so `docker load`, `kind load image-archive`, `ctr images
import` and `skopeo copy docker-archive:` all read it, and keep one manifest digest.

Reproducible by construction: entries sorted by path, every mtime the source date
(SOURCE_DATE_EPOCH), owners numeric with no names, no PAX access times, gzip with no
name and time in its header, JSON with sorted keys and no spaces.

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ImageConfig:
    """What `docker inspect` shows under Config, and the image's labels."""

    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    workdir: str
    ports: list[int]
    labels: dict[str, str] = field(default_factory=dict)


def layer_tar(root: Path, epoch: int) -> bytes:
    """The folder ROOT as an uncompressed tar: sorted, every time EPOCH, owners as in
    ROOT (numeric), hard links kept as links, sockets and devices left out."""
    out = io.BytesIO()
    seen: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in _walk(root):
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue  # a device node or a socket has no place in an image layer
            info = tarfile.TarInfo(rel + ("/" if stat.S_ISDIR(st.st_mode) else ""))
            info.mode = stat.S_IMODE(st.st_mode)
            info.uid, info.gid = st.st_uid, st.st_gid
            info.uname = info.gname = ""
            info.mtime = epoch
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                tar.addfile(info)
            elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                info.type = tarfile.LNKTYPE
                info.linkname = seen[(st.st_dev, st.st_ino)]
                tar.addfile(info)
            else:
                if st.st_nlink > 1:
                    seen[(st.st_dev, st.st_ino)] = rel
                info.size = st.st_size
                with path.open("rb") as f:
                    tar.addfile(info, f)
    return out.getvalue()


def _walk(root: Path) -> list[Path]:
    """Every path under ROOT (not ROOT itself), directories before their contents, in
    byte order of the path: the same order on every machine."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            found.append(base / name)
    found.sort(key=lambda p: p.relative_to(root).as_posix().encode())
    return found


def _gzip(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=out, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


@dataclass
class Image:
    """The blobs of one image and the digests that name them."""

    blobs: dict[str, bytes]  # digest -> content
    manifest: str  # the manifest's digest
    config: str
    layers: list[str]
    name: str  # e.g. draco:0.1.0

    @property
    def manifest_blob(self) -> bytes:
        return self.blobs[self.manifest]


def build(root: Path, config: ImageConfig, name: str, epoch: int) -> Image:
    """The image of the folder ROOT: one layer."""
    tar = layer_tar(root, epoch)
    layer = _gzip(tar)
    created = _iso(epoch)
    cfg = {
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {
            "User": config.user, "Entrypoint": config.entrypoint, "Cmd": config.cmd,
            "Env": config.env, "WorkingDir": config.workdir, "Labels": config.labels,
            "ExposedPorts": {f"{p}/tcp": {} for p in sorted(config.ports)},
        },
        "rootfs": {"type": "layers", "diff_ids": [_digest(tar)]},
        "history": [{"created": created, "created_by": "hack/image"}],
    }
    cfg_blob = _json(cfg)
    blobs = {_digest(layer): layer, _digest(cfg_blob): cfg_blob}
    manifest = {
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": _digest(cfg_blob), "size": len(cfg_blob)},
        "layers": [{"mediaType": LAYER, "digest": _digest(layer), "size": len(layer)}],
        "annotations": {k: v for k, v in config.labels.items() if k.startswith("org.opencontainers.")},
    }
    man_blob = _json(manifest)
    blobs[_digest(man_blob)] = man_blob
    return Image(blobs, _digest(man_blob), _digest(cfg_blob), [_digest(layer)], name)


def _iso(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _index(image: Image) -> bytes:
    repo, _, tag = image.name.rpartition(":")
    return _json({
        "schemaVersion": 2, "mediaType": INDEX,
        "manifests": [{
            "mediaType": MANIFEST, "digest": image.manifest, "size": len(image.manifest_blob),
            "annotations": {"io.containerd.image.name": f"docker.io/library/{image.name}"
                            if "/" not in repo else image.name,
                            "org.opencontainers.image.ref.name": tag},
        }],
    })


def _files(image: Image) -> dict[str, bytes]:
    """The OCI layout's files by path."""
    files = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"}), "index.json": _index(image)}
    for digest, blob in image.blobs.items():
        files["blobs/sha256/" + digest.removeprefix("sha256:")] = blob
    return files


def write_layout(image: Image, out: Path) -> None:
    """DIR as an OCI image layout (what `skopeo copy oci:DIR` and `ctr` read)."""
    for rel, data in _files(image).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def write_archive(image: Image, out: Path, epoch: int) -> None:
    """One tar that is both an OCI layout and a docker archive (manifest.json)."""
    files = _files(image)
    blob = lambda d: "blobs/sha256/" + d.removeprefix("sha256:")  # noqa: E731
    files["manifest.json"] = _json([{"Config": blob(image.config), "RepoTags": [image.name],
                                     "Layers": [blob(d) for d in image.layers]}])
    repo, _, tag = image.name.rpartition(":")
    files["repositories"] = _json({repo: {tag: image.layers[-1].removeprefix("sha256:")}})
    with tarfile.open(out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({str(parent) for rel in files for parent in Path(rel).parents if str(parent) != "."})
        for d in [*dirs, *sorted(files)]:
            is_dir = d in dirs and d not in files
            info = tarfile.TarInfo(d + ("/" if is_dir else ""))
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            if is_dir:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.mode, info.size = 0o644, len(files[d])
                tar.addfile(info, io.BytesIO(files[d]))


__all__ = ["Image", "ImageConfig", "build", "layer_tar", "write_archive", "write_layout"]
