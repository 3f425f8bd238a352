package statepg

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/statedb"
)

// TestExportIntoAnEmptiedBucket: a file store whose register bucket had
// all its keys removed holds no bucket, as PostgreSQL would: an export
// into it is not refused as "the destination holds register buckets the
// source does not".
func TestExportIntoAnEmptiedBucket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, _ := openTest(t)
	if err := db.PutRegister("b", "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	edb, err := statedb.OpenWith(out, statedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer edb.Close()
	if err := edb.PutRegister("emptied", "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := edb.DeleteRegister("emptied", "k"); err != nil {
		t.Fatal(err)
	}
	sum, err := Export(ctx, db, edb, nil)
	if err != nil {
		t.Fatalf("export into a directory with an emptied bucket: %v", err)
	}
	if sum.Counts.Registers != 1 {
		t.Errorf("export copied %d registers, want 1", sum.Counts.Registers)
	}
}
