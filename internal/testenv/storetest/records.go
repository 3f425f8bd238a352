package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// Records is what a state store offers beside slot states and registers:
// the owners of workflow ids and the submissions run constraints count.
type Records interface {
	Owners() (map[string]store.Owner, error)
	SetOwner(wf string, o store.Owner) error
	DeleteOwner(wf string) error
	WriteOwners(set map[string]store.Owner, remove []string) map[string]error
	Runs(wf string) ([]store.Run, error)
	PutRuns(set map[string][]store.Run) map[string]error
	Close() error
}

// RunRecords runs the owner and submission records suite; open returns a
// new, empty store.
func RunRecords(t *testing.T, open func(t *testing.T) Records) {
	t.Run("Owners", func(t *testing.T) { owners(t, open(t), open(t)) })
	t.Run("OwnerNames", func(t *testing.T) { ownerNames(t, open(t)) })
	t.Run("Runs", func(t *testing.T) { runs(t, open(t)) })
	t.Run("RecordsClosed", func(t *testing.T) { recordsClosed(t, open(t)) })
}

// badWorkflows are refused as a workflow id by every record call.
var badWorkflows = map[string]string{
	"empty":       "",
	"slash":       "a/b",
	"backslash":   `a\b`,
	"dot":         ".",
	"dot-dot":     "..",
	"leading dot": ".hidden",
	"newline":     "a\nb",
	"NUL":         "a\x00b",
	"DEL":         "a\x7fb",
	"not UTF-8":   "a\xffb",
	"256 bytes":   strings.Repeat("w", 256),
}

// owners: WriteOwners leaves the records as SetOwner and DeleteOwner of
// each would (a workflow both set and removed is set); owners' fields
// round-trip as given.
func owners(t *testing.T, one, batch Records) {
	for _, db := range []Records{one, batch} {
		if err := db.SetOwner("old", store.Owner{Project: "p0", File: "p0.json"}); err != nil {
			t.Fatal(err)
		}
		if err := db.SetOwner("gone", store.Owner{Project: "p0", File: "p0.json"}); err != nil {
			t.Fatal(err)
		}
	}
	set := map[string]store.Owner{
		"old":                    {Project: "p1", File: "p1.json"},
		"new.with.dot":           {Project: "ünï", File: "a file with spaces.json"},
		strings.Repeat("w", 255): {Project: "p2", File: "p2.json"},
		"both":                   {Project: "p3", File: "p3.json"},
	}
	for wf, o := range set {
		if err := one.SetOwner(wf, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := one.DeleteOwner("gone"); err != nil {
		t.Fatal(err)
	}
	if err := one.DeleteOwner("missing"); err != nil {
		t.Errorf("DeleteOwner of a workflow without an owner: %v", err)
	}
	if failed := batch.WriteOwners(set, []string{"gone", "missing", "both"}); failed != nil {
		t.Fatalf("WriteOwners: %v", failed)
	}
	a, err := one.Owners()
	if err != nil {
		t.Fatal(err)
	}
	b, err := batch.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("owners after SetOwner/DeleteOwner each (-) and WriteOwners (+):\n%s", d)
	}
	want := map[string]store.Owner{"old": set["old"], "new.with.dot": set["new.with.dot"], strings.Repeat("w", 255): set[strings.Repeat("w", 255)], "both": set["both"]}
	if d := cmp.Diff(want, a); d != "" {
		t.Errorf("owners (-want +got):\n%s", d)
	}
	if failed := batch.WriteOwners(nil, nil); failed != nil {
		t.Errorf("an empty WriteOwners: %v", failed)
	}
}

// ownerNames: a bad workflow id is refused by every owner call with
// store.ErrBadName, writing nothing, and a good one beside it in a batch is
// written.
func ownerNames(t *testing.T, db Records) {
	o := store.Owner{Project: "p", File: "p.json"}
	for what, bad := range badWorkflows {
		if err := db.SetOwner(bad, o); !errors.Is(err, store.ErrBadName) {
			t.Errorf("SetOwner of %s: %v, want ErrBadName", what, err)
		}
		if err := db.DeleteOwner(bad); !errors.Is(err, store.ErrBadName) {
			t.Errorf("DeleteOwner of %s: %v, want ErrBadName", what, err)
		}
		failed := db.WriteOwners(map[string]store.Owner{bad: o, "good": o}, nil)
		if len(failed) != 1 || !errors.Is(failed[bad], store.ErrBadName) {
			t.Errorf("WriteOwners setting %s: %v, want ErrBadName for it alone", what, failed)
		}
		failed = db.WriteOwners(nil, []string{bad})
		if len(failed) != 1 || !errors.Is(failed[bad], store.ErrBadName) {
			t.Errorf("WriteOwners removing %s: %v, want ErrBadName", what, failed)
		}
		if failed := db.PutRuns(map[string][]store.Run{bad: {{Slot: time.Unix(0, 0).UTC(), At: time.Unix(1, 0).UTC()}}}); !errors.Is(failed[bad], store.ErrBadName) {
			t.Errorf("PutRuns of %s: %v, want ErrBadName", what, failed)
		}
		if _, err := db.Runs(bad); !errors.Is(err, store.ErrBadName) {
			t.Errorf("Runs of %s: %v, want ErrBadName", what, err)
		}
	}
	got, err := db.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]store.Owner{"good": o}, got); d != "" {
		t.Errorf("owners after bad names (-want +got):\n%s", d)
	}
}

