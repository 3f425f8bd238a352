package regfile_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/google/go-cmp/cmp"
)

// TestRefusesWhatIsNotARegularFile: a FIFO (with no writer: opening or
// reading it would block forever), a socket, a directory, a device, and
// symbolic links to them are refused, naming the file and what it is,
// within a deadline; a symbolic link to a regular file is read.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	if err := syscall.Mkfifo(p("fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p("sock.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Mkdir(p("dir.json"), 0o755)
	os.WriteFile(p("regular"), []byte(`{}`), 0o644)
	links := map[string]string{
		"zero.json":     "/dev/zero",
		"tofifo.json":   p("fifo.json"),
		"dangling.json": p("missing"),
		"good.json":     p("regular"),
	}
	for name, target := range links {
		if err := os.Symlink(target, p(name)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, want string // want "" means read
	}{
		{"fifo.json", "fifo.json: not a regular file (named pipe)"},
		{"sock.json", "sock.json: not a regular file (socket)"},
		{"dir.json", "dir.json: not a regular file (directory)"},
		{"zero.json", "zero.json: not a regular file (symbolic link to a character device)"},
		{"tofifo.json", "tofifo.json: not a regular file (symbolic link to a named pipe)"},
		{"dangling.json", "dangling.json: symbolic link to something that cannot be read: no such file or directory"},
		{"good.json", ""},
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		tests = append(tests, struct{ name, want string }{"/dev/null", "/dev/null: not a regular file (character device)"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.name
			if !filepath.IsAbs(path) {
				path = p(tt.name)
			}
			type result struct {
				data []byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				data, err := regfile.ReadFile(path, 1<<20)
				done <- result{data, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("ReadFile(%s) still blocked after 60s", tt.name)
			}
			if tt.want == "" {
				if r.err != nil || string(r.data) != "{}" {
					t.Fatalf("ReadFile = %q, %v; want {}", r.data, r.err)
				}
				return
			}
			if r.err == nil || !strings.HasSuffix(r.err.Error(), tt.want) {
				t.Fatalf("ReadFile = %v; want an error ending in %q", r.err, tt.want)
			}
			if strings.Contains(tt.want, "not a regular file") && !errors.Is(r.err, regfile.ErrNotRegular) {
				t.Errorf("%v does not wrap ErrNotRegular", r.err)
			}
		})
	}
}

// TestBoundIsOnBytesRead: a file that claims size 0 (a /proc file behind a
// symbolic link) but holds more than the bound is refused.
func TestBoundIsOnBytesRead(t *testing.T) {
	fi, err := os.Stat("/proc/self/maps")
	if err != nil || fi.Size() != 0 {
		t.Skip("needs Linux /proc (a regular file that claims size 0)")
	}
	link := filepath.Join(t.TempDir(), "maps.json")
	os.Symlink("/proc/self/maps", link)
	if _, err := regfile.ReadFile(link, 16); !errors.Is(err, regfile.ErrTooLarge) {
		t.Fatalf("ReadFile of a 0-size /proc file over the bound: %v, want ErrTooLarge", err)
	}
	small := filepath.Join(t.TempDir(), "small")
	os.WriteFile(small, []byte("0123456789abcdef"), 0o644)
	if data, err := regfile.ReadFile(small, 16); err != nil || len(data) != 16 {
		t.Fatalf("ReadFile of exactly the bound: %d bytes, %v", len(data), err)
	}
	if _, err := regfile.ReadFile(small, 15); !errors.Is(err, regfile.ErrTooLarge) {
		t.Fatalf("ReadFile of one byte over the bound: %v", err)
	}
}

// TestNoFollowRefusesSymlinks: the NoFollow variants refuse a symbolic
// link even to a regular file, and read a regular file.
func TestNoFollowRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	file, link := filepath.Join(dir, "f"), filepath.Join(dir, "l")
	os.WriteFile(file, []byte("x"), 0o644)
	os.Symlink(file, link)
	if _, err := regfile.ReadFileNoFollow(link, 10); !errors.Is(err, regfile.ErrNotRegular) || !strings.HasSuffix(err.Error(), "l: not a regular file (symbolic link)") {
		t.Fatalf("ReadFileNoFollow(symlink) = %v", err)
	}
	if data, err := regfile.ReadFileNoFollow(file, 10); err != nil || string(data) != "x" {
		t.Fatalf("ReadFileNoFollow(file) = %q, %v", data, err)
	}
}

// TestReadFileIntoReusesAndGrows: a buffer smaller than the file grows;
// one large enough is reused.
func TestReadFileIntoReusesAndGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := strings.Repeat("0123456789", 10000)
	os.WriteFile(path, []byte(want), 0o644)
	buf, err := regfile.ReadFileInto(make([]byte, 3, 10), path, 1<<20)
	if err != nil || string(buf) != want {
		t.Fatalf("ReadFileInto into a small buffer: %d bytes, %v", len(buf), err)
	}
	again, err := regfile.ReadFileInto(buf, path, 1<<20)
	if err != nil || string(again) != want || &again[0] != &buf[0] {
		t.Fatalf("ReadFileInto did not reuse a large enough buffer (%v)", err)
	}
}

func TestSize(t *testing.T) {
	got := []string{regfile.Size(100), regfile.Size(1024), regfile.Size(1500), regfile.Size(64 << 20)}
	if d := cmp.Diff([]string{"100 bytes", "1 KiB", "1500 bytes", "64 MiB"}, got); d != "" {
		t.Fatal(d)
	}
}

func TestReadAllAndCheck(t *testing.T) {
	if _, err := regfile.ReadAll(strings.NewReader("12345"), "in", 4); !errors.Is(err, regfile.ErrTooLarge) || err.Error() != "read in: larger than 4 bytes" {
		t.Errorf("ReadAll of 5 bytes, limit 4: %v", err)
	}
	if got, err := regfile.ReadAll(strings.NewReader("1234"), "in", 4); err != nil || string(got) != "1234" {
		t.Errorf("ReadAll of 4 bytes, limit 4: %q, %v", got, err)
	}
	fi, err := os.Stat("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if err := regfile.Check(fi); !errors.Is(err, regfile.ErrNotRegular) || err.Error() != "not a regular file (character device)" {
		t.Errorf("regfile.Check(/dev/null) = %v", err)
	}
}
