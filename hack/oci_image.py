"""Writes OCI image layers and image-layout tarballs from local directories.

No registry and no Docker engine are reachable here, so images are assembled
from local root filesystems and imported with `ctr images import`. Layers are
uncompressed and deterministic (sorted entries, zero mtimes), so the same
inputs always give the same digests and unchanged images are not re-imported.

    python3 hack/oci_image.py layer DIR OUT.tar
    python3 hack/oci_image.py image OUT.tar NAME --architecture GOARCH --layer LAYER.tar
        [--layer ...] [--entrypoint JSON] [--env K=V ...] [--user UID] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


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


def _add_blob(tar: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    info = _normalize(tarfile.TarInfo(f"blobs/sha256/{digest}"))
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return digest, len(data)


def build(
    out: Path, name: str, architecture: str, layers: list[Path], config: dict[str, object]
) -> str:
    """Writes the image; returns the manifest digest (the image's identity)."""
    layer_files = [(sha256_file(path), path) for path in layers]

    image_config = {
        "architecture": architecture,
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d, _ in layer_files]},
    }
    with tarfile.open(out, "w") as tar:
        descriptors = []
        for digest, path in layer_files:
            tar.add(path, arcname=f"blobs/sha256/{digest}", filter=_normalize)
            descriptors.append(
                {
                    "mediaType": MEDIA_LAYER,
                    "digest": f"sha256:{digest}",
                    "size": path.stat().st_size,
                }
            )
        cfg_digest, cfg_size = _add_blob(tar, json.dumps(image_config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {
                "mediaType": MEDIA_CONFIG,
                "digest": f"sha256:{cfg_digest}",
                "size": cfg_size,
            },
            "layers": descriptors,
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
    config: dict[str, object] = {
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *args.env]
    }
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.user:
        config["User"] = args.user
    if args.workdir:
        config["WorkingDir"] = args.workdir
    print(build(args.out, args.name, args.architecture, args.layer, config))


if __name__ == "__main__":
    main()
