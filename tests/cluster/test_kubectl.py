"""kubectl first (issue 12): the README's kubectl quickstart runs as written,
``kubectl wait --for=condition=...`` works on Sessions and Turns, and every
Session control (close, cancel, interrupt, resume) is a ``kubectl patch``.

Only the built kubectl touches the cluster here: no client, no API call, as
a kubectl user would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, RUNNER_IMAGE, Operator

BUILT_KUBECTL = Path.home() / ".cache" / "helmr" / "bin" / "current" / "kubectl"
MARKER = "<!-- kubectl-quickstart -->"
WATCH_SECONDS = 5
"""How long the README's ``kubectl get -w`` is let run: it never ends on its own."""


def kubectl_path() -> str:
    found = str(BUILT_KUBECTL) if BUILT_KUBECTL.exists() else shutil.which("kubectl")
    assert found, "no kubectl: build it with `make build`"
    return found


class Kubectl:
    """kubectl against the test cluster, in the test's namespace (its kubeconfig's
    context namespace, as the README sets one for the demo)."""

    def __init__(self, kubeconfig: str, namespace: str, tmp: Path) -> None:
        self.config = tmp / "kubeconfig"
        shutil.copy(kubeconfig, self.config)
        self.env = dict(os.environ) | {
            "KUBECONFIG": str(self.config),
            "PATH": f"{Path(kubectl_path()).parent}:{os.environ['PATH']}",
        }
        self("config", "set-context", "--current", "--namespace", namespace)

    def shell(
        self, command: str, timeout: float = 180, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def __call__(self, *args: str, input: str | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            ["kubectl", *args],
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if ok:
            assert done.returncode == 0, f"kubectl {shlex.join(args)}: {done.stderr}"
        return done.stdout if ok else done.stderr

    def json(self, *args: str) -> Any:
        return json.loads(self("get", *args, "-o", "json"))

    def patch(self, what: str, spec: dict[str, Any]) -> str:
        return self("patch", what, "--type", "merge", "-p", json.dumps({"spec": spec}))

    def refused(self, what: str, spec: dict[str, Any]) -> str:
        """The apiserver's refusal of the patch (it must refuse it)."""
        patch = json.dumps({"spec": spec})
        return self("patch", what, "--type", "merge", "-p", patch, ok=False)


@pytest.fixture
def k(kubeconfig: str, namespace: str, operator: Operator, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig, namespace, tmp_path)


def readme_block(marker: str = MARKER) -> str:
    """The README's fenced shell block after ``marker`` (the kubectl quickstart's)."""
    text = (REPO / "README.md").read_text()
    after = text.split(marker, 1)[1]
    block = re.search(r"```sh\n(.*?)```", after, re.S)
    assert block is not None, f"no fenced block after {marker}"
    return block.group(1)


def test_the_readme_kubectl_quickstart_runs_as_written(k: Kubectl, runner_image: str) -> None:
    assert runner_image == RUNNER_IMAGE  # the image examples/echo/actor.yaml names
    commands = [line for line in readme_block().splitlines() if line.strip()]
    assert any(" -w" in c for c in commands)  # the watch is shown ...
    outputs = []
    for command in commands:
        if re.search(r"\sget\s.*\s-w\b", command):
            # ... and run, but it never ends: it must print the resources while it runs.
            try:
                ended = k.shell(command, timeout=WATCH_SECONDS)
            except subprocess.TimeoutExpired as e:
                shown = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                assert "review-1" in shown, shown
                continue
            raise AssertionError(f"{command} ended by itself: {ended.stderr}")
        done = k.shell(command)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        outputs.append(done.stdout)
    results = "".join(outputs)
    assert '{"echo":{"issue":"APP-42"}}' in results
    (described,) = [out for out in outputs if out.startswith("Name:")]
    assert "Turn review-1 completed" in described, described  # the Events, by Turn name
    assert "TurnCompleted" in described
    assert not k.json("sessions")["items"]
    assert not k.json("turns")["items"]


# --- the controls, with kubectl alone


def apply_session(k: Kubectl, name: str = "s", **controls: Any) -> None:
    k("apply", "-f", str(REPO / "examples" / "echo" / "actor.yaml"))
    k(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "helmr.dev/v1alpha1",
                "kind": "Session",
                "metadata": {"name": name},
                "spec": {"actorRef": {"name": "echo"}, "workspace": name, **controls},
            }
        ),
    )


def apply_turn(k: Kubectl, name: str, value: Any, session: str = "s") -> None:
    k(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "helmr.dev/v1alpha1",
                "kind": "Turn",
                "metadata": {"name": name},
                "spec": {"sessionRef": {"name": session}, "input": value},
            }
        ),
    )


