package trigger_test

// Event triggers over the real stores: the step's lookups, its listing
// (chosen by RegisterCosts) and a plain listing answer alike.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

type regStore interface {
	trigger.Registers
	trigger.RegisterLookup
	PutRegister(bucket, key string, value json.RawMessage) error
	DeleteRegister(bucket, key string) error
}

// eventAnswer is what an event trigger on bucket/key says through env:
// ready, or an error.
func eventAnswer(env trigger.Env, bucket, key string) (ready bool, failed bool) {
	t := &workflow.Trigger{Type: workflow.TriggerEvent, Bucket: bucket, Key: key}
	st := trigger.Evaluate(context.Background(), env, t, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), time.Now())
	return st.Ready, st.Error != ""
}

// checkParity asks for each key through a step that looks keys up, a
// step that lists the bucket (RegisterCosts at its first step) and a
// plain listing of the bucket, and wants the same answers.
func checkParity(t *testing.T, db regStore, buckets, keys []string) {
	t.Helper()
	for _, bucket := range buckets {
		listed, lerr := db.RegisterKeys(bucket, "")
		lookups := trigger.NewStepEnv(nil, nil, db)
		listing := trigger.NewStepEnv(nil, nil, db).WithRegisterCosts(&trigger.RegisterCosts{})
		for _, key := range keys {
			want, wantErr := slices.Contains(listed, key), lerr != nil
			for name, env := range map[string]trigger.Env{"lookups": lookups, "listing": listing} {
				got, gotErr := eventAnswer(env, bucket, key)
				if got != want || gotErr != wantErr {
					t.Errorf("%s: event %s/%q: ready %v, error %v; the listing says %v, error %v (%v)", name, bucket, key, got, gotErr, want, wantErr, lerr)
				}
			}
		}
	}
}

// TestEventLookupsAsListingFileStore: a bucket directory with entries
// written by hand (directories, links to a directory and to nothing,
// FIFOs, names in upper case, of 255 bytes, with control characters), a
// bucket that is a file, a link or a FIFO, the register directory
// missing: an event trigger answers as the listing, error included.
func TestEventLookupsAsListingFileStore(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	long := strings.Repeat("k", 255)
	keys := []string{"ka", "KA", "Ka", "adir", "dirlink", "deadlink", "afifo", long, "bad\x01name", "bad\x7fname", "missing", "", strings.Repeat("k", 300), "é", "e\u0301"}
	checkParity(t, db, []string{"b", "a/b", ""}, keys) // before any register directory
	for _, k := range []string{"ka", "KA", long, "é"} {
		if err := db.PutRegister("b", k, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	reg := filepath.Join(dir, "register")
	bdir := filepath.Join(reg, "b")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(bdir, "adir"), 0o755))
	must(os.Symlink(filepath.Join(bdir, "adir"), filepath.Join(bdir, "dirlink")))
	must(os.Symlink("/nonexistent", filepath.Join(bdir, "deadlink")))
	must(syscall.Mkfifo(filepath.Join(bdir, "afifo"), 0o644))
	for _, name := range []string{"bad\x01name", "bad\x7fname"} {
		must(os.WriteFile(filepath.Join(bdir, name), []byte("{}"), 0o644))
	}
	must(os.WriteFile(filepath.Join(reg, "file"), []byte("{}"), 0o644))
	must(os.Symlink(bdir, filepath.Join(reg, "link")))
	must(syscall.Mkfifo(filepath.Join(reg, "fifo"), 0o644))
	checkParity(t, db, []string{"b", "file", "link", "fifo", "none", "a/b", ""}, keys)
}

// TestEventLookupsAsListingPostgres: the same on PostgreSQL, and with
// another instance writing and deleting registers: within a step a key
// keeps the answer it was first given (looked up or listed), the next
// step sees the change, whichever read RegisterCosts chooses.
func TestEventLookupsAsListingPostgres(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	open := func() *statepg.DB {
		db, err := statepg.Open(context.Background(), dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, other := open(), open()
	long := strings.Repeat("k", 255)
	for _, k := range []string{"ka", "KA", long, "é"} {
		if err := other.PutRegister("b", k, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"ka", "KA", "Ka", "ka ", long, "bad\x01name", "nul\x00name", "\xff", "missing", "", strings.Repeat("k", 300), "é", "e\u0301"}
	checkParity(t, db, []string{"b", "none", "a/b", "", "\xff"}, keys)

	var costs trigger.RegisterCosts
	for step := range 12 { // the choice turns between listing and lookups
		env := trigger.NewStepEnv(nil, nil, db).WithRegisterCosts(&costs)
		before, _ := eventAnswer(env, "b", "new")
		if err := other.PutRegister("b", "new", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if got, _ := eventAnswer(env, "b", "new"); got != before {
			t.Errorf("step %d: b/new written by another instance during the step: %v, then %v in the same step", step, before, got)
		}
		if got, _ := eventAnswer(trigger.NewStepEnv(nil, nil, db).WithRegisterCosts(&costs), "b", "new"); !got {
			t.Errorf("step %d: b/new written: not seen by the next step", step)
		}
		if err := other.DeleteRegister("b", "new"); err != nil {
			t.Fatal(err)
		}
		if got, _ := eventAnswer(trigger.NewStepEnv(nil, nil, db).WithRegisterCosts(&costs), "b", "new"); got {
			t.Errorf("step %d: b/new deleted by another instance: still seen by the next step", step)
		}
	}
}
