package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// driver serves the CSI identity, controller and node services over one data
// directory: volumes/<id>/ is a volume's content; snapshots/<id>/ a
// snapshot's, complete once snapshots/<id>.source (the source volume's id)
// exists. On btrfs (cow) each is a subvolume and a cut is a snapshot of one
// (cow.go); elsewhere a copy. Every call is idempotent, as CSI requires: the
// sidecars retry.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	name, nodeID, dataDir string
	cow                   bool
	busy                  inFlight
}

// inFlight holds the ids with a call in progress: a second call for the same
// id gets Aborted (CSI's "operation pending"; the sidecar retries), so two
// copies of one id never race while different ids proceed in parallel.
type inFlight struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (f *inFlight) start(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids[id] {
		return status.Errorf(codes.Aborted, "an operation on %s is in progress", id)
	}
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	f.ids[id] = true
	return nil
}

func (f *inFlight) done(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, id)
}

func (d *driver) volumesDir() string   { return filepath.Join(d.dataDir, "volumes") }
func (d *driver) snapshotsDir() string { return filepath.Join(d.dataDir, "snapshots") }

// path joins an id under dir, refusing ids that would escape it.
func path(dir, id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
		return "", status.Errorf(codes.InvalidArgument, "bad id %q", id)
	}
	return filepath.Join(dir, id), nil
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// --- identity

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "helmr"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// --- controller

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	for _, c := range caps {
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "only filesystem volumes: a directory cannot be a block device")
		}
	}
	return nil
}

// CreateVolume makes volumes/<name>, empty or from the requested snapshot or
// volume (a writable snapshot of it on btrfs, else a copy). The volume id is the name the provisioner chose (the
// PV's name), so a retried call finds the volume it made.
func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	dst, err := path(d.volumesDir(), req.GetName())
	if err != nil {
		return nil, err
	}
	src := req.GetVolumeContentSource()
	if err := d.busy.start(dst); err != nil {
		return nil, err
	}
	defer d.busy.done(dst)
	if !exists(dst) {
		from := ""
		switch {
		case src.GetSnapshot() != nil:
			if from, err = d.readySnapshot(src.GetSnapshot().GetSnapshotId()); err != nil {
				return nil, err
			}
		case src.GetVolume() != nil:
			if from, err = path(d.volumesDir(), src.GetVolume().GetVolumeId()); err != nil {
				return nil, err
			}
			if !exists(from) {
				return nil, status.Errorf(codes.NotFound, "source volume %s", src.GetVolume().GetVolumeId())
			}
		}
		if err := d.cut(from, dst, false); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      req.GetName(),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		ContentSource: src,
	}}, nil
}

func (d *driver) readySnapshot(id string) (string, error) {
	p, err := path(d.snapshotsDir(), id)
	if err != nil {
		return "", err
	}
	if !exists(p + ".source") {
		return "", status.Errorf(codes.NotFound, "snapshot %s", id)
	}
	return p, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	p, err := path(d.volumesDir(), req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := d.busy.start(p); err != nil {
		return nil, err
	}
	defer d.busy.done(p)
	if err := remove(p); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	p, err := path(d.volumesDir(), req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if !exists(p) {
		return nil, status.Errorf(codes.NotFound, "volume %s", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

// CreateSnapshot cuts volumes/<source> to snapshots/<name> (a read-only
// snapshot on btrfs: constant time, whatever the volume holds; else a copy)
// and then writes snapshots/<name>.source, whose time is the creationTime:
// the cut is complete, and readyToUse, when it returns.
func (d *driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	dst, err := path(d.snapshotsDir(), req.GetName())
	if err != nil {
		return nil, err
	}
	from, err := path(d.volumesDir(), req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	if err := d.busy.start(dst); err != nil {
		return nil, err
	}
	defer d.busy.done(dst)
	if source, err := os.ReadFile(dst + ".source"); err == nil {
		if string(source) != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s is of volume %s", req.GetName(), source)
		}
	} else {
		if !exists(from) {
			return nil, status.Errorf(codes.NotFound, "volume %s", req.GetSourceVolumeId())
		}
		if err := d.cut(from, dst, true); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := os.WriteFile(dst+".source", []byte(req.GetSourceVolumeId()), 0o600); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	info, err := os.Stat(dst + ".source")
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	// SizeBytes 0 (unknown), so no restoreSize: capacity is not enforced
	// here, and the bytes in use must not forbid a restore into a PVC of the
	// source's declared size.
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId: req.GetName(), SourceVolumeId: req.GetSourceVolumeId(),
		CreationTime: timestamppb.New(info.ModTime()), ReadyToUse: true,
	}}, nil
}

func (d *driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	p, err := path(d.snapshotsDir(), req.GetSnapshotId())
	if err != nil {
		return nil, err
	}
	if err := d.busy.start(p); err != nil {
		return nil, err
	}
	defer d.busy.done(p)
	// The marker first: a half-deleted snapshot must not look ready.
	if err := os.Remove(p + ".source"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := remove(p); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// --- node

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS}},
	}}}, nil
}

// NodePublishVolume bind-mounts the volume's directory at the kubelet's
// target path; the mount reaches the pod through the kubelet directory's
// shared (Bidirectional) propagation.
func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	src, err := path(d.volumesDir(), req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if !exists(src) {
		return nil, status.Errorf(codes.NotFound, "volume %s", req.GetVolumeId())
	}
	if err := bindMount(src, target, req.GetReadonly()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if err := unmount(req.GetTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the volume's own usage (its files' blocks) against
// the capacity of the node's filesystem that holds it: the kubelet's volume
// stats (kubelet_volume_stats_*) come from here.
func (d *driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	p, err := path(d.volumesDir(), req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if !exists(p) {
		return nil, status.Errorf(codes.NotFound, "volume %s", req.GetVolumeId())
	}
	usage, err := volumeUsage(p)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: usage}, nil
}
