package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// TestOutboxDeliveryGoesToTheTargetsCurrentDefinition: a delivery kept in
// the outbox over a redeploy is sent to what the workflow's notify list
// says now, the target known by its URL or, re-pointed, by its place in
// the list; a target removed, or one that no longer takes the event,
// gives its delivery up (logged, counted dropped). A workflow removed
// still has its deliveries sent to a URL another deployed workflow names,
// and only then (before: each went to the URL it was recorded with,
// whatever the configuration said).
func TestOutboxDeliveryGoesToTheTargetsCurrentDefinition(t *testing.T) {
	const (
		a = "http://127.0.0.1:1/a"
		b = "http://127.0.0.1:1/b"
		c = "http://127.0.0.1:1/c"
	)
	fail := workflow.EventFailure
	other := fixture.Hourly("other")
	other.StartTime = ts("2026-11-24T08:00Z")
	otherTo := func(ns ...workflow.Notification) workflow.Workflow { o := other; o.Notify = ns; return o }
	for _, tc := range []struct {
		name   string
		before []workflow.Notification
		after  []workflow.Notification // nil: feed removed
		others []workflow.Workflow
		// want maps each delivery's URL before to its target after
		// (absent: given up).
		want    map[string]handed
		dropped int
	}{
		{name: "url changed", before: []workflow.Notification{hook(a, "", fail)}, after: []workflow.Notification{hook(b, "", fail)},
			want: map[string]handed{a: {URL: b}}},
		{name: "secret changed", before: []workflow.Notification{hook(a, "/s/1", fail)}, after: []workflow.Notification{hook(a, "/s/2", fail)},
			want: map[string]handed{a: {URL: a, Secret: "/s/2"}}},
		{name: "reordered", before: []workflow.Notification{hook(a, "", fail), hook(b, "", fail)},
			after: []workflow.Notification{hook(b, "", fail), hook(a, "", fail)},
			want:  map[string]handed{a: {URL: a}, b: {URL: b}}},
		{name: "one of two removed", before: []workflow.Notification{hook(a, "", fail), hook(b, "", fail)},
			after: []workflow.Notification{hook(b, "", fail)},
			want:  map[string]handed{b: {URL: b}}, dropped: 1},
		{name: "replaced while another moved up", before: []workflow.Notification{hook(a, "", fail), hook(b, "", fail)},
			after: []workflow.Notification{hook(b, "", fail), hook(c, "", fail)},
			want:  map[string]handed{b: {URL: b}}, dropped: 1},
		{name: "no longer takes the event", before: []workflow.Notification{hook(a, "", fail)},
			after: []workflow.Notification{hook(a, "", workflow.EventSLAMissed)}, dropped: 1},
		{name: "workflow removed, its URL named by another", before: []workflow.Notification{hook(a, "/s/1", fail)},
			others: []workflow.Workflow{otherTo(hook(a, "/s/3", workflow.EventSLAMissed))}, want: map[string]handed{a: {URL: a, Secret: "/s/3"}}},
		{name: "workflow removed, its URL named by none", before: []workflow.Notification{hook(a, "", fail)},
			others: []workflow.Workflow{otherTo(hook(b, "", fail))}, dropped: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wdir := t.TempDir()
			feedNotifying(t, wdir, tc.before, other)
			db := openDB(t, t.TempDir())
			x, svc, sent := failedOnce(t, wdir, db, len(tc.before))
			var want []handed
			for _, h := range sent {
				x.e.Released(h.ID)
				if to, ok := tc.want[h.URL]; ok {
					want = append(want, handed{fail, h.ID, to.URL, to.Secret})
				}
			}
			feedNotifying(t, wdir, tc.after, tc.others...)
			y := startTargetEngine(t, wdir, "2026-11-24T08:30Z", svc, db)
			y.step(t, "2026-11-24T08:30Z")
			if diff := cmp.Diff(want, y.taken()); diff != "" {
				t.Errorf("after the redeploy, handed out (-want +got):\n%s", diff)
			}
			var wantDrops map[string]int
			if tc.dropped > 0 {
				wantDrops = map[string]int{fail: tc.dropped}
			}
			if diff := cmp.Diff(wantDrops, y.drops(), cmpEmptyMap); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			if keys := outboxKeys(t, db); len(keys) != len(want) {
				t.Errorf("outbox %q, want the %d deliveries handed out", keys, len(want))
			}
		})
	}
}

// cmpEmptyMap equates nil and empty maps.
var cmpEmptyMap = cmp.FilterValues(func(x, y map[string]int) bool { return len(x) == 0 && len(y) == 0 }, cmp.Ignore())

