package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/celos-go/celos/targets/hadoopconf"
)

// silentNameNode accepts connections and never answers.
func silentNameNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // hold it open, say nothing
		}
	}()
	return ln.Addr().String()
}

// TestHDFSCallTimeout: every operation on a NameNode that accepts and
// then says nothing ends with the call timeout, naming the operation and
// the file system; during the cool-down the next ones fail at once.
func TestHDFSCallTimeout(t *testing.T) {
	addr := silentNameNode(t)
	const timeout = 300 * time.Millisecond
	pool := NewHDFSPool(nil, HDFSOptions{Client: hadoopconf.Options{User: "celos"}, CallTimeout: timeout, CoolDown: time.Minute})
	defer pool.Close()
	h, err := pool.FS("hdfs://" + addr + "/ignored")
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := pool.FS("hdfs://" + strings.ToUpper(addr)); h2 != h {
		t.Error("two file systems for one authority")
	}
	start := time.Now()
	_, err = h.Stat("/x")
	if took := time.Since(start); took > 10*timeout {
		t.Errorf("stat took %s with a call timeout of %s", took, timeout)
	}
	want := "stat hdfs://" + addr + "/x: no answer from the NameNode"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("stat: %v; want %q", err, want)
	}
	ops := map[string]func() error{
		"mkdir":  func() error { return h.MkdirAll("/d") },
		"list":   func() error { _, err := h.ReadDir("/d"); return err },
		"rename": func() error { return h.Rename("/a", "/b") },
		"remove": func() error { return h.RemoveAll("/d") },
		"open":   func() error { _, err := h.Open("/f"); return err },
		"create": func() error { return h.WriteNew(context.Background(), "/f", strings.NewReader("x"), 1, true) },
	}
	for op, f := range ops {
		start := time.Now()
		err := f()
		if err == nil || !strings.Contains(err.Error(), op+" hdfs://"+addr) || !strings.Contains(err.Error(), "not retried for") {
			t.Errorf("%s during the cool-down: %v; want the last failure, not retried", op, err)
		}
		if took := time.Since(start); took > timeout {
			t.Errorf("%s during the cool-down took %s", op, took)
		}
	}
	if st := pool.Stats(); st.Connects != 1 || st.Calls != 1 {
		t.Errorf("stats %+v: want one connection, one call sent", st)
	}
}

// TestConnFailure: a NameNode's refusal keeps the client; a broken or
// silent connection drops it.
func TestConnFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "stat", Path: "/x", Err: os.ErrNotExist}, false},
		{&os.PathError{Op: "create", Path: "/x", Err: os.ErrExist}, false},
		{&os.PathError{Op: "mkdir", Path: "/x", Err: os.ErrPermission}, false},
		{&os.PathError{Op: "remove", Path: "/x", Err: syscall.ENOTEMPTY}, false},
		{&os.PathError{Op: "create", Path: "/x", Err: hdfs.ErrReplicating}, false},
		{&os.PathError{Op: "open", Path: "/x", Err: errors.New("is a directory")}, false},
		{context.Canceled, false},
		{&os.PathError{Op: "stat", Path: "/x", Err: io.EOF}, true},
		{&os.PathError{Op: "stat", Path: "/x", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, true},
		{&os.PathError{Op: "stat", Path: "/x", Err: fmt.Errorf("no available namenodes: %s", "refused")}, true},
		{&os.PathError{Op: "stat", Path: "/x", Err: errors.New("unexpected sequence number")}, true},
		{errors.New("something else"), true},
		{fs.ErrClosed, true},
	} {
		if got := connFailure(tc.err); got != tc.want {
			t.Errorf("connFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
