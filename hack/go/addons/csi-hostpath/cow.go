package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Constant-time cuts, the way real storage takes them: when the data
// directory is a btrfs filesystem (hack/storage.sh mounts one from a loop
// file), every volume is a subvolume, a snapshot is a read-only snapshot of
// it and a restore a writable snapshot of that, each a metadata operation
// whose cost does not grow with the volume's size (it flushes the volume's
// dirty pages first, as any crash-consistent cut does). On another
// filesystem the driver copies the tree, as it always did.
//
// The btrfs ioctls (linux/btrfs.h), which x/sys/unix does not name. Both
// argument structs are 4096 bytes, so each request is _IOW(0x94, nr, 4096).
const (
	btrfsSuperMagic  = 0x9123683e
	btrfsFirstFreeID = 256 // the inode number of every subvolume's root
	iocSubvolCreate  = 0x5000940e
	iocSnapDestroy   = 0x5000940f
	iocSnapCreateV2  = 0x50009417
	subvolReadOnly   = 1 << 1
)

type btrfsVolArgs struct {
	fd   int64
	name [4088]byte
}

type btrfsVolArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [4040]byte
}

// onBtrfs says whether dir is on a btrfs filesystem.
func onBtrfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && uint32(st.Type) == btrfsSuperMagic
}

// isSubvolume says whether p is the root of a btrfs subvolume.
func isSubvolume(p string) bool {
	info, err := os.Lstat(p)
	if err != nil || !info.IsDir() {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Ino == btrfsFirstFreeID && onBtrfs(p)
}

// ioctlIn runs a btrfs ioctl on the directory that holds dst, naming dst's
// base name in the argument (name, a slice of the argument struct).
func ioctlIn(dst string, req uintptr, name []byte, arg unsafe.Pointer) error {
	base := filepath.Base(dst)
	if len(base) >= len(name) {
		return errors.New("name too long for a subvolume: " + base)
	}
	copy(name, base)
	dir, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer dir.Close()
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, dir.Fd(), req, uintptr(arg)); errno != 0 {
		return &os.PathError{Op: "btrfs ioctl", Path: dst, Err: errno}
	}
	return nil
}

func createSubvolume(dst string) error {
	var args btrfsVolArgs
	return ioctlIn(dst, iocSubvolCreate, args.name[:], unsafe.Pointer(&args))
}

// snapshotSubvolume makes dst a snapshot of the subvolume src, atomically: it
// appears whole or not at all.
func snapshotSubvolume(src, dst string, readonly bool) error {
	from, err := os.Open(src)
	if err != nil {
		return err
	}
	defer from.Close()
	args := btrfsVolArgsV2{fd: int64(from.Fd())}
	if readonly {
		args.flags = subvolReadOnly
	}
	return ioctlIn(dst, iocSnapCreateV2, args.name[:], unsafe.Pointer(&args))
}

func deleteSubvolume(p string) error {
	var args btrfsVolArgs
	return ioctlIn(p, iocSnapDestroy, args.name[:], unsafe.Pointer(&args))
}

// cut makes dst from src (an empty volume if src is ""): a snapshot of the
// subvolume src when the data directory is btrfs, else a copy.
func (d *driver) cut(src, dst string, readonly bool) error {
	switch {
	case !d.cow:
		return copyAtomically(src, dst)
	case src == "":
		return createSubvolume(dst)
	case isSubvolume(src):
		return snapshotSubvolume(src, dst, readonly)
	default: // made before the data directory was btrfs
		return copyAtomically(src, dst)
	}
}

// remove deletes a volume or snapshot, subvolume or directory tree.
func remove(p string) error {
	if isSubvolume(p) {
		if err := deleteSubvolume(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.RemoveAll(p)
}
