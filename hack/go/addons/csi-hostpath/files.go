package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// copyAtomically makes dst a copy of the directory tree src (an empty
// directory if src is ""), built under dst.tmp and renamed into place, so a
// crash mid-copy never leaves a dst that looks complete.
func copyAtomically(src, dst string) error {
	tmp := dst + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	var err error
	if src == "" {
		err = os.Mkdir(tmp, 0o755)
	} else {
		err = copyTree(src, tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}

// copyTree copies directories, regular files and symlinks with their
// owner, mode and modification time (what a restored workspace needs to
// look like the saved one); other file types are skipped.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			err = os.Mkdir(to, 0o700)
		case mode.IsRegular():
			err = copyFile(p, to)
		case mode&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(p); err == nil {
				err = os.Symlink(link, to)
			}
		default:
			return nil
		}
		if err != nil {
			return err
		}
		return preserve(to, info)
	})
	if err != nil {
		return err
	}
	// Directories' times last: creating their entries changed them.
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := unix.NsecToTimespec(info.ModTime().UnixNano())
		return unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dst, rel), []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// preserve gives to the owner, mode and times of info (mode after chown,
// which clears setuid/setgid bits).
func preserve(to string, info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no stat_t")
	}
	if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if info.Mode()&fs.ModeSymlink == 0 {
		perm := uint32(info.Mode().Perm())
		if info.Mode()&fs.ModeSetuid != 0 {
			perm |= unix.S_ISUID
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			perm |= unix.S_ISGID
		}
		if info.Mode()&fs.ModeSticky != 0 {
			perm |= unix.S_ISVTX
		}
		if err := unix.Chmod(to, perm); err != nil {
			return err
		}
	}
	t := unix.NsecToTimespec(info.ModTime().UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, to, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
}

// usedBytes is the disk space the tree's files take (du's figure).
func usedBytes(root string) (int64, error) {
	var used int64
	err := filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			used += st.Blocks * 512
		}
		return nil
	})
	return used, err
}

func volumeUsage(p string) ([]*csi.VolumeUsage, error) {
	used, err := usedBytes(p)
	if err != nil {
		return nil, err
	}
	var fsStat unix.Statfs_t
	if err := unix.Statfs(p, &fsStat); err != nil {
		return nil, err
	}
	bsize := int64(fsStat.Bsize)
	return []*csi.VolumeUsage{{
		Unit:      csi.VolumeUsage_BYTES,
		Total:     int64(fsStat.Blocks) * bsize,
		Available: int64(fsStat.Bavail) * bsize,
		Used:      used,
	}}, nil
}

// bindMount mounts src at target (made if missing) unless something is
// mounted there already.
func bindMount(src, target string, readonly bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	mounted, err := isMountPoint(target)
	if err != nil || mounted {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", src, target, err)
	}
	if readonly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("read-only remount of %s: %w", target, err)
		}
	}
	return nil
}

func unmount(target string) error {
	mounted, err := isMountPoint(target)
	if err != nil {
		return err
	}
	if mounted {
		if err := unix.Unmount(target, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// isMountPoint says whether /proc/self/mountinfo lists target as a mount point.
func isMountPoint(target string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	// mountinfo escapes space, tab, newline and backslash as octal.
	escaped := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(filepath.Clean(target))
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && fields[4] == escaped {
			return true, nil
		}
	}
	return false, s.Err()
}
