package deploy

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/targets"
)

// freezingFS freezes the cluster before the first file of the upload is
// created, so the next NameNode call (create) meets a stalled NameNode.
type freezingFS struct {
	targets.FS
	once   *sync.Once
	freeze func()
}

func (f *freezingFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	if strings.HasPrefix(f.FS.String(), "hdfs://") {
		f.once.Do(f.freeze)
	}
	return f.FS.WriteNew(ctx, name, r, size, durable)
}

// TestDeployNameNodeStalled: the mini cluster's JVM is frozen (SIGSTOP) in
// the middle of a redeploy, when the upload creates its first file. The
// NameNode's port still accepts and the kernel still acknowledges, but
// nothing answers. The deploy fails within its per-operation deadlines,
// naming the operation and the NameNode, and the previous deployment is
// intact; once the NameNode answers again a rerun succeeds.
func TestDeployNameNodeStalled(t *testing.T) {
	const callTimeout = 2 * time.Second
	// Every HDFS operation after the freeze waits at most callTimeout, and
	// after the first failure the file system is not dialled again for the
	// cool-down: the deploy ends within a few call timeouts.
	const bound = 10 * callTimeout
	f := newNameNodeFixture(t, callTimeout)
	cl := f.cl
	t.Cleanup(func() { cl.Thaw() })
	ctx := context.Background()
	before, beforeWF := f.deployFirst(t)

	f.project = project("wordcount", "wordcount-v2")
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"lib/new.jar": "new"})
	f.newConn()
	var once sync.Once
	var frozen time.Time
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &freezingFS{FS: fsys, once: &once, freeze: func() {
			if err := cl.Freeze(); err != nil {
				t.Error(err)
			}
			frozen = time.Now()
		}}
	}
	o := f.hdfsOptions()
	done := make(chan error, 1)
	go func() {
		_, err := Deploy(ctx, o)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(bound + 30*time.Second):
		cl.Thaw()
		t.Fatalf("deploy still running %s after the NameNode froze: a stalled NameNode hangs it", time.Since(frozen).Round(time.Second))
	}
	took := time.Since(frozen)
	t.Logf("NameNode frozen mid-upload: failed after %s: %v", took.Round(time.Millisecond), err)
	if frozen.IsZero() {
		t.Fatal("the upload never started")
	}
	var se *StepError
	if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact {
		t.Fatalf("want an intact failure at the upload, got %v", err)
	}
	for _, want := range []string{"create", "hdfs://" + cl.Addr(), "no answer from the NameNode"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if took > bound {
		t.Errorf("deploy failed %s after the freeze; want within %s", took, bound)
	}
	if got := tree(t, f.wfDir)["wordcount.json"]; got != beforeWF {
		t.Fatal("workflows file changed")
	}

	if err := cl.Thaw(); err != nil {
		t.Fatal(err)
	}
	f.intactThenRerun(t, before)
}
