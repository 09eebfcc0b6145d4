"""The label keys Helmr puts on the Kubernetes objects it makes, and selects them by."""

LABEL_COMPONENT = "helmr.dev/component"
"""What a pod is to Helmr: ``runner``."""
RUNNER = "runner"

LABEL_ACTOR = "helmr.dev/actor"
"""The Actor's name (runner pods and the Actor's NetworkPolicy): its policy selects its pods."""
LABEL_SESSION = "helmr.dev/session"
"""The Session resource's name (runner pods)."""
LABEL_SESSION_ID = "helmr.dev/session-id"
"""The store's session id (runner pods, Sessions and Turns the API made, saves)."""
LABEL_TURN_ID = "helmr.dev/turn-id"
"""The store's turn id (Turns the API made, saves)."""
LABEL_EPOCH = "helmr.dev/process-epoch"
"""The runner process's epoch (runner pods)."""

LABEL_POOL = "helmr.dev/pool"
"""A pooled runner pod (and its claim) not adopted yet: the hash of the pod its Actor's
spec makes (``helmr.operator.runners.pool_pods``); removed at adoption."""
LABEL_POOLED = "helmr.dev/pooled"
"""A runner pod (and its claim) made for an Actor's warm pool: that Actor's name, kept
after adoption."""

LABEL_WORKSPACE = "helmr.dev/workspace"
"""The Workspace a disk's claim or save belongs to."""
LABEL_DISK = "helmr.dev/disk"
"""The disk generation of a claim, or the one a save snapshots."""
ANNOTATION_TURNS = "helmr.dev/turns"
"""The Turns whose state a save holds (annotation), oldest first and comma-separated:
those whose saves it covers (coalesced into it) and its own, the last."""
LABEL_SAVE_VERSION = "helmr.dev/save-version"
