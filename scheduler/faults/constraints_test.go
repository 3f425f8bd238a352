package faults

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/schema/workflow"
)

// The minInterval installation: one hourly workflow "spaced" from
// 2015-09-13T00:00Z, minInterval 4h, concurrency 5 (only the constraint
// holds its slots), running `true`.
func writeMinIntervalProject(t *testing.T, wfDir string) {
	t.Helper()
	w := fixture.Hourly("spaced")
	w.StartTime = time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)
	w.SchedulingStrategy.Concurrency = 5
	w.Constraints = &workflow.Constraints{MinIntervalSeconds: 4 * 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	fixture.Write(t, wfDir, fixture.Project("spaced", w))
}

// spacedAt is 2015-09-13 at hms, UTC.
func spacedAt(t *testing.T, hms string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, "2015-09-13T"+hms+"Z")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func stepSpaced(t *testing.T, s *server, hms string) {
	t.Helper()
	if code, body := s.post("/scheduler", url.Values{"time": {spacedAt(t, hms).Format(time.RFC3339)}}); code != 200 {
		t.Fatalf("POST /scheduler at %s: %d %s", hms, code, body)
	}
}

func spacedStatus(t *testing.T, s *server, hms string) string {
	t.Helper()
	return s.slots("spaced", spacedAt(t, "00:00:00"), spacedAt(t, "08:00:00"))[spacedAt(t, hms).Format("2006-01-02T15:04:05.000Z")].Status
}

// submitLate0000 has server s submit slot 00:00 at 03:00:30 (its data came
// late) and steps until its job is SUCCESS; 01:00 and 02:00 stay READY.
func submitLate0000(t *testing.T, s *server) {
	t.Helper()
	stepSpaced(t, s, "03:00:00") // 00:00, 01:00, 02:00 READY
	stepSpaced(t, s, "03:00:30") // 00:00 submitted
	waitFor(t, 2*time.Minute, "00:00 SUCCESS", func() bool {
		stepSpaced(t, s, "03:10:00")
		return spacedStatus(t, s, "00:00:00") == "SUCCESS"
	})
	if st := spacedStatus(t, s, "01:00:00"); st != "READY" {
		t.Fatalf("01:00 is %s before the restart, want READY (held)\n%s", st, s.stderr)
	}
}

// checkHeldUntil0700 checks, on server s that did not make the submission
// of 00:00 at 03:00:30, that 01:00 stays READY, held by minInterval from
// that submission, until 07:00:30 (the slot-time count let it run at
// 04:30, 00:00 being outside the 4-hour look-back), then runs.
func checkHeldUntil0700(t *testing.T, s *server) {
	t.Helper()
	stepSpaced(t, s, "04:30:00")
	stepSpaced(t, s, "07:00:29")
	if st := spacedStatus(t, s, "01:00:00"); st != "READY" {
		t.Fatalf("01:00 is %s within 4h of the submission at 03:00:30, want READY\n%s", st, s.stderr)
	}
	resp, err := http.Get(s.URL + "/trigger-status?" + url.Values{"id": {"spaced"}, "time": {spacedAt(t, "01:00:00").Format(time.RFC3339)}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var ts struct {
		Held *struct{ Op, Reason string } `json:"held"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ts)
	resp.Body.Close()
	if err != nil || ts.Held == nil || !strings.Contains(ts.Held.Reason, "the last submission was at 2015-09-13T03:00:30.000Z, the next may be at 2015-09-13T07:00:30.000Z") {
		t.Errorf("trigger-status of 01:00: held %+v (%v), want minInterval's from the submission at 03:00:30", ts.Held, err)
	}
	stepSpaced(t, s, "07:00:30")
	if st := spacedStatus(t, s, "01:00:00"); st != "RUNNING" && st != "SUCCESS" {
		t.Fatalf("01:00 is %s once minInterval passed, want submitted\n%s", st, s.stderr)
	}
}

// TestMinIntervalSurvivesServerKill9: a real `celos server` submits slot
// 00:00 at 03:00:30 and is killed with SIGKILL; the restarted server
// counts that submission at 03:00:30, not at the slot time — on the file
// store and on PostgreSQL.
func TestMinIntervalSurvivesServerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	for _, store := range []string{"file", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			writeMinIntervalProject(t, filepath.Join(dir, "wf"))
			var flags []string
			if store == "postgres" {
				flags = []string{"--db", pgtest.StartT(t, pgtest.Options{}).CreateDB(t)}
			}
			s := startServer(t, dir, flags...)
			submitLate0000(t, s)
			s.kill9()
			s = startServer(t, dir, flags...)
			checkHeldUntil0700(t, s)
			s.stop()
		})
	}
}

// TestMinIntervalSurvivesTakeOver: two instances on one PostgreSQL
// database; the owner of the workflow submits 00:00 at 03:00:30 and is
// killed with SIGKILL; the instance that takes the workflow over counts
// that submission at 03:00:30, not at the slot time.
func TestMinIntervalSurvivesTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes and PostgreSQL")
	}
	pg := pgtest.StartT(t, pgtest.Options{})
	r := &clusterRig{t: t, pg: pg, dsn: pg.CreateDB(t), base: t.TempDir(), members: map[string]*server{}}
	writeMinIntervalProject(t, filepath.Join(r.base, "wf"))
	r.start("a")
	r.start("b")
	// owns waits until instance id sees exactly live as the live instances
	// and owns the workflow.
	owns := func(id string, live ...string) bool {
		h, err := r.health(id)
		return err == nil && slices.Equal(h.Live, live) && slices.Contains(h.Owned, "spaced")
	}
	var owner, other string
	waitFor(t, 2*time.Minute, "one of a and b owns the workflow", func() bool {
		switch {
		case owns("a", "a", "b"):
			owner, other = "a", "b"
		case owns("b", "a", "b"):
			owner, other = "b", "a"
		}
		return owner != ""
	})
	submitLate0000(t, r.members[owner])
	r.members[owner].kill9()
	waitFor(t, 2*time.Minute, other+" takes the workflow over", func() bool { return owns(other, other) })
	checkHeldUntil0700(t, r.members[other])
	r.members[other].stop()
}