def admitted(k: Kubectl, name: str) -> None:
    """Until the Turn has its sequence: Turns applied close together may be admitted
    in any order (docs/resources.md, "Turn order with kubectl"), so a test that needs
    one to run before the next applies the next only then."""
    k("wait", "--for=jsonpath={.status.sequence}", "--timeout=60s", f"turn/{name}")


def long_input(seconds: float) -> str:
    """An echo input streamed for about ``seconds`` (one word per 0.05 s)."""
    return " ".join(f"w{i}" for i in range(int(seconds / 0.05)))


def wait(k: Kubectl, condition: str, what: str, timeout: int = 120) -> None:
    k("wait", f"--for=condition={condition}", f"--timeout={timeout}s", what)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in obj["status"].get("conditions", []) if c["type"] == kind
    ]
    assert len(found) == 1, obj["status"]
    return found[0]


def running(k: Kubectl, turn: str) -> None:
    deadline = time.monotonic() + 120
    while k.json("turn", turn).get("status", {}).get("phase") != "running":
        assert time.monotonic() < deadline, f"turn {turn} never ran"
        time.sleep(0.3)


def test_wait_for_complete_and_held_conditions(k: Kubectl) -> None:
    apply_session(k)
    wait(k, "Ready", "session/s")
    apply_turn(k, "first", "hello")
    wait(k, "Complete", "turn/first")
    first = k.json("turn", "first")
    complete = condition(first, "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "Completed")
    assert complete["message"] == "Turn first completed with a result"
    assert first["status"]["result"] == {"echo": "hello"}

    apply_turn(k, "long", long_input(60))
    running(k, "long")
    k.patch("session/s", {"interrupt": "1"})
    wait(k, "Held", "session/s")
    session = k.json("session", "s")
    held = condition(session, "Held")
    hold_id = session["status"]["hold"]["holdId"]
    assert held["reason"] == "Interrupted"
    assert hold_id in held["message"]
    assert condition(session, "Ready")["status"] == "False"
    wait(k, "Failed", "turn/long")
    failed = condition(k.json("turn", "long"), "Failed")
    assert (failed["reason"], failed["message"]) == (
        "Interrupt",
        "Turn long was interrupted by an interrupt",
    )
    # The transition time stays while the condition holds.
    time.sleep(2)
    again = condition(k.json("session", "s"), "Held")
    assert again["lastTransitionTime"] == held["lastTransitionTime"]


def test_close_with_kubectl_patch_drains_then_closes(k: Kubectl) -> None:
    apply_session(k)
    apply_turn(k, "a", long_input(3))
    admitted(k, "a")
    apply_turn(k, "b", "after a")
    running(k, "a")
    k.patch("session/s", {"state": "Closed"})
    # Repeating the patch changes nothing: a level, not an event.
    k.patch("session/s", {"state": "Closed"})
    wait(k, "Closed", "session/s")
    session = k.json("session", "s")
    assert session["status"]["phase"] == "closed"
    assert condition(session, "Closed")["reason"] == "Drained"
    assert k.json("turn", "b")["status"]["phase"] == "completed"
    # Closed never opens again (CEL).
    assert "cannot be opened again" in k.refused("session/s", {"state": "Open"})


def test_cancel_with_kubectl_patch_stops_the_running_turn(k: Kubectl) -> None:
    apply_session(k)
    apply_turn(k, "a", long_input(60))
    admitted(k, "a")
    apply_turn(k, "b", "never runs")
    running(k, "a")
    k.patch("session/s", {"state": "Cancelled"})
    wait(k, "Closed", "session/s")
    session = k.json("session", "s")
    assert condition(session, "Closed")["reason"] == "Cancelled"
    assert k.json("turn", "a")["status"]["phase"] == "interrupted"
    assert k.json("turn", "b")["status"]["phase"] == "cancelled"
    assert "a Cancelled Session stays Cancelled" in k.refused("session/s", {"state": "Closed"})


def test_interrupt_with_kubectl_patch_holds_once_per_request(k: Kubectl) -> None:
    apply_session(k)
    apply_turn(k, "a", long_input(60))
    admitted(k, "a")
    apply_turn(k, "b", "waits for the resume")
    running(k, "a")
    k.patch("session/s", {"interrupt": "first"})
    wait(k, "Held", "session/s")
    wait(k, "Failed", "turn/a")
    hold_id = k.json("session", "s")["status"]["hold"]["holdId"]
    # The same request again interrupts nothing new: the hold stays the same one.
    k.patch("session/s", {"interrupt": "first"})
    time.sleep(2)
    session = k.json("session", "s")
    assert session["status"]["hold"]["holdId"] == hold_id
    assert k.json("turn", "b")["status"]["phase"] == "queued"
    events = k("get", "events", "--field-selector", "involvedObject.name=s", "-o", "json")
    held = [e for e in json.loads(events)["items"] if e["reason"] == "SessionHeld"]
    assert [e["type"] for e in held] == ["Warning"]
    assert "Turn a is stopping" in held[0]["message"]
    print(k("describe", "session", "s"))  # for the report: a held Session, described


def test_resume_with_kubectl_patch_releases_only_the_named_hold(k: Kubectl) -> None:
    apply_session(k)
    apply_turn(k, "a", long_input(60))
    admitted(k, "a")
    apply_turn(k, "b", "after the resume")
    running(k, "a")
    k.patch("session/s", {"interrupt": "1"})
    wait(k, "Held", "session/s")
    first = k.json("session", "s")["status"]["hold"]["holdId"]
    k.patch("session/s", {"resume": {"holdId": first}})
    wait(k, "Held=false", "session/s")
    wait(k, "Complete", "turn/b")
    session = k.json("session", "s")
    old_manifest = json.dumps(
        {key: session[key] for key in ("apiVersion", "kind", "spec")} | {"metadata": {"name": "s"}}
    )
    # A newer hold is not released by the manifest that names the old one.
    apply_turn(k, "c", long_input(60))
    running(k, "c")
    k.patch("session/s", {"interrupt": "2"})
    wait(k, "Held", "session/s")
    second = k.json("session", "s")["status"]["hold"]["holdId"]
    assert second != first
    # Re-applying the manifest that resumed the first hold releases nothing.
    k("apply", "-f", "-", input=old_manifest)
    time.sleep(2)
    assert k.json("session", "s")["status"]["hold"]["holdId"] == second
    k.patch("session/s", {"resume": {"holdId": second}})
    wait(k, "Held=false", "session/s")


def test_an_actor_whose_never_pulled_image_no_node_has_is_not_accepted(k: Kubectl) -> None:
    actor = {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Actor",
        "metadata": {"name": "absent"},
        "spec": {
            "image": "helmr.local/absent:dev",
            "imagePullPolicy": "Never",
            "entrypoint": "echo.echo:echo",
        },
    }
    k("apply", "-f", "-", input=json.dumps(actor))
    wait(k, "Accepted=false", "actor/absent", timeout=60)
    accepted = condition(k.json("actor", "absent"), "Accepted")
    assert accepted["reason"] == "ImageNotPresent"
    assert "helmr.local/absent:dev is on no node" in accepted["message"]
    k("apply", "-f", str(REPO / "examples" / "echo" / "actor.yaml"))
    wait(k, "Accepted", "actor/echo", timeout=60)
    assert condition(k.json("actor", "echo"), "Accepted")["reason"] == "ImagePresent"


def test_turns_applied_each_once_the_last_has_its_sequence_run_in_that_order(
    k: Kubectl,
) -> None:
    """Issue 25, item 7: Turns applied one after another may be admitted in another
    order; docs/resources.md's recipe (apply the next once the last has its
    sequence) makes the order the apply order."""
    apply_session(k)
    wait(k, "Ready", "session/s")
    steps = [f"step-{n}" for n in range(1, 6)]
    for step in steps:
        apply_turn(k, step, step)
        admitted(k, step)
    for step in steps:
        wait(k, "Complete", f"turn/{step}")
    turns = {t["metadata"]["name"]: t["status"] for t in k.json("turns")["items"]}
    assert [turns[step]["sequence"] for step in steps] == [1, 2, 3, 4, 5]
    started = [turns[step]["startedAt"] for step in steps]
    assert started == sorted(started)


# --- what is refused says so, on the resource (issue 25, items 1 and 2)


def events(k: Kubectl, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events on the object named ``name`` with ``reason``, oldest first.

    An Event's creationTimestamp has whole seconds, so two Events of one second come in
    the apiserver's order, which is by name: find a new one by its uid, not its place.
    """
    selector = f"involvedObject.name={name},reason={reason}"
    listed = json.loads(k("get", "events", "--field-selector", selector, "-o", "json"))
    return sorted(listed["items"], key=lambda e: e["metadata"]["creationTimestamp"])


def told(k: Kubectl, name: str, reason: str, count: int) -> list[dict[str, Any]]:
    """Waits until ``count`` Events with ``reason`` are on ``name``; they."""
    deadline = time.monotonic() + 60
    while len(found := events(k, name, reason)) < count:
        assert time.monotonic() < deadline, f"{name}: {found}"
        time.sleep(0.3)
    return found


def test_a_turn_applied_to_a_closed_session_fails_at_once_saying_why(k: Kubectl) -> None:
    apply_session(k)
    wait(k, "Ready", "session/s")
    k.patch("session/s", {"state": "Closed"})
    wait(k, "Closed", "session/s")
    apply_turn(k, "late", "too late")
    # Not retried every minute without an outcome: failed at once, and kubectl wait returns.
    wait(k, "Failed", "turn/late", timeout=30)
    turn = k.json("turn", "late")
    message = (
        "Turn late was not admitted: the Session s is closed (after its queued Turns finished)"
        " and admits no Turns"
    )
    status = turn["status"]
    assert (status["phase"], status["reason"]) == ("failed", "session_closed")
    assert status["error"] == {"code": "session_not_open", "message": message}
    failed = condition(turn, "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "SessionClosed",
        message,
    )
    [event] = told(k, "late", "SessionClosed", 1)
    assert (event["type"], event["message"]) == ("Warning", message)
    assert event["involvedObject"]["uid"] == turn["metadata"]["uid"]
    time.sleep(3)  # once: nothing admits it again, nor tells it again
    assert len(events(k, "late", "SessionClosed")) == 1
    assert "turnId" not in k.json("turn", "late")["status"]


def test_a_refused_resume_and_an_interrupt_of_a_closed_session_say_so(k: Kubectl) -> None:
    apply_session(k)
    wait(k, "Ready", "session/s")
    k.patch("session/s", {"resume": {"holdId": "hold_nope"}})
    [refused] = told(k, "s", "ControlRefused", 1)
    message = (
        "spec.resume.holdId hold_nope is not the Session's hold (it is not held); nothing resumed"
    )
    assert (refused["type"], refused["message"]) == ("Warning", message)
    last = k.json("session", "s")["status"]["lastRefused"]
    assert (last["control"], last["reason"], last["message"]) == (
        "spec.resume",
        "HoldMismatch",
        message,
    )

    # Another control applies with the wrong resume still in the spec: nothing new refused.
    k.patch("session/s", {"interrupt": "1"})
    wait(k, "Held", "session/s")
    k.patch("session/s", {"state": "Closed"})
    wait(k, "Closed", "session/s")
    assert len(events(k, "s", "ControlRefused")) == 1

    # A control on a closed Session is refused, naming its state.
    k.patch("session/s", {"interrupt": "2"})
    [closed] = [
        e
        for e in told(k, "s", "ControlRefused", 2)
        if e["metadata"]["uid"] != refused["metadata"]["uid"]
    ]
    message = (
        "spec.interrupt 2: the Session is closed (after its queued Turns finished);"
        " nothing interrupted"
    )
    assert (closed["type"], closed["message"]) == ("Warning", message)
    last = k.json("session", "s")["status"]["lastRefused"]
    assert (last["control"], last["reason"]) == ("spec.interrupt", "SessionClosed")
    time.sleep(3)
    assert len(events(k, "s", "ControlRefused")) == 2
    print(k("describe", "session", "s"))  # for the report: the refusals, described


def test_a_turn_waits_for_its_session_which_can_open_held(k: Kubectl) -> None:
    apply_turn(k, "early", "applied before its Session", session="late")
    deadline = time.monotonic() + 60
    while not (said := events(k, "early", "SessionNotFound")):
        assert time.monotonic() < deadline, k("get", "events", "-o", "wide")
        time.sleep(1)
    assert [e["type"] for e in said] == ["Warning"]
    assert "Session late does not exist in namespace" in said[0]["message"]
    assert "phase" not in k.json("turn", "early").get("status", {})

    apply_session(k, "late", interrupt="opened held")
    wait(k, "Held", "session/late")
    hold = k.json("session", "late")["status"]["hold"]
    assert hold["reason"] == "interrupt"
    deadline = time.monotonic() + 60  # admitted with its Session (kopf asks too, up to 30 s apart)
    while k.json("turn", "early").get("status", {}).get("phase") != "queued":
        assert time.monotonic() < deadline, "the waiting Turn was never admitted"
        time.sleep(1)
    time.sleep(2)
    assert k.json("turn", "early")["status"]["phase"] == "queued"  # held: it does not run
    k.patch("session/late", {"resume": {"holdId": hold["holdId"]}})
    wait(k, "Complete", "turn/early")
