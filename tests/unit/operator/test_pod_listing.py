"""Runner pods are listed by their metadata only (issue 11, item 5 budgets): the
supervisor lists every runner pod at each start, and whole pods as the client's
models cost seconds and hundreds of MiB at a few thousand Sessions."""

from __future__ import annotations

from helmr.kube.client import PodRef, pod_refs


def test_a_metadata_list_gives_each_pods_name_labels_and_deletion() -> None:
    listing = {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "items": [
            {
                "kind": "PartialObjectMetadata",
                "metadata": {
                    "name": "s-runner-2",
                    "namespace": "team",
                    "labels": {"helmr.dev/session-id": "ses_1", "helmr.dev/process-epoch": "2"},
                    "managedFields": [{"manager": "helmr"}],
                },
            },
            {
                "metadata": {
                    "name": "t-runner-1",
                    "namespace": "team",
                    "deletionTimestamp": "2026-11-30T17:00:00Z",
                }
            },
        ],
    }
    assert pod_refs(listing) == [
        PodRef(
            namespace="team",
            name="s-runner-2",
            labels={"helmr.dev/session-id": "ses_1", "helmr.dev/process-epoch": "2"},
            deleting=False,
        ),
        PodRef(namespace="team", name="t-runner-1", labels={}, deleting=True),
    ]


def test_an_empty_list_has_no_pods() -> None:
    assert pod_refs({"items": None}) == []
