package ui

import (
	"context"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/faultstore"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// unreadableFixture is a real engine, state database and command service
// whose hourly workflow wf (command `true`, from 6 hours before now) has
// a FIFO as the state file of the slot 2 hours before now; the project
// holds the extra workflows given too (nothing steps them).
type unreadableFixture struct {
	eng      *engine.Engine
	db       *statedb.DB
	dbDir    string
	cmd      *command.Service
	now      time.Time
	fifoTime time.Time
	fifo     string // its path
}

func newUnreadableFixture(t *testing.T, extra ...workflow.Workflow) *unreadableFixture {
	t.Helper()
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "workflows")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &unreadableFixture{now: time.Date(2026, 11, 24, 13, 20, 0, 0, time.UTC), dbDir: filepath.Join(dir, "db")}
	w := fixture.Hourly("wf")
	w.ExternalService = fixture.Command("true")
	w.StartTime = f.now.Add(-6 * time.Hour).Truncate(time.Hour)
	fixture.Write(t, wfDir, fixture.Project("p", append([]workflow.Workflow{w}, extra...)...))
	f.fifoTime = f.now.Add(-2 * time.Hour).Truncate(time.Hour)
	f.fifo = f.stateFile("wf", f.fifoTime)
	if err := os.MkdirAll(filepath.Dir(f.fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.db, err = statedb.OpenWith(f.dbDir, statedb.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	if f.cmd, err = command.New(filepath.Join(dir, "jobs"), command.Options{}); err != nil {
		t.Fatal(err)
	}
	f.eng, err = engine.New(engine.Options{WorkflowsDir: wfDir, Store: f.db, Services: map[string]external.Service{workflow.ServiceCommand: f.cmd}, FS: trigger.NewMux("")})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stateFile is the path of the state file of slot id@at.
func (f *unreadableFixture) stateFile(id string, at time.Time) string {
	return filepath.Join(f.dbDir, "state", id, at.Format("2006-01-02"), at.Format("15:04:05.000Z"))
}

// TestUnreadableSlotDetails: the details of a slot whose state file
// cannot be read (here a FIFO) say so, naming the file, with 409 as the
// API's /slot-state does: not "has no slot at", which sends the operator
// looking for a schedule problem. Real engine and state database.
func TestUnreadableSlotDetails(t *testing.T) {
	f := newUnreadableFixture(t)
	now, fifoTime, p := f.now, f.fifoTime, f.fifo
	noLog := func(context.Context, *workflow.Workflow, slot.State) (io.ReadCloser, error) {
		return nil, fs.ErrNotExist
	}
	h, err := New(f.eng, Options{Now: func() time.Time { return now }, SlotLog: noLog})
	if err != nil {
		t.Fatal(err)
	}
	ft := slot.FormatTime(fifoTime)
	for _, target := range []string{"/ui/slot?id=wf&time=" + ft, "/ui/log?id=wf&time=" + ft} {
		rec := get(t, h, target)
		body := rec.Body.String()
		if rec.Code != 409 || !strings.Contains(body, p) || !strings.Contains(body, "named pipe") {
			t.Errorf("GET %s: %d, want 409 naming %s as a named pipe; body:\n%s", target, rec.Code, p, body)
		}
	}
	// A time that is no slot is still 404.
	rec := get(t, h, "/ui/slot?id=wf&time="+slot.FormatTime(fifoTime.Add(time.Minute)))
	if rec.Code != 404 {
		t.Errorf("a time that is no slot: %d, want 404", rec.Code)
	}
}

// TestUnreadableSlotDetailsOfferRerunAndKill: the details of a single
// slot whose state file cannot be read, opened by its time or as the only
// slot of a bucket (a click on its cell), page or side-panel fragment,
// still say why (409, naming the file) and offer the Rerun and Kill
// buttons of a slot's details, which the API accepts for such a slot (a
// rerun rewrites its record; a kill kills the job the service has for it,
// then writes KILLED). Real engine and state database.
func TestUnreadableSlotDetailsOfferRerunAndKill(t *testing.T) {
	f := newUnreadableFixture(t)
	h, err := New(f.eng, Options{Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	ft := slot.FormatTime(f.fifoTime)
	bucket := "/ui/slot?id=wf&start=" + ft + "&end=" + slot.FormatTime(f.fifoTime.Add(time.Hour))
	for _, target := range []string{"/ui/slot?id=wf&time=" + ft, bucket, bucket + "&f=1"} {
		rec := get(t, h, target)
		body := rec.Body.String()
		if rec.Code != 409 || !strings.Contains(body, f.fifo) || !strings.Contains(body, "named pipe") {
			t.Errorf("GET %s: %d, want 409 naming %s as a named pipe; body:\n%s", target, rec.Code, f.fifo, body)
		}
		for _, act := range []string{"rerun", "kill"} {
			if want := `data-act="` + act + `" data-id="wf" data-times="` + ft + `"`; !strings.Contains(body, want) {
				t.Errorf("GET %s: no %s button (%s) in the details of the unreadable slot:\n%s", target, act, want, body)
			}
		}
		if !strings.Contains(body, `data-kind="slot" data-id="wf" data-time="`+ft+`"`) {
			t.Errorf("GET %s: the details are not those of slot wf@%s:\n%s", target, ft, body)
		}
	}
}

// TestGridShowsUnreadableSlots: the grid shows a slot whose state file
// cannot be read as a cell of its own (class q, the worst rank: the row
// counts as one with failures), not as an empty bucket, and the legend
// names it; the details of a range holding it list it as unreadable and
// offer to rerun it (which rewrites its record). Real engine and state
// database.
func TestGridShowsUnreadableSlots(t *testing.T) {
	f := newUnreadableFixture(t)
	h, err := New(f.eng, Options{Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h, "/ui?cols=24")
	body := rec.Body.String()
	if rec.Code != 200 || strings.Count(body, "<i class=q>") != 1 || !strings.Contains(body, `<i class="sw q"></i>unreadable`) {
		t.Fatalf("grid: %d; want one cell of class q and the legend naming it:\n%s", rec.Code, body)
	}
	ft := slot.FormatTime(f.fifoTime)
	target := "/ui/slot?id=wf&start=" + slot.FormatTime(f.fifoTime.Add(-time.Hour)) + "&end=" + slot.FormatTime(f.fifoTime.Add(2*time.Hour))
	rec = get(t, h, target)
	body = rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `<i class="sw q"></i>1 unreadable`) || !strings.Contains(body, `<i class="sw q"></i>unreadable</span>`) {
		t.Fatalf("GET %s: %d; want the unreadable slot counted and listed:\n%s", target, rec.Code, body)
	}
	if !strings.Contains(body, `data-act="rerun" data-id="wf" data-times="`+ft+`"`) {
		t.Errorf("GET %s: no rerun of the unreadable slot %s offered:\n%s", target, ft, body)
	}
}

// TestGridFailsOnAReadError: when a slot of the window cannot be read for
// another reason than a record that does not parse (an I/O error, the
// database server gone), the grid's row says it cannot list the slots,
// and the details of a range holding the slot are an error (500), rather
// than showing the row with that slot missing. Real engine and state
// database.
func TestGridFailsOnAReadError(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.OpenWith(filepath.Join(dir, "db"), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Date(2026, 11, 24, 13, 20, 0, 0, time.UTC)
	w := fixture.Hourly("wf")
	w.ExternalService = fixture.Command("true")
	w.StartTime = now.Add(-6 * time.Hour).Truncate(time.Hour)
	wfDir := filepath.Join(dir, "workflows")
	fixture.Write(t, wfDir, fixture.Project("p", w))
	bad := slot.ID{Workflow: "wf", Time: now.Add(-2 * time.Hour).Truncate(time.Hour)}
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: faultstore.EIO{DB: db, Bad: bad}, Services: map[string]external.Service{}, FS: trigger.NewMux("")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(eng, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h, "/ui?cols=24")
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "cannot list slots: ") || !strings.Contains(body, "input/output error") {
		t.Fatalf("grid: %d; want the row to say it cannot list the slots, and why:\n%s", rec.Code, body)
	}
	target := "/ui/slot?id=wf&start=" + slot.FormatTime(bad.Time.Add(-time.Hour)) + "&end=" + slot.FormatTime(bad.Time.Add(2*time.Hour))
	if rec := get(t, h, target); rec.Code != 500 {
		t.Errorf("GET %s: %d, want 500:\n%s", target, rec.Code, rec.Body)
	}
}

// TestUnreadableSlotLogPage: the log page (/ui/log, opened in a tab of
// its own from a slot's details) of a slot whose state file cannot be
// read is a page of the UI's layout, 409 as the API's, naming the slot
// and why (the file, a named pipe), saying what rewrites the record, and
// linking to the slot's details (where Rerun and Kill are) and back to
// the grid; not the UI's generic "Conflict" page. Real engine and state
// database.
func TestUnreadableSlotLogPage(t *testing.T) {
	f := newUnreadableFixture(t)
	noLog := func(context.Context, *workflow.Workflow, slot.State) (io.ReadCloser, error) {
		return nil, fs.ErrNotExist
	}
	h, err := New(f.eng, Options{Now: func() time.Time { return f.now }, SlotLog: noLog})
	if err != nil {
		t.Fatal(err)
	}
	ft := slot.FormatTime(f.fifoTime)
	sid := "wf@" + ft
	rec := get(t, h, "/ui/log?id=wf&time="+ft)
	body := rec.Body.String()
	if rec.Code != 409 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s, want a 409 HTML page:\n%s", rec.Code, rec.Header().Get("Content-Type"), body)
	}
	for _, want := range []string{
		`<title>Log of ` + sid + ` · `,                  // the layout's head, titled by the slot
		`<span class="crumb">Log of ` + sid + `</span>`, // the layout's bar
		`<div class="errorpage"><h1>409 Conflict</h1>`,  // the UI's error pages' box
		`The log of <code>` + sid + `</code> cannot be shown: its stored record cannot be read, so which job ran it is not known.`,
		f.fifo, "named pipe",
		`A rerun or a kill of the slot rewrites the record: both are in <a href="`,
		`<a href="/ui">Back to the slot grid</a>`,
		`<footer class="foot">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the log page of the unreadable slot lacks %q:\n%s", want, body)
		}
	}
	// The link to the slot's details leads to them, with Rerun and Kill.
	m := regexp.MustCompile(`<a href="([^"]*)">the slot's details</a>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link to the slot's details:\n%s", body)
	}
	rec = get(t, h, html.UnescapeString(m[1]))
	details := rec.Body.String()
	for _, want := range []string{`data-kind="slot" data-id="wf" data-time="` + ft + `"`, `data-act="rerun" data-id="wf" data-times="` + ft + `"`, `data-act="kill"`} {
		if !strings.Contains(details, want) {
			t.Errorf("GET %s (the link): %d, lacks %q:\n%s", m[1], rec.Code, want, details)
		}
	}
}
