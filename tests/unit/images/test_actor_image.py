"""``helmr actor build`` without a cluster: the actor's layer over a base image
archive (a small one written here, not the runner image), its requirements
installed offline from a wheel directory, the runtime config kept and the
actor's libraries put first on PYTHONPATH; bad input said in one sentence."""

from __future__ import annotations

import base64
import hashlib
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from helmr.cli import main
from helmr.images.actor_image import ActorImageError, build_actor_image
from helmr.images.oci import DEFAULT_PATH, ImageError, base_image, build, layer_tar, local_layer

BASE_RUNTIME: dict[str, object] = {
    "Env": [DEFAULT_PATH, "PYTHONPATH=/opt/helmr/lib:/app"],
    "Entrypoint": ["python3", "-m", "helmr.runner"],
    "User": "65532",
    "WorkingDir": "/app",
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A one-layer image archive with the runner image's runtime config."""
    root = tmp_path / "base-root"
    (root / "app" / "echo").mkdir(parents=True)
    (root / "app" / "echo" / "echo.py").write_text("# the base's own example\n")
    layer = tmp_path / "base-layer.tar"
    layer_tar(root, layer)
    archive = tmp_path / "base.tar"
    build(archive, "helmr.local/runner:dev", "amd64", [local_layer(layer)], BASE_RUNTIME)
    return archive


def wheel(directory: Path, name: str, version: str, module: str) -> Path:
    """A pure-Python wheel of one module, written by hand (no build backend, no index)."""
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def record(data: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=")
        return f"sha256={digest.decode()},{len(data.encode())}"

    rows = [f"{n},{record(d)}" for n, d in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(path, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path


def actor_dir(tmp_path: Path, requirement: str | None = None) -> Path:
    directory = tmp_path / "shout"
    directory.mkdir()
    (directory / "shout.py").write_text("import loud\n")
    (directory / "__pycache__").mkdir()
    (directory / "__pycache__" / "stale.pyc").write_bytes(b"stale")
    (directory / ".venv").mkdir()
    if requirement:
        (directory / "requirements.txt").write_text(requirement + "\n")
    return directory


def top_layer(archive: Path) -> set[str]:
    image = base_image(archive)
    with tarfile.open(archive) as tar:
        blob = tar.extractfile(f"blobs/sha256/{image.layers[-1].digest}")
        assert blob is not None
        with tarfile.open(fileobj=blob) as layer:
            return set(layer.getnames())


def test_the_directory_and_its_requirement_are_one_layer_over_the_base(
    tmp_path: Path, base: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheel(wheels, "loud", "1.0", "def shout(s):\n    return s.upper()\n")
    out = tmp_path / "shout.tar"
    image = build_actor_image(
        actor_dir(tmp_path, "loud==1.0"), "helmr.local/shout:dev", base, out, wheels=wheels
    )
    assert image.package == "shout"
    built = base_image(out)
    underneath = base_image(base)
    assert [layer.digest for layer in built.layers[:-1]] == [
        layer.digest for layer in underneath.layers
    ]
    files = top_layer(out)
    assert {"app/shout/shout.py", "opt/actor/lib/loud.py"} <= files
    # Compiled once, for a read-only root filesystem; caches and hidden files left out.
    assert "app/shout/__pycache__/shout.cpython-311.pyc" in files
    assert "app/shout/__pycache__/stale.pyc" not in files
    assert not any(name.startswith("app/shout/.venv") for name in files)
    runtime: dict[str, Any] = built.runtime
    assert runtime["Entrypoint"] == BASE_RUNTIME["Entrypoint"]
    assert (runtime["User"], runtime["WorkingDir"]) == ("65532", "/app")
    assert "PYTHONPATH=/opt/actor/lib:/opt/helmr/lib:/app" in runtime["Env"]
    with tarfile.open(out) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
    [manifest] = index["manifests"]
    assert manifest["annotations"]["io.containerd.image.name"] == "helmr.local/shout:dev"


def test_the_same_inputs_make_the_same_image(tmp_path: Path, base: Path) -> None:
    directory = actor_dir(tmp_path)
    first = build_actor_image(directory, "helmr.local/shout:dev", base, tmp_path / "1.tar")
    second = build_actor_image(directory, "helmr.local/shout:dev", base, tmp_path / "2.tar")
    assert first.digest == second.digest
    # No requirements: PYTHONPATH is the base's.
    assert "PYTHONPATH=/opt/helmr/lib:/app" in base_image(tmp_path / "1.tar").runtime["Env"]


def test_a_requirement_pip_cannot_find_is_said(tmp_path: Path, base: Path) -> None:
    (tmp_path / "wheels").mkdir()
    with pytest.raises(ActorImageError, match=r"pip could not install .*requirements.txt"):
        build_actor_image(
            actor_dir(tmp_path, "absent==9"),
            "helmr.local/shout:dev",
            base,
            tmp_path / "out.tar",
            wheels=tmp_path / "wheels",
        )


def test_a_directory_whose_name_is_no_package_is_refused(tmp_path: Path, base: Path) -> None:
    directory = tmp_path / "my-actor"
    directory.mkdir()
    with pytest.raises(ActorImageError, match="'my-actor' is not a Python identifier"):
        build_actor_image(directory, "helmr.local/x:dev", base, tmp_path / "out.tar")


def test_a_base_that_is_no_image_is_refused(tmp_path: Path) -> None:
    (tmp_path / "base.tar").write_bytes(b"not a tar")
    with pytest.raises(ImageError, match="is not an image archive"):
        base_image(tmp_path / "base.tar")


def test_the_command_builds_without_importing_and_says_what_to_declare(
    tmp_path: Path, base: Path
) -> None:
    out = tmp_path / "out.tar"
    done = CliRunner().invoke(
        main,
        [
            "actor",
            "build",
            str(actor_dir(tmp_path)),
            "--tag",
            "helmr.local/shout:dev",
            "--base",
            str(base),
            "--output",
            str(out),
            "--no-import",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "helmr.local/shout:dev sha256:" in done.output
    assert "entrypoint: shout.<module>:<attr>" in done.output
    assert out.is_file()


def test_the_command_without_a_base_says_how_to_build_one(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        main,
        ["actor", "build", str(actor_dir(tmp_path)), "--tag", "t:1", "--base", "/nope.tar"],
    )
    assert done.exit_code == 1
    assert "no base image archive at /nope.tar: build the runner image first" in done.output
