"""The Dockerfiles (for machines with Docker: README's kind steps) and the local
image builder (hack/build-images.sh, no Docker) make the same images: same
Python on the same Debian release, the same distribution with the same extras
installed the same way, the same files under /app, the standard library as
bytecode compiled the same way, user, working directory, environment and
entrypoint. Both are parsed, not built: a change to one that
the other lacks fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "hack" / "build-images.sh"


@dataclass(frozen=True)
class Image:
    python: str  # "3.11"
    debian: str  # "bookworm"
    requirement: str  # what pip installs: "helmr", "helmr[operator]"
    app: tuple[str, ...]  # repository directories copied into /app
    passwd: str  # the line naming the image's user
    user: str
    workdir: str
    env: dict[str, str]
    entrypoint: list[str]
    stdlib_bytecode: str  # compileall's --invalidation-mode for the standard library


STDLIB = re.compile(
    r"python3 -m compileall [^&\n]*--invalidation-mode ([\w-]+) [^&\n]*/usr(?:/local)?/lib/python3"
)
"""compileall run over the image's standard library (Debian's or the python image's)."""


def stdlib_bytecode(commands: str) -> str:
    compiled = STDLIB.search(commands)
    return compiled.group(1) if compiled else "as the base image ships it"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    lines = [
        line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    parsed = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            parsed.append((word.upper(), rest.strip()))
    return parsed


def from_dockerfile(path: Path) -> Image:
    steps = instructions(path)
    stages = [args for word, args in steps if word == "FROM"]
    final = steps[[w for w, _ in steps].index("FROM", 1) :]
    # Every stage on one base: what is built is what runs.
    (base,) = {re.sub(r" AS \w+$", "", s) for s in stages}
    tag = re.fullmatch(r"python:(\d+\.\d+)-slim-(\w+)", base)
    assert tag, base
    runs = " && ".join(args for word, args in steps if word == "RUN")
    pip = re.search(r"pip install ([^&]*?)(?:&&|$)", runs)
    assert pip, runs
    words = shlex.split(pip.group(1))
    assert words[words.index("--target") + 1] == "/opt/helmr/lib"
    requirement = words[-1].replace(".", "helmr", 1)
    app = tuple(
        args.split()[0].rstrip("/")
        for word, args in steps
        if word == "COPY" and args.split()[-1].rstrip("/") == "/app" and "--from" not in args
    )
    passwd = re.search(r'echo "(helmr:[^"]*)" >>/etc/passwd', runs)
    assert passwd, runs
    env = dict(pair.split("=", 1) for word, args in final if word == "ENV" for pair in args.split())
    (user,) = [args for word, args in final if word == "USER"]
    (workdir,) = [args for word, args in final if word == "WORKDIR"]
    (entrypoint,) = [json.loads(args) for word, args in final if word == "ENTRYPOINT"]
    final_runs = " && ".join(args for word, args in final if word == "RUN")
    return Image(
        tag.group(1),
        tag.group(2),
        requirement,
        app,
        passwd.group(1),
        user,
        workdir,
        env,
        entrypoint,
        stdlib_bytecode(final_runs),
    )


def from_builder(name: str) -> Image:
    script = re.sub(r"\\\n\s*", " ", BUILDER.read_text())  # continuation lines joined
    python = re.search(r'\[python\]="helmr\.local/python:(\d+\.\d+)"', script)
    debian = re.search(
        r'debootstrap --variant=minbase --include="\$PYTHON_PACKAGES" (\w+) ', script
    )
    packages = re.search(r'^PYTHON_PACKAGES="([^"]*)"', script, re.M)
    assert python, "the builder's python image changed its name"
    assert debian, "the builder's python image is no longer debootstrapped"
    assert packages
    # The Debian release's own python3 is the image's Python: no other is installed.
    assert packages.group(1).split(",")[0] == "python3"
    call = re.search(rf"^helmr_image {name} (.*)$", script, re.M)
    assert call, f"no helmr_image {name} call"
    requirement, entrypoint = shlex.split(call.group(1))
    assert re.search(r"pip install [^\n]*--target \"\$root\.tmp/opt/helmr/lib\"", script)
    copied = re.search(r'cp -r ((?:"\$REPO_DIR/[\w/]+/\." )+)"\$root\.tmp/app/"', script)
    assert copied, "the builder no longer copies directories into /app"
    app = tuple(re.findall(r'"\$REPO_DIR/([\w/]+)/\."', copied.group(1)))
    passwd = re.search(r'echo "(helmr:[^"]*)" >>"\$root\.tmp/etc/passwd"', script)
    options = re.search(r'--entrypoint "\$entrypoint" (.*)$', script, re.M)
    assert passwd
    assert options
    words = shlex.split(options.group(1))
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--env")
    return Image(
        python.group(1),
        debian.group(1),
        requirement,
        app if name == "runner" else (),
        passwd.group(1),
        words[words.index("--user") + 1],
        words[words.index("--workdir") + 1],
        env,
        json.loads(entrypoint),
        stdlib_bytecode(script),
    )


@pytest.mark.parametrize("name", ["runner", "operator"])
def test_the_dockerfile_and_the_local_builder_make_the_same_image(name: str) -> None:
    assert from_dockerfile(REPO / name / "Dockerfile") == from_builder(name)


def test_the_images_install_this_checkout_with_their_extras() -> None:
    # No published "helmr" is needed (none exists): pip installs the build context.
    assert from_dockerfile(REPO / "runner" / "Dockerfile").requirement == "helmr"
    operator = from_dockerfile(REPO / "operator" / "Dockerfile")
    assert operator.requirement == "helmr[operator,tracing,postgres]"


def test_a_drifted_dockerfile_is_caught(tmp_path: Path) -> None:
    drifted = tmp_path / "Dockerfile"
    text = (REPO / "runner" / "Dockerfile").read_text()
    drifted.write_text(text.replace("USER 65532", "USER 1000"))
    assert from_dockerfile(drifted) != from_builder("runner")


def test_the_standard_library_is_bytecode_never_checked() -> None:
    # Each image's files are read-only and, from the local builder, all of mtime 0:
    # bytecode checked against its sources would be compiled again at every start.
    for name in ("runner", "operator"):
        assert from_builder(name).stdlib_bytecode == "unchecked-hash"
        assert from_dockerfile(REPO / name / "Dockerfile").stdlib_bytecode == "unchecked-hash"
