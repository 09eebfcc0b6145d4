package main

import (
	"os"
	"path/filepath"
	"testing"
)

// On a btrfs directory named by HELMR_BTRFS_DIR (skipped without one): a
// snapshot holds the volume as it was cut, not what is written after, and a
// volume restored from it is writable and independent of both.
func TestCutsAreSnapshots(t *testing.T) {
	root := os.Getenv("HELMR_BTRFS_DIR")
	if root == "" || !onBtrfs(root) {
		t.Skip("HELMR_BTRFS_DIR names no btrfs directory")
	}
	dir, err := os.MkdirTemp(root, "cow-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := driver{dataDir: dir, cow: true}
	vol, snap, restored := filepath.Join(dir, "vol"), filepath.Join(dir, "snap"), filepath.Join(dir, "restored")
	if err := d.cut("", vol, false); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(vol, "turn-1"), "1")
	if err := d.cut(vol, snap, true); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(vol, "turn-2"), "2")
	if err := d.cut(snap, restored, false); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(restored, "turn-1")) || exists(filepath.Join(restored, "turn-2")) {
		t.Fatal("the restore does not hold exactly the state cut")
	}
	write(t, filepath.Join(restored, "turn-3"), "3")
	if os.WriteFile(filepath.Join(snap, "x"), nil, 0o600) == nil {
		t.Fatal("a snapshot is writable")
	}
	for _, p := range []string{restored, snap, vol} {
		if !isSubvolume(p) {
			t.Fatalf("%s is not a subvolume", p)
		}
		if err := remove(p); err != nil {
			t.Fatal(err)
		}
		if exists(p) {
			t.Fatalf("%s not removed", p)
		}
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
