package trigger

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// TestDataVolumeSpecialEntries: what a dataVolume trigger counts on the
// local file system when the input area holds more than regular files.
// The listing took every entry's lstat: a symbolic link to a data file
// (an operator's link into another disk) counted with the size of the
// link, a few bytes, so minBytes was never reached, and a link to a
// directory, a dangling link, a FIFO, a socket counted as files. Now a
// link is followed (its target's size; a link to a directory or to
// nothing is not a file), and only regular files count. The directory
// itself being a FIFO is refused without opening it for reading (no
// hang).
func TestDataVolumeSpecialEntries(t *testing.T) {
	root := t.TempDir()
	mkfifo := func(p string) {
		t.Helper()
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkfifo(filepath.Join(root, "2014-01-01"))
	day := filepath.Join(root, "2014-01-02")
	writeFile(t, filepath.Join(day, "part-0"), 1000)
	mkfifo(filepath.Join(day, "part-1"))
	writeFile(t, filepath.Join(root, "elsewhere", "big"), 5000)
	writeFile(t, filepath.Join(root, "elsewhere", "dir", "x"), 7000)
	for name, target := range map[string]string{"part-2": "elsewhere/big", "part-3": "elsewhere/dir", "part-4": "elsewhere/none"} {
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(day, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := Env{FS: NewMux("")}
	for _, tc := range []struct {
		name         string
		slot         time.Time
		files, bytes int64
	}{
		{"the directory is a FIFO", time.Date(2014, 1, 1, 5, 0, 0, 0, time.UTC), 0, 0},
		{"links and a FIFO among the files", time.Date(2014, 1, 2, 5, 0, 0, 0, time.UTC), 2, 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trig := dataVolume(filepath.ToSlash(root)+"/${year}-${month}-${day}/part-*", 1, 6000)
			done := make(chan Status, 1)
			go func() { done <- Evaluate(context.Background(), env, &trig, tc.slot, tc.slot) }()
			select {
			case st := <-done:
				if st.Files == nil || *st.Files != tc.files || *st.Bytes != tc.bytes || st.Ready != (tc.bytes >= 6000) {
					t.Fatalf("status %+v (files %v, bytes %v), want %d files, %d bytes", st, deref(st.Files), deref(st.Bytes), tc.files, tc.bytes)
				}
			case <-time.After(30 * time.Second):
				if f, err := os.OpenFile(filepath.Join(root, "2014-01-01"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close() // (unblocks the open, so that the test ends)
				}
				t.Fatal("the dataVolume trigger hangs on a FIFO")
			}
		})
	}
}

// TestHdfsCheckSpecialPaths (pre-release sweep, held): an hdfsCheck on
// file: only asks stat: a FIFO exists (never opened, no hang), a link to
// a file or a directory exists, a dangling link does not, a loop of links
// is an error of the slot.
func TestHdfsCheckSpecialPaths(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "file"), 1)
	for name, target := range map[string]string{"tofile": "file", "todir": ".", "dangling": "none", "loop1": "loop2", "loop2": "loop1"} {
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name         string
		ready, error bool
	}{
		{"fifo", true, false}, {"tofile", true, false}, {"todir", true, false},
		{"dangling", false, false}, {"loop1", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trig := workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: filepath.ToSlash(filepath.Join(root, tc.name)), FS: "file:///"}
			done := make(chan Status, 1)
			go func() { done <- Evaluate(context.Background(), Env{FS: NewMux("")}, &trig, slotTime, slotTime) }()
			select {
			case st := <-done:
				if st.Ready != tc.ready || (st.Error != "") != tc.error {
					t.Fatalf("status %+v, want ready=%v error=%v", st, tc.ready, tc.error)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("hdfsCheck hangs")
			}
		})
	}
}
