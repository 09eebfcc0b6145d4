"""The VolumeSnapshot API that the Computer disk's saves are made with (the CSI
external-snapshotter's custom resources, not part of Kubernetes itself)."""

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"
SNAPSHOT_VERSION = "v1"
SNAPSHOTS = "volumesnapshots"
SNAPSHOT_CONTENTS = "volumesnapshotcontents"
SNAPSHOT_CLASSES = "volumesnapshotclasses"
