"""``helmr.testing``: test an actor on an in-process dev plane (``helmr dev``'s), with pytest.

The plane is the real control plane (store, ``Control``, REST and runner APIs,
supervisor) with each Session's runner a local ``python -m helmr.runner``
process and its Computer a directory: what a test sees is what a cluster does,
without one. Installed with Helmr, the pytest plugin (entry point ``helmr``)
offers two fixtures (pytest-asyncio; ``asyncio_mode = "auto"`` or mark the tests):

- ``helmr_dev``: a factory, ``plane = await helmr_dev("examples/echo", spec={...})``:
  starts a :class:`Plane` for the actor directory (with its ``actor.yaml``) or
  ``MODULE:ATTR`` in the test's ``tmp_path``, stopped after the test. ``spec``
  overrides the Actor manifest's spec for the test (camelCase, as in the
  manifest: ``{"maxTurnDurationSeconds": 1}``, ``{"computer": {"size": "8Mi"}}``);
  ``stop_grace`` (a ``timedelta``) shortens how long an interrupted Turn may take to
  be let go of; ``max_execution_losses`` too.
- ``helmr_plane``: ``helmr_dev(helmr_actor)``, where ``helmr_actor`` is a fixture
  the test module (or a conftest) defines, returning the actor to run.

Driving a Session (:class:`PlaneSession`, from ``await plane.session()``)::

    session = await plane.session()
    turn = await session.run("hello")               # enqueue and wait: a client Turn
    assert turn.status == "completed"

    pending = await session.enqueue({"sleep": 5})   # a TurnRef
    await session.running(pending)                  # once the actor has it
    await session.send({"note": "steer"})           # a message to the active Turn
    receipt = await session.interrupt()             # holds the Session ...
    await session.resume()                          # ... until released
    await session.saved()                           # the completed Turns' files saved
    session.lose_execution()                        # kill -9 the runner: execution loss
    await session.wait_for("session.execution_lost")
    (await session.computer()).joinpath("f").read_text()   # the Computer's files
    await session.fill_computer(0.95)               # real usage: storage pressure
    await session.cancel(); await session.close()

``session.ref`` is the Python client's ``SessionRef`` and ``plane.client`` the
``Client`` (``plane.url``, ``plane.token``): anything the client does works too.
Waits default to :data:`WAIT` seconds and raise ``TimeoutError`` past them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helmr.testing.plane import WAIT, Plane, PlaneSession, StartPlane, start_plane

__all__ = ["WAIT", "Plane", "PlaneSession", "StartPlane", "start_plane"]


def __getattr__(name: str) -> Any:
    # Imported on first use: pytest loads the plugin (helmr.testing.plugin) in every
    # run where Helmr is installed, also without the control plane's extras.
    if name in __all__:
        from helmr.testing import plane

        return getattr(plane, name)
    raise AttributeError(name)
