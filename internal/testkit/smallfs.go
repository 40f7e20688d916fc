package testkit

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size bytes on a new directory for the test and unmounts it
// when the test ends. Mounting needs root (CI runs as root); elsewhere the test is
// skipped, saying why: a full disk cannot be made without a filesystem of its own.
func SmallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "smallfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: filling a disk needs a small filesystem of its own, and mounting a tmpfs needs root (CI runs as root)")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("skipped: mount a %d-byte tmpfs on %s: %v (a container without CAP_SYS_ADMIN?)", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes path until the filesystem holding it is full, then gives back keep
// bytes (truncating the file), so about keep bytes stay free. It returns the size written.
func FillDisk(t *testing.T, path string, keep int64) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; i < 1<<16; i++ { // at most 4 GiB: the filesystem is smaller
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	// A short last write may have filled the last bytes: write single pages to the end.
	for i := 0; i < 16; i++ {
		if _, err := f.Write(chunk[:4096]); err != nil {
			break
		}
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	n := max(st.Size()-keep, 0)
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	return n
}

// EmptyWAL copies the write-ahead log of the database at path into the file and
// truncates it, through a connection of its own (the service's stay open). A full-disk
// test calls it before FillDisk: a log left with room in it would take the next writes
// however full the disk is.
func EmptyWAL(t *testing.T, path string) {
	t.Helper()
	c, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var busy, frames, done int
	if err := c.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint %s: busy %d, %v", path, busy, err)
	}
}