// TestOutboxHandWrittenRecordsPostOnlyToConfiguredTargets: records
// written by hand in the outbox (the file store's register directory, or
// the PostgreSQL table) are never handed out for a URL the configuration
// does not name: one for a URL feed does not name, or for a workflow not
// deployed, is given up (counted under its event); one re-pointed to
// "file:///etc/passwd" in its own notify list goes to feed's configured
// target, which took its place; one that is not a record the engine
// writes (an unknown event, a target's place outside its list, over 64
// KiB) is removed (counted as unknown), on both stores (before: each was
// handed out with the URL it named).
func TestOutboxHandWrittenRecordsPostOnlyToConfiguredTargets(t *testing.T) {
	const a = "http://127.0.0.1:1/a"
	for _, st := range []struct {
		name string
		open func(t *testing.T) (storeRegs, func(key, raw string))
	}{
		{"file", func(t *testing.T) (storeRegs, func(key, raw string)) {
			dir := t.TempDir()
			db := openDB(t, dir)
			return db, func(key, raw string) {
				p := filepath.Join(dir, "register", outboxBucket, key)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(raw), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"postgres", func(t *testing.T) (storeRegs, func(key, raw string)) {
			db, err := statepg.Open(t.Context(), pgtest.Shared(t).CreateDB(t), statepg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db, func(key, raw string) {
				if err := db.PutRegister(outboxBucket, key, json.RawMessage(raw)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			wdir := t.TempDir()
			feedNotifying(t, wdir, []workflow.Notification{hook(a, "", workflow.EventFailure)})
			db, write := st.open(t)
			n := 0
			record := func(wf, event, url, extra string) (id, key string) {
				n++
				id = fmt.Sprintf("%024x", n)
				key = keyLike(wf, id)
				write(key, `{"event":"`+event+`","workflow":"`+wf+`","slot":"2026-11-24T08:00:00Z","status":"FAILURE",`+
					`"retryCount":0,"at":"2026-11-24T08:20:00Z","target":{"type":"webhook","url":"`+url+`","events":["failure"]},`+
					`"delivery":"`+id+`","created":"2026-11-24T08:30:00Z","recorded":true`+extra+`}`)
				return id, key
			}
			record("feed", "failure", "http://169.254.169.254/latest/meta-data", "")
			record("ghost", "failure", "http://10.0.0.1/admin", "")
			repointed, kept := record("feed", "failure", "file:///etc/passwd", `,"targetIndex":0,"notifyURLs":["file:///etc/passwd"]`)
			record("feed", "exfiltrate", a, "")
			record("feed", "failure", a, `,"targetIndex":5,"notifyURLs":["`+a+`"]`)
			record("feed", "failure", a, `,"detail":"`+strings.Repeat("x", 100<<10)+`"`)
			x := startTargetEngine(t, wdir, "2026-11-24T08:31Z", newFake(), db)
			x.step(t, "2026-11-24T08:31Z")
			if diff := cmp.Diff([]handed{{workflow.EventFailure, repointed, a, ""}}, x.taken()); diff != "" {
				t.Errorf("handed out (-want +got):\n%s", diff)
			}
			wantDrops, wantKeys := map[string]int{workflow.EventFailure: 2, "unknown": 3}, []string{kept}
			if diff := cmp.Diff(wantDrops, x.drops()); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			keys := outboxKeys(t, db)
			sort.Strings(keys)
			sort.Strings(wantKeys)
			if diff := cmp.Diff(wantKeys, keys); diff != "" {
				t.Errorf("outbox after the step (-want +got):\n%s", diff)
			}
		})
	}
}

// keyLike is an outbox key of workflow wf's delivery id, created at 08:30.
func keyLike(wf, id string) string { return outboxKey(wf, ts("2026-11-24T08:30Z"), id) }

// storeRegs is a store with registers (both stores).
type storeRegs interface {
	Store
	Registers
}

// TestOutboxUnknownWorkflowWaitsWhileAFileDoesNotLoad: feed's delivery is
// pending when feed's file is replaced by one that does not load (at
// the restart: no earlier version stays in effect). Feed may be in it, so
// its delivery is neither sent nor given up; once the directory loads
// again without feed (and no deployed workflow names its URL) it is given
// up (before the fix's guard: given up at once, as if feed were removed).
func TestOutboxUnknownWorkflowWaitsWhileAFileDoesNotLoad(t *testing.T) {
	const a = "http://127.0.0.1:1/a"
	wdir := t.TempDir()
	feedNotifying(t, wdir, []workflow.Notification{hook(a, "", workflow.EventFailure)})
	db := openDB(t, t.TempDir())
	x, svc, sent := failedOnce(t, wdir, db, 1)
	x.e.Released(sent[0].ID)
	if err := os.WriteFile(filepath.Join(wdir, "p.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	y := startTargetEngine(t, wdir, "2026-11-24T08:30Z", svc, db)
	y.step(t, "2026-11-24T08:30Z")
	if got, drops := y.taken(), y.drops(); len(got) != 0 || len(drops) != 0 {
		t.Errorf("while p.json does not load: handed out %+v, dropped %v; want the delivery left alone", got, drops)
	}
	if keys := outboxKeys(t, db); len(keys) != 1 {
		t.Fatalf("outbox %q, want the delivery kept", keys)
	}
	feedNotifying(t, wdir, nil, fixture.Hourly("other"))
	z := startTargetEngine(t, wdir, "2026-11-24T08:40Z", svc, db)
	z.step(t, "2026-11-24T08:40Z")
	if diff := cmp.Diff(map[string]int{workflow.EventFailure: 1}, z.drops()); diff != "" {
		t.Errorf("once everything loads, without feed: dropped (-want +got):\n%s", diff)
	}
}
