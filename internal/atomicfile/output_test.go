package atomicfile

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteOutput: what a user names as an output is written as a
// shell's `>` would: a file replaced atomically (through a link, which
// stays), a character device written to and left a device, a FIFO's
// reader given the data, and what cannot be written is refused by name.
func TestWriteOutput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.json")
	if err := WriteOutput(file, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("out.json", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(link, []byte("through the link"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "through the link" {
		t.Errorf("the linked file holds %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}

	// /dev/null stays the character device it is.
	if err := WriteOutput("/dev/null", []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null after WriteOutput: %v %v", fi.Mode(), err)
	}

	// A FIFO: its reader gets the data, and it stays a FIFO.
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	if err := WriteOutput(fifo, []byte("to the reader"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "to the reader" {
		t.Errorf("the FIFO's reader got %q", s)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}

	// A FIFO nobody reads: an error once the wait is over, not a hang.
	defer func(d time.Duration) { fifoReaderWait = d }(fifoReaderWait)
	fifoReaderWait = 100 * time.Millisecond
	if err := WriteOutput(fifo, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "no process opened for reading") {
		t.Errorf("a FIFO without a reader: %v", err)
	}

	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for path, want := range map[string]string{
		dir:                              "is a directory",
		sock:                             "is a socket: not written",
		filepath.Join(dir, "dangling"):   "a symbolic link to nowhere, which does not exist",
		filepath.Join(dir, "no", "such"): "no such file or directory",
	} {
		if strings.HasSuffix(path, "dangling") {
			os.Symlink("nowhere", path)
		}
		if err := WriteOutput(path, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WriteOutput(%s): %v, want %q", path, err, want)
		}
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the socket was replaced: %v", err)
	}
}
