package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func TestMain(m *testing.M) { hdfstest.Main(m) }

// testFS checks the FS contract the deployer relies on, under root.
func testFS(t *testing.T, fsys FS, root string, symlink func(target, name string) error) {
	ctx := context.Background()
	dir := path.Join(root, "a", "b")
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatalf("MkdirAll of an existing dir: %v", err)
	}
	write := func(name string, data []byte) error {
		return fsys.WriteNew(ctx, name, bytes.NewReader(data), int64(len(data)), true)
	}
	f1 := path.Join(dir, "f1")
	if err := write(f1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	// WriteNew never overwrites.
	if err := write(f1, []byte("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("WriteNew onto an existing file: %v, want ErrExist", err)
	}
	if got := read(t, fsys, f1); got != "one" {
		t.Fatalf("content %q after refused overwrite", got)
	}
	// Big enough for several concurrent write requests.
	big := make([]byte, 3<<20+123)
	rand.Read(big)
	fbig := path.Join(dir, "big")
	if err := write(fbig, big); err != nil {
		t.Fatal(err)
	}
	if got := read(t, fsys, fbig); got != string(big) {
		t.Fatalf("big file differs (%d bytes read)", len(got))
	}
	// Rename replaces a file atomically.
	f2 := path.Join(dir, "f2")
	if err := write(f2, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(f2, f1); err != nil {
		t.Fatalf("rename onto an existing file: %v", err)
	}
	if got := read(t, fsys, f1); got != "new" {
		t.Fatalf("content %q after rename", got)
	}
	if _, err := fsys.Stat(f2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat of a renamed file: %v, want ErrNotExist", err)
	}
	// A directory renames onto a missing path, not onto a full directory.
	if err := fsys.Rename(path.Join(root, "a"), path.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	other := path.Join(root, "other")
	if err := fsys.MkdirAll(other); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(other, path.Join(root, "moved")); err == nil {
		t.Fatal("rename onto a non-empty directory succeeded")
	}
	// Walk lists files and directories, relative and sorted.
	files, dirs, err := Walk(fsys, path.Join(root, "moved"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 || dirs[0] != "b" || len(files) != 2 || files[0].Path != "b/big" || files[1].Path != "b/f1" || files[0].Size != int64(len(big)) {
		t.Fatalf("Walk: %v %+v", dirs, files)
	}
	// WriteFileAtomic replaces, and leaves no temporary file.
	wf := path.Join(root, "p.json")
	for _, content := range []string{"v1", "v2"} {
		if err := WriteFileAtomic(ctx, fsys, wf, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, fsys, wf); got != content {
			t.Fatalf("WriteFileAtomic: %q", got)
		}
	}
	if entries, _ := fsys.ReadDir(root); len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("root holds %v, want moved, other, p.json", names)
	}
	// RemoveAll: recursive, nil when missing, does not follow links.
	if symlink != nil {
		keep := path.Join(root, "keep")
		if err := fsys.MkdirAll(keep); err != nil {
			t.Fatal(err)
		}
		if err := write(path.Join(keep, "precious"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := symlink(keep, path.Join(root, "moved", "link")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.RemoveAll(path.Join(root, "moved", "link")); err != nil {
			t.Fatal(err)
		}
		if got := read(t, fsys, path.Join(keep, "precious")); got != "x" {
			t.Fatal("RemoveAll followed a symbolic link")
		}
	}
	if err := fsys.RemoveAll(path.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(path.Join(root, "moved")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
	if err := fsys.RemoveAll(path.Join(root, "never")); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
	if err := fsys.Remove(wf); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(wf); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a removed file: %v", err)
	}
}

func read(t *testing.T, fsys FS, name string) string {
	t.Helper()
	data, err := ReadFile(fsys, name, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestLocalFS(t *testing.T) {
	testFS(t, Local{}, t.TempDir(), os.Symlink)
}

func TestSFTPFSInProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSFTPClient("sftp://inprocess", sshtest.InProcess(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	testFS(t, s, dir, os.Symlink)
}

// TestSFTPFSOpenSSH runs the contract against the real OpenSSH server,
// through the Connector (known_hosts, key file).
func TestSFTPFSOpenSSH(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	c := NewConnector(sshOpts(srv), hadoopconf.Options{})
	defer c.Close()
	l, err := ParseURL(srv.URL(srv.Root), "")
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := c.Open(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	s := fsys.(*SFTP)
	if !s.posixRename || s.packet != openSSHPacket {
		t.Fatalf("OpenSSH: posix-rename %v, packet %d", s.posixRename, s.packet)
	}
	// The connection is shared by every location of the server.
	again, err := c.Open(context.Background(), l.Join("x"))
	if err != nil || again != fsys {
		t.Fatalf("second Open: %v, same=%v", err, again == fsys)
	}
	testFS(t, fsys, srv.Root, os.Symlink)
	testSplitWrite(t, s, srv.Root)

	// A killed server turns into errors that say the connection was lost.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	err = fsys.WriteNew(context.Background(), path.Join(srv.Root, "late"), strings.NewReader("x"), 1, false)
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "connection to the server lost") {
		t.Fatalf("write after kill: %v", err)
	}
}

// testSplitWrite checks the uploads spread over several SFTP sessions: a
// file big enough to be written through all of them at once arrives
// intact, and one whose source fails half-way is reported and removed.
func testSplitWrite(t *testing.T, s *SFTP, root string) {
	ctx := context.Background()
	big := make([]byte, 3*splitChunk+splitMin+123) // a short last chunk
	rand.Read(big)
	for _, tc := range []struct {
		name    string
		r       func() io.Reader
		wantErr error
	}{
		{"whole", func() io.Reader { return bytes.NewReader(big) }, nil},
		{"source fails", func() io.Reader {
			return io.MultiReader(bytes.NewReader(big[:splitMin]), iotest.ErrReader(errBroken))
		}, errBroken},
		{"source short", func() io.Reader { return bytes.NewReader(big[:len(big)-1]) }, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := path.Join(root, "split-"+strings.ReplaceAll(tc.name, " ", "-"))
			err := s.WriteNew(ctx, name, tc.r(), int64(len(big)), false)
			if n := s.sessions(); n != uploadSessions {
				t.Fatalf("%d upload sessions, want %d", n, uploadSessions)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := read(t, s, name); got != string(big) {
					t.Fatalf("split write differs (%d bytes read)", len(got))
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteNew: %v, want %v", err, tc.wantErr)
			}
			if _, serr := s.Stat(name); !errors.Is(serr, fs.ErrNotExist) {
				t.Fatalf("failed write left %s behind: %v", name, serr)
			}
		})
	}
}

var errBroken = errors.New("broken source")

// TestHDFSFS runs the contract against the real mini cluster, connected
// through hadoopconf from the cluster's XML configuration.
func TestHDFSFS(t *testing.T) {
	cl := hdfstest.Shared(t)
	conf, err := hadoopconf.Load(cl.ConfDir())
	if err != nil {
		t.Fatal(err)
	}
	c := NewConnector(SSHOptions{}, hadoopconf.Options{User: cl.User()})
	defer c.Close()
	fsys, name, err := c.OpenHDFS(context.Background(), conf, Location{Scheme: "file", Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "hdfs://") {
		t.Fatalf("HDFS name %q", name)
	}
	testFS(t, fsys, "/"+t.Name(), nil)
}

// TestOpenHDFSLocal: fs.defaultFS file:/// makes the HDFS side the
// installation's own file system.
func TestOpenHDFSLocal(t *testing.T) {
	c := NewConnector(SSHOptions{}, hadoopconf.Options{})
	defer c.Close()
	fsys, name, err := c.OpenHDFS(context.Background(), hadoopconf.Conf{"fs.defaultFS": "file:///"}, Location{Scheme: "file", Path: "/w"})
	if err != nil || name != "file://" {
		t.Fatalf("%v %q", err, name)
	}
	if _, ok := fsys.(Local); !ok {
		t.Fatalf("got %T", fsys)
	}
	// An unreachable NameNode is reported naming it.
	c.HDFS = hadoopconf.Options{User: "u", DialTimeout: 2 * time.Second}
	_, _, err = c.OpenHDFS(context.Background(), hadoopconf.Conf{"fs.defaultFS": "hdfs://127.0.0.1:1"}, Location{})
	if err == nil || !strings.Contains(err.Error(), "connect to HDFS 127.0.0.1:1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("unreachable NameNode: want a refused connection naming it, got %v", err)
	}
}

// TestHDFSConcurrentFirstWrites: the deployer's first uploads on a fresh
// client run in parallel; colinmarc/hdfs fetches the server defaults
// lazily without a lock, so WriteNew must not let them race (run with
// -race).
func TestHDFSConcurrentFirstWrites(t *testing.T) {
	cl := hdfstest.Shared(t)
	pool := NewHDFSPool(nil, HDFSOptions{Client: hadoopconf.Options{User: cl.User()}})
	defer pool.Close()
	fsys, err := pool.FS(cl.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	dir := "/" + t.Name()
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	defer fsys.RemoveAll(dir)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := []byte(fmt.Sprintf("file %d", i))
			errs[i] = fsys.WriteNew(context.Background(), fmt.Sprintf("%s/f%d", dir, i), bytes.NewReader(data), int64(len(data)), true)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write f%d: %v", i, err)
		}
	}
}