// runs: PutRuns replaces a workflow's record whole, as given, and leaves
// the other workflows' alone; times come back in UTC to the millisecond
// (store.CeilMilli), oldest first; an empty record removes it; a workflow
// without one has none.
func runs(t *testing.T, db Records) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	h := func(n int) time.Time { return time.Date(2026, 3, 8, n, 0, 0, 0, time.UTC) }
	first := map[string][]store.Run{
		"a": {{Slot: h(2), Attempt: 0, At: h(2).Add(time.Second)}, {Slot: h(1), Attempt: 1, At: h(1).Add(1500 * time.Microsecond).In(ny)}},
		"b": {{Slot: h(3), Attempt: 2, At: h(3)}},
	}
	if failed := db.PutRuns(first); failed != nil {
		t.Fatalf("PutRuns: %v", failed)
	}
	got, err := db.Runs("a")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Run{
		{Slot: h(1), Attempt: 1, At: h(1).Add(2 * time.Millisecond)},
		{Slot: h(2), Attempt: 0, At: h(2).Add(time.Second)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("runs of a (-want +got):\n%s", d)
	}
	if failed := db.PutRuns(map[string][]store.Run{"a": {{Slot: h(4), At: h(4)}}, "c": nil}); failed != nil {
		t.Fatalf("PutRuns: %v", failed)
	}
	for wf, want := range map[string][]store.Run{"a": {{Slot: h(4), At: h(4)}}, "b": {{Slot: h(3), Attempt: 2, At: h(3)}}, "c": nil, "none": nil} {
		got, err := db.Runs(wf)
		if err != nil {
			t.Fatalf("Runs(%s): %v", wf, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("runs of %s (-want +got):\n%s", wf, d)
		}
	}
	if failed := db.PutRuns(map[string][]store.Run{"b": {}}); failed != nil {
		t.Fatalf("PutRuns of an empty record: %v", failed)
	}
	if got, err := db.Runs("b"); err != nil || len(got) != 0 {
		t.Errorf("runs of b after an empty record: %v, %v", got, err)
	}
}

// recordsClosed: a closed store answers nothing.
func recordsClosed(t *testing.T, db Records) {
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o := store.Owner{Project: "p", File: "p.json"}
	if _, err := db.Owners(); err == nil {
		t.Error("Owners on a closed store: no error")
	}
	if err := db.SetOwner("w", o); err == nil {
		t.Error("SetOwner on a closed store: no error")
	}
	if err := db.DeleteOwner("w"); err == nil {
		t.Error("DeleteOwner on a closed store: no error")
	}
	if failed := db.WriteOwners(map[string]store.Owner{"w": o}, []string{"v"}); failed["w"] == nil || failed["v"] == nil {
		t.Errorf("WriteOwners on a closed store: %v", failed)
	}
	if _, err := db.Runs("w"); err == nil {
		t.Error("Runs on a closed store: no error")
	}
	if failed := db.PutRuns(map[string][]store.Run{"w": {{Slot: time.Unix(0, 0).UTC(), At: time.Unix(0, 0).UTC()}}}); failed["w"] == nil {
		t.Errorf("PutRuns on a closed store: %v", failed)
	}
}
