"""Writes OCI image layers and image-layout tarballs from local directories.

No registry and no Docker engine are reachable here, so images are assembled
from local root filesystems and imported with `ctr images import`. Layers are
uncompressed and deterministic (sorted entries, zero mtimes), so the same
inputs always give the same digests and unchanged images are not re-imported.
An image may also start from another image's archive (`base_image`): its
layers are copied blob for blob, whatever their compression, and new layers
go on top (`helmr actor build` layers an actor over the runner image so).

Standard library only: hack/build-images.sh runs it with the system Python,
before any virtualenv exists (the import linter holds it so)::

    PYTHONPATH=src python3 -m helmr.images.oci layer DIR OUT.tar
    PYTHONPATH=src python3 -m helmr.images.oci image OUT.tar NAME --architecture GOARCH
        --layer LAYER.tar [--layer ...] [--entrypoint JSON] [--env K=V ...] [--user UID]
        [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageError(Exception):
    """An archive that is not the OCI image it should be, said in one sentence."""


@dataclass(frozen=True)
class Layer:
    """One layer of an image being written: its descriptor (media type, digest,
    size), its diff_id (the digest of the uncompressed tar, which the image
    config lists) and where its blob is: the file ``path``, or its member
    ``member`` when ``path`` is an image archive."""

    media_type: str
    digest: str
    size: int
    diff_id: str
    path: Path
    member: str | None = None


@dataclass(frozen=True)
class BaseImage:
    """An image read from an OCI archive: its config and its layers, in order."""

    config: dict[str, Any]
    layers: list[Layer]

    @property
    def architecture(self) -> str:
        return str(self.config["architecture"])

    @property
    def runtime(self) -> dict[str, Any]:
        """What runs: Env, Entrypoint, User, WorkingDir (the config's ``config``)."""
        return dict(self.config.get("config") or {})


def _normalize(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    info.uname = info.gname = ""
    return info


def layer_tar(root: Path, out: Path) -> str:
    """Tars ROOT's contents into OUT deterministically; returns the sha256 digest."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                tar.add(
                    path, arcname=str(path.relative_to(root)), recursive=False, filter=_normalize
                )
    return sha256_file(out)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def local_layer(path: Path) -> Layer:
    """An uncompressed layer tar (``layer_tar``'s): its digest is its diff_id."""
    digest = sha256_file(path)
    return Layer(MEDIA_LAYER, digest, path.stat().st_size, digest, path)


def base_image(archive: Path, architecture: str | None = None) -> BaseImage:
    """The image in an OCI archive (``build``'s, or ``ctr images export``'s); of
    ``architecture`` when the archive holds several platforms."""
    try:
        with tarfile.open(archive) as tar:
            return _read_base(archive, tar, architecture)
    except (OSError, tarfile.TarError) as e:
        raise ImageError(f"{archive} is not an image archive: {e}") from e


def _read_base(archive: Path, tar: tarfile.TarFile, architecture: str | None) -> BaseImage:
    names = set(tar.getnames())

    def blob(digest: str) -> str:
        name = "blobs/sha256/" + digest.removeprefix("sha256:")
        if name not in names:
            raise ImageError(f"{archive} lacks the blob {digest}")
        return name

    def read_json(name: str) -> Any:
        member = tar.extractfile(name) if name in names else None
        if member is None:
            raise ImageError(f"{archive} has no {name}: not an OCI image layout")
        return json.load(member)

    manifest = _manifest(read_json("index.json"), lambda d: read_json(blob(d)), architecture)
    config = read_json(blob(manifest["config"]["digest"]))
    diff_ids = config["rootfs"]["diff_ids"]
    layers = [
        Layer(
            d["mediaType"],
            d["digest"].removeprefix("sha256:"),
            d["size"],
            diff.removeprefix("sha256:"),
            archive,
            blob(d["digest"]),
        )
        for d, diff in zip(manifest["layers"], diff_ids, strict=True)
    ]
    return BaseImage(config, layers)


def _manifest(
    index: dict[str, Any], read: Callable[[str], Any], architecture: str | None
) -> dict[str, Any]:
    """The image manifest an index leads to (through nested indexes, by platform)."""
    for descriptor in index.get("manifests", []):
        platform = descriptor.get("platform") or {}
        if architecture and platform.get("architecture", architecture) != architecture:
            continue
        found: dict[str, Any] = read(descriptor["digest"])
        if descriptor.get("mediaType") == MEDIA_INDEX or "manifests" in found:
            return _manifest(found, read, architecture)
        return found
    raise ImageError(f"the archive holds no image for architecture {architecture}")


@contextmanager
def _blobs() -> Iterator[Callable[[Layer], IO[bytes]]]:
    """Opens layers' blobs, each archive once, all closed on exit."""
    with ExitStack() as stack:
        archives: dict[Path, tarfile.TarFile] = {}

        def open_blob(layer: Layer) -> IO[bytes]:
            if layer.member is None:
                return stack.enter_context(layer.path.open("rb"))
            if layer.path not in archives:
                archives[layer.path] = stack.enter_context(tarfile.open(layer.path))
            blob = archives[layer.path].extractfile(layer.member)
            assert blob is not None  # base_image found it there
            return blob

        yield open_blob


def _add_blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    info = _normalize(tarfile.TarInfo(f"blobs/sha256/{digest}"))
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return digest, len(data)


def build(
    out: Path, name: str, architecture: str, layers: list[Layer], config: dict[str, object]
) -> str:
    """Writes the image; returns the manifest digest (the image's identity)."""
    image_config = {
        "architecture": architecture,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer.diff_id}" for layer in layers]},
    }
    with tarfile.open(out, "w") as tar, _blobs() as open_blob:
        for layer in layers:
            info = _normalize(tarfile.TarInfo(f"blobs/sha256/{layer.digest}"))
            info.size = layer.size
            tar.addfile(info, open_blob(layer))
        cfg_digest, cfg_size = _add_blob(tar, json.dumps(image_config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {
                "mediaType": MEDIA_CONFIG,
                "digest": f"sha256:{cfg_digest}",
                "size": cfg_size,
            },
            "layers": [
                {
                    "mediaType": layer.media_type,
                    "digest": f"sha256:{layer.digest}",
                    "size": layer.size,
                }
                for layer in layers
            ],
        }
        man_digest, man_size = _add_blob(tar, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": f"sha256:{man_digest}",
                    "size": man_size,
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        _add_blob_named(tar, "index.json", json.dumps(index).encode())
        _add_blob_named(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
    return f"sha256:{man_digest}"


def _add_blob_named(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = _normalize(tarfile.TarInfo(name))
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    layer = verbs.add_parser("layer")
    layer.add_argument("root", type=Path)
    layer.add_argument("out", type=Path)
    image = verbs.add_parser("image")
    image.add_argument("out", type=Path)
    image.add_argument("name")
    # The OCI platform name, which is Go's GOARCH (amd64, arm64, ...).
    image.add_argument("--architecture", required=True)
    image.add_argument("--layer", type=Path, action="append", required=True)
    image.add_argument("--entrypoint", type=json.loads)
    image.add_argument("--env", action="append", default=[])
    image.add_argument("--user")
    image.add_argument("--workdir")
    args = parser.parse_args()
    if args.verb == "layer":
        print(layer_tar(args.root, args.out))
        return
    config: dict[str, object] = {"Env": [DEFAULT_PATH, *args.env]}
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.user:
        config["User"] = args.user
    if args.workdir:
        config["WorkingDir"] = args.workdir
    layers = [local_layer(path) for path in args.layer]
    print(build(args.out, args.name, args.architecture, layers, config))


if __name__ == "__main__":
    main()
