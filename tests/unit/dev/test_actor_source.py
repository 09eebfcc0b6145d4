"""What ``helmr dev`` runs, read from disk: a directory's manifest or ``MODULE:ATTR``."""

from __future__ import annotations

from pathlib import Path

import pytest

from helmr.dev.actor_source import LOCAL_IMAGE, load_actor
from helmr.errors import InvalidInput

ECHO = Path(__file__).parents[3] / "examples" / "echo"


def test_a_directory_is_its_manifest_imported_from_its_parent() -> None:
    source = load_actor(str(ECHO), "team", spec={"maxTurnDurationSeconds": 5})

    assert source.name == "echo"
    assert source.actor.metadata.namespace == "team"
    assert source.actor.spec.entrypoint == "echo.echo:echo"
    assert source.actor.spec.max_turn_duration_seconds == 5
    assert source.actor.spec.idle_timeout_seconds == 60  # the manifest's own
    assert source.python_path == (ECHO.parent,)
    assert source.watched == ECHO


def test_a_directory_its_entrypoint_names_as_a_package_is_imported_from_its_parent_alone(
    tmp_path: Path,
) -> None:
    """``plain.plain:plain`` for ``plain/plain.py`` without ``__init__.py``: the
    image's layout (``/app/plain``, only ``/app`` on the path). The directory on
    the path too would make ``plain`` the module, not the package."""
    path = tmp_path / "plain"
    path.mkdir()
    (path / "actor.yaml").write_text(
        "apiVersion: helmr.dev/v1alpha1\nkind: Actor\nmetadata: {name: plain}\n"
        "spec: {image: local/dev, entrypoint: 'plain.plain:plain'}\n"
    )

    source = load_actor(str(path), "default")

    assert source.python_path == (tmp_path,)


def test_module_attr_is_an_actor_named_after_attr_imported_from_here(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text("")

    source = load_actor("my_agent:the_agent", "default", cwd=tmp_path)

    assert source.name == "the-agent"
    assert source.actor.spec.entrypoint == "my_agent:the_agent"
    assert source.actor.spec.image == LOCAL_IMAGE
    assert source.python_path == (tmp_path,)
    assert source.watched == tmp_path / "my_agent.py"


def test_a_package_module_is_watched_whole(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()

    source = load_actor("agents.main:agent", "default", cwd=tmp_path)

    assert source.watched == tmp_path / "agents"


@pytest.mark.parametrize(
    ("where", "says"),
    [("no-manifest", "actor.yaml"), ("not an actor", "MODULE:ATTR")],
)
def test_what_is_not_an_actor_is_refused_saying_what_to_give(
    tmp_path: Path, where: str, says: str
) -> None:
    (tmp_path / "no-manifest").mkdir()

    with pytest.raises(InvalidInput, match=says):
        load_actor(where, "default", cwd=tmp_path)


def test_a_manifest_that_breaks_the_actor_schema_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "actor.yaml").write_text(
        "apiVersion: helmr.dev/v1alpha1\nkind: Actor\nmetadata: {name: bad}\n"
        "spec: {image: x, entrypoint: 'no colon'}\n"
    )

    with pytest.raises(InvalidInput, match="entrypoint"):
        load_actor(str(bad), "default")
