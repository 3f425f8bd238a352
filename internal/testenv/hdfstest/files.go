package hdfstest

import (
	"io"
	"path"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// WriteFile writes data to p through fs, for a test's input: the parent
// directories are made, a file already at p is replaced, and the close
// waits out the NameNode's "replication in progress". It fails the test on
// an error.
func WriteFile(t testing.TB, fs *hdfs.Client, p, data string) {
	t.Helper()
	if err := fs.MkdirAll(path.Dir(p), 0o755); err != nil {
		t.Fatalf("hdfstest: write %s: %v", p, err)
	}
	_ = fs.Remove(p)
	w, err := fs.Create(p)
	if err != nil {
		t.Fatalf("hdfstest: write %s: %v", p, err)
	}
	if data != "" { // an empty Write would open a block that never fills
		if _, err := io.WriteString(w, data); err != nil {
			w.Close()
			t.Fatalf("hdfstest: write %s: %v", p, err)
		}
	}
	if err := closeReplicated(w); err != nil {
		t.Fatalf("hdfstest: write %s: %v", p, err)
	}
}

// closeReplicated closes w, trying again for up to 5 s while the NameNode
// has not seen the last block's replica yet (a close can race the
// DataNode's block report on a busy machine).
func closeReplicated(w *hdfs.FileWriter) error {
	for i := 0; ; i++ {
		err := w.Close()
		if !hdfs.IsErrReplicating(err) || i == 50 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
