package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"toreg": reg, "tofifo": fifo, "tozero": "/dev/zero", "tonull": "/dev/null", "todir": dir}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		Data string
		Err  string
	}
	got := map[string]result{}
	for _, name := range []string{"reg", "toreg", "fifo", "tofifo", "tozero", "tonull", "todir", "missing"} {
		data, err := ReadFile(filepath.Join(dir, name), 5)
		r := result{Data: string(data)}
		if err != nil {
			r.Err = strings.ReplaceAll(err.Error(), dir, "DIR")
		}
		got[name] = r
	}
	want := map[string]result{
		"reg":     {Data: "12345"},
		"toreg":   {Data: "12345"},
		"fifo":    {Err: "open DIR/fifo: is a named pipe (FIFO), not a regular file"},
		"tofifo":  {Err: "open DIR/tofifo: is a named pipe (FIFO), not a regular file"},
		"tozero":  {Err: "open DIR/tozero: is a character device, not a regular file"},
		"tonull":  {Err: "open DIR/tonull: is a character device, not a regular file"},
		"todir":   {Err: "open DIR/todir: is a directory, not a regular file"},
		"missing": {Err: "stat DIR/missing: no such file or directory"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadFile (-want +got):\n%s", d)
	}
	_, err := ReadFile(filepath.Join(dir, "tofifo"), 5)
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("errors.Is(%v, ErrNotRegular) is false", err)
	}
	_, err = ReadFile(reg, 4)
	if !errors.Is(err, ErrTooLarge) || !strings.HasSuffix(err.Error(), "reg: larger than 4 bytes") {
		t.Fatalf("a 5-byte file with a limit of 4: %v", err)
	}
}

func TestSize(t *testing.T) {
	got := []string{Size(100), Size(1024), Size(1500), Size(64 << 20)}
	if d := cmp.Diff([]string{"100 bytes", "1 KiB", "1500 bytes", "64 MiB"}, got); d != "" {
		t.Fatal(d)
	}
}
