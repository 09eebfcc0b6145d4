// Command csi-hostpath is the local cluster's CSI driver: volumes are
// directories under a data directory on the node; on btrfs (hack/storage.sh
// mounts one) each is a subvolume, a snapshot is a read-only snapshot of it
// and a volume restored or cloned is a writable snapshot, in constant time
// (cow.go); on another filesystem they are copies. Single node only: the controller and node services run in one
// process, beside the external-provisioner and csi-snapshotter sidecars.
//
// Why not upstream csi-driver-host-path: the Go module proxy this project
// builds from refuses github.com/kubernetes-csi/csi-driver-host-path, and
// also node-driver-registrar and livenessprobe. So this small driver does
// their two jobs itself: it registers with the kubelet through the plugin
// registration socket (what node-driver-registrar does) and answers /healthz
// (what livenessprobe does). Copies are made in Go (no shell tools), so the
// image is the static binaries alone.
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	var d driver
	endpoint := flag.String("endpoint", "/csi/csi.sock", "unix socket the CSI services listen on (as seen by this container)")
	kubeletEndpoint := flag.String("kubelet-endpoint", "", "the same socket's path as the kubelet sees it (on the host)")
	registrationDir := flag.String("registration-dir", "/registration", "the kubelet's plugins_registry directory (as seen by this container)")
	healthAddr := flag.String("health-address", ":9898", "address of the /healthz endpoint")
	flag.StringVar(&d.name, "drivername", "hostpath.csi.helmr.dev", "CSI driver name")
	flag.StringVar(&d.nodeID, "nodeid", "", "this node's name")
	flag.StringVar(&d.dataDir, "datadir", "/csi-data-dir", "where volumes and snapshots are kept")
	klog.InitFlags(nil)
	flag.Parse()
	if d.nodeID == "" || *kubeletEndpoint == "" {
		klog.Fatal("--nodeid and --kubelet-endpoint are required")
	}
	for _, dir := range []string{d.volumesDir(), d.snapshotsDir()} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			klog.Fatal(err)
		}
	}
	d.cow = onBtrfs(d.dataDir)
	klog.Infof("data directory %s: btrfs subvolumes and snapshots: %v (else copies)", d.dataDir, d.cow)

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(logErrors))
	csi.RegisterIdentityServer(csiServer, &d)
	csi.RegisterControllerServer(csiServer, &d)
	csi.RegisterNodeServer(csiServer, &d)
	go serve(csiServer, *endpoint)

	regServer := grpc.NewServer()
	registration.RegisterRegistrationServer(regServer, &registrar{name: d.name, endpoint: *kubeletEndpoint})
	go serve(regServer, filepath.Join(*registrationDir, d.name+"-reg.sock"))

	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat(d.volumesDir()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	klog.Fatal(http.ListenAndServe(*healthAddr, nil))
}

// serve listens on a unix socket, replacing one a previous run left behind.
func serve(s *grpc.Server, path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		klog.Fatal(err)
	}
	klog.Infof("serving on %s", path)
	klog.Fatal(s.Serve(l))
}

func logErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		klog.Errorf("%s: %v", info.FullMethod, err)
	} else {
		klog.V(2).Infof("%s: ok", info.FullMethod)
	}
	return resp, err
}

// registrar answers the kubelet's plugin watcher, which finds the
// registration socket in plugins_registry and asks where the CSI socket is.
type registrar struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type: registration.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		// As node-driver-registrar does: exit, so the pod restarts and the kubelet retries.
		klog.Fatalf("the kubelet refused the registration: %s", s.Error)
	}
	klog.Info("registered with the kubelet")
	return &registration.RegistrationStatusResponse{}, nil
}
