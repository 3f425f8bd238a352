package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// TestOutboxTargetsOfOneURLAfterARedeploy: a workflow names one URL for
// several targets (other secrets, other events); a redeploy inserts,
// swaps, removes or changes some of them while a failure's deliveries
// are pending. Each delivery goes to its own target when it is still
// there unchanged, wherever it moved in the list; a target removed gives
// its delivery up, and does not pass it to the target that kept its URL
// (before: a delivery went to whatever target of its URL stood at its
// old place — a target of the URL inserted in front for other events
// made the unchanged one's delivery be given up, two swapped got each
// other's, signed with the other's secret).
func TestOutboxTargetsOfOneURLAfterARedeploy(t *testing.T) {
	const (
		a = "http://127.0.0.1:1/a"
		b = "http://127.0.0.1:1/b"
	)
	fail, sla := workflow.EventFailure, workflow.EventSLAMissed
	for _, tc := range []struct {
		name          string
		before, after []workflow.Notification
		// want maps each delivery's secret file before to its target
		// after (absent: given up).
		want    map[string]handed
		dropped int
	}{
		{name: "one of its URL inserted in front, for other events",
			before: []workflow.Notification{hook(a, "/s/1", fail)},
			after:  []workflow.Notification{hook(a, "/s/2", sla), hook(a, "/s/1", fail)},
			want:   map[string]handed{"/s/1": {URL: a, Secret: "/s/1"}}},
		{name: "two of one URL swapped",
			before: []workflow.Notification{hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			after:  []workflow.Notification{hook(a, "/s/2", fail), hook(a, "/s/1", fail)},
			want:   map[string]handed{"/s/1": {URL: a, Secret: "/s/1"}, "/s/2": {URL: a, Secret: "/s/2"}}},
		{name: "another URL inserted in front of two of one URL",
			before: []workflow.Notification{hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			after:  []workflow.Notification{hook(b, "", fail), hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			want:   map[string]handed{"/s/1": {URL: a, Secret: "/s/1"}, "/s/2": {URL: a, Secret: "/s/2"}}},
		{name: "the first of two of one URL removed",
			before: []workflow.Notification{hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			after:  []workflow.Notification{hook(a, "/s/2", fail)},
			want:   map[string]handed{"/s/2": {URL: a, Secret: "/s/2"}}, dropped: 1},
		{name: "the secret of one of two of one URL changed",
			before: []workflow.Notification{hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			after:  []workflow.Notification{hook(a, "/s/3", fail), hook(a, "/s/2", fail)},
			want:   map[string]handed{"/s/1": {URL: a, Secret: "/s/3"}, "/s/2": {URL: a, Secret: "/s/2"}}},
		{name: "the events of one of two of one URL changed, then swapped",
			before: []workflow.Notification{hook(a, "/s/1", fail), hook(a, "/s/2", fail)},
			after:  []workflow.Notification{hook(a, "/s/2", fail, sla), hook(a, "/s/1", fail)},
			want:   map[string]handed{"/s/1": {URL: a, Secret: "/s/1"}, "/s/2": {URL: a, Secret: "/s/2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wdir := t.TempDir()
			feedNotifying(t, wdir, tc.before)
			db := openDB(t, t.TempDir())
			x, svc, sent := failedOnce(t, wdir, db, len(tc.before))
			var want []handed
			for _, h := range sent {
				x.e.Released(h.ID)
				if to, ok := tc.want[h.Secret]; ok {
					want = append(want, handed{fail, h.ID, to.URL, to.Secret})
				}
			}
			feedNotifying(t, wdir, tc.after)
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
		})
	}
}

// TestOutboxRecordsOfRoundTwoAndListsThatLie: records without the whole
// notify list (written by the version before this one: the list's URLs
// and their own target) still go to their own target among several of
// one URL; a record whose lists lie — a notify list whose URLs are not
// its notifyURLs, a notify list without them, a place far outside a
// record without a list — never makes the server post to a URL feed does
// not name, nor panic the step: the first two are removed (counted
// unknown), the last is known by its URL.
func TestOutboxRecordsOfRoundTwoAndListsThatLie(t *testing.T) {
	const (
		a    = "http://127.0.0.1:1/a"
		evil = "http://169.254.169.254/latest/meta-data"
	)
	fail := workflow.EventFailure
	wdir := t.TempDir()
	feedNotifying(t, wdir, []workflow.Notification{hook(a, "/s/2", workflow.EventSLAMissed), hook(a, "/s/1", fail), hook(a, "/s/3", fail)})
	db := openDB(t, t.TempDir())
	n := 0
	record := func(target, extra string) string {
		n++
		id := fmt.Sprintf("%024x", n)
		raw := `{"event":"failure","workflow":"feed","slot":"2026-11-24T08:00:00Z","status":"FAILURE","retryCount":0,` +
			`"at":"2026-11-24T08:20:00Z","target":` + target + `,"delivery":"` + id + `","created":"2026-11-24T08:30:00Z","recorded":true` + extra + `}`
		if err := db.PutRegister(outboxBucket, keyLike("feed", id), json.RawMessage(raw)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	s1 := `{"type":"webhook","url":"` + a + `","secretFile":"/s/1","events":["failure"]}`
	s3 := `{"type":"webhook","url":"` + a + `","secretFile":"/s/3","events":["failure"]}`
	// Round two's records of [a /s/3, a /s/1]: now [a /s/2 (SLA), a /s/1, a /s/3].
	roundTwo1 := record(s1, `,"targetIndex":1,"notifyURLs":["`+a+`","`+a+`"]`)
	roundTwo3 := record(s3, `,"targetIndex":0,"notifyURLs":["`+a+`","`+a+`"]`)
	record(s1, `,"targetIndex":0,"notifyURLs":["`+a+`"],"notify":[{"type":"webhook","url":"`+evil+`","events":["failure"]}]`)
	record(s1, `,"targetIndex":0,"notify":[`+s1+`]`)
	farOut := record(s1, `,"targetIndex":7`)
	x := startTargetEngine(t, wdir, "2026-11-24T08:31Z", newFake(), db)
	x.step(t, "2026-11-24T08:31Z")
	want := []handed{{fail, roundTwo1, a, "/s/1"}, {fail, roundTwo3, a, "/s/3"}, {fail, farOut, a, "/s/1"}}
	sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
	if diff := cmp.Diff(want, x.taken()); diff != "" {
		t.Errorf("handed out (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"unknown": 2}, x.drops()); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
}

// TestOutboxRollingDeployLeavesTheSteppingInstancesDeliveries: two live
// instances on PostgreSQL during a rolling deploy: B has the new
// configuration, with feed, and steps it (feed's lease is B's); A still
// has the old one, without feed. The deliveries of a workflow no instance
// steps are sent by the instance that would hold its lease (the server's
// Undeployed: the rendezvous owner among the live instances, here owner),
// asked for the workflow, not for its records' key prefix: A leaves
// B's pending delivery of feed alone — neither sends it nor, naming no
// such URL, gives it up under B — and B's next scan sends it (before: A,
// the owner of the prefix, removed the record of a delivery B held, lost
// if B then stopped or was killed).
func TestOutboxRollingDeployLeavesTheSteppingInstancesDeliveries(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	open := func() Store {
		db, err := statepg.Open(t.Context(), dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// owner is the instance that would step x: feed is B's, every other
	// workflow (and key prefix) A's.
	owner := func(x string) string {
		if x == "feed" {
			return "B"
		}
		return "A"
	}
	oldDir := t.TempDir()
	other := fixture.Hourly("other")
	other.StartTime = ts("2026-11-24T08:00Z")
	fixture.WriteProject(t, oldDir, "p", other)
	dropped := 0
	svc := newFake()
	a := startOutboxEngine(t, oldDir, "2026-11-24T08:00Z", svc, open(), func(wf string) bool { return owner(wf) == "A" },
		OutboxOptions{Undeployed: func(x string) bool { return owner(x) == "A" }, OnDrop: func(string) { dropped++ }})
	b := startOutboxEngine(t, feedOnFailure(t), "2026-11-24T08:00Z", svc, open(), func(wf string) bool { return owner(wf) == "B" },
		OutboxOptions{Undeployed: func(x string) bool { return owner(x) == "B" }})
	sent := failOn(t, b, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	b.e.Released(strings.TrimPrefix(sent[0], "failure ")) // (B's queue was full)
	a.step(t, "2026-11-24T08:20:30Z")
	if got := a.taken(); len(got) != 0 || dropped != 0 {
		t.Errorf("A, without feed: handed out %q, gave up %d; want B's delivery left alone", got, dropped)
	}
	if keys := outboxKeys(t, b.db.(Registers)); len(keys) != 1 {
		t.Fatalf("outbox %q, want B's delivery kept", keys)
	}
	b.step(t, "2026-11-24T08:21:30Z")
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Errorf("B's next scan handed out (-want +got):\n%s", diff)
	}
	if !b.e.Mine("feed") || a.e.Mine("feed") {
		t.Errorf("Mine(feed): A %v, B %v; want B only", a.e.Mine("feed"), b.e.Mine("feed"))
	}
}

// TestOutboxDeliveryFollowsTwoRedeploys: a delivery pending over two
// redeploys, offered between them: its target re-pointed from a to b
// (it goes to b, which the sender lets go of: b down, a stop), then a
// target c inserted in front of b. It goes to b, the target it was
// offered to, not to c, which took the place a had in the list the
// record was written with (before: the record kept its first list, and
// the second redeploy sent the delivery to c, b never got it).
func TestOutboxDeliveryFollowsTwoRedeploys(t *testing.T) {
	const (
		a = "http://127.0.0.1:1/a"
		b = "http://127.0.0.1:1/b"
		c = "http://127.0.0.1:1/c"
	)
	fail := workflow.EventFailure
	wdir := t.TempDir()
	feedNotifying(t, wdir, []workflow.Notification{hook(a, "", fail)})
	db := openDB(t, t.TempDir())
	x, svc, sent := failedOnce(t, wdir, db, 1)
	id := sent[0].ID
	x.e.Released(id)
	feedNotifying(t, wdir, []workflow.Notification{hook(b, "", fail)})
	y := startTargetEngine(t, wdir, "2026-11-24T08:30Z", svc, db)
	y.step(t, "2026-11-24T08:30Z")
	if diff := cmp.Diff([]handed{{fail, id, b, ""}}, y.taken()); diff != "" {
		t.Fatalf("after the first redeploy, handed out (-want +got):\n%s", diff)
	}
	y.e.Released(id)
	feedNotifying(t, wdir, []workflow.Notification{hook(c, "", fail), hook(b, "", fail)})
	z := startTargetEngine(t, wdir, "2026-11-24T08:40Z", svc, db)
	z.step(t, "2026-11-24T08:40Z")
	if diff := cmp.Diff([]handed{{fail, id, b, ""}}, z.taken()); diff != "" {
		t.Errorf("after the second redeploy, handed out (-want +got):\n%s", diff)
	}
}

// startOwnedTargetEngine is startTargetEngine for one of several
// instances: it steps the workflows owns gives it.
func startOwnedTargetEngine(t *testing.T, wdir, at string, svc external.Service, db Store, owns func(string) bool) *targetEngine {
	t.Helper()
	te := &targetEngine{db: db, now: ts(at), dropped: map[string]int{}}
	clock := func() time.Time { te.mu.Lock(); defer te.mu.Unlock(); return te.now }
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Clock: clock, Owns: owns,
		Services: map[string]external.Service{workflow.ServiceCommand: svc},
		OnEvent: func(ev scheduler.Event) {
			te.mu.Lock()
			defer te.mu.Unlock()
			for i, id := range ev.Deliveries {
				te.got = append(te.got, handed{ev.Kind, id, ev.Targets[i].URL, ev.Targets[i].SecretFile})
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.EnableOutbox(OutboxOptions{OnDrop: func(ev string) {
		te.mu.Lock()
		te.dropped[ev]++
		te.mu.Unlock()
	}})
	te.e = e
	return te
}

// TestOutboxRollingDeployOfANewURL: two live instances on PostgreSQL
// during a rolling deploy that re-points feed's target: A still has a,
// B has b already. Feed's pending delivery goes, wherever feed is
// stepped, to the URL that instance's configuration names — b when B
// takes feed over, a when it comes back to A (its record rewritten each
// time for the target it was offered to) — never to both at once, and
// is not given up.
func TestOutboxRollingDeployOfANewURL(t *testing.T) {
	const (
		a = "http://127.0.0.1:1/a"
		b = "http://127.0.0.1:1/b"
	)
	fail := workflow.EventFailure
	dsn := pgtest.Shared(t).CreateDB(t)
	open := func() Store {
		db, err := statepg.Open(t.Context(), dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	var owner atomic.Value
	owner.Store("A")
	oldDir, newDir := t.TempDir(), t.TempDir()
	feedNotifying(t, oldDir, []workflow.Notification{hook(a, "", fail)})
	feedNotifying(t, newDir, []workflow.Notification{hook(b, "", fail)})
	svc := newFake()
	ia := startOwnedTargetEngine(t, oldDir, "2026-11-24T08:00Z", svc, open(), func(string) bool { return owner.Load() == "A" })
	ib := startOwnedTargetEngine(t, newDir, "2026-11-24T08:00Z", svc, open(), func(string) bool { return owner.Load() == "B" })
	ia.step(t, "2026-11-24T08:10Z")
	ia.step(t, "2026-11-24T08:11Z")
	svc.finishAll(false)
	ia.step(t, "2026-11-24T08:20Z")
	sent := ia.taken()
	if len(sent) != 1 || sent[0].URL != a {
		t.Fatalf("A handed out %+v, want one failure to a", sent)
	}
	id := sent[0].ID
	for i, to := range []struct{ owner, url string }{{"B", b}, {"A", a}, {"B", b}} {
		owner.Store(to.owner)
		from, next := ia, ib
		if to.owner == "A" {
			from, next = ib, ia
		}
		at := ts("2026-11-24T08:21Z").Add(time.Duration(i) * 10 * time.Second).Format(time.RFC3339)
		refresh(t, from.db)
		from.step(t, at) // (no longer its own)
		from.e.Released(id)
		refresh(t, next.db)
		next.step(t, at)
		if diff := cmp.Diff([]handed{{fail, id, to.url, ""}}, next.taken()); diff != "" {
			t.Fatalf("hand-over %d, to %s: handed out (-want +got):\n%s", i+1, to.owner, diff)
		}
		if got := from.taken(); len(got) != 0 {
			t.Errorf("hand-over %d: the instance that let feed go handed out %+v", i+1, got)
		}
	}
	if d := len(ia.drops()) + len(ib.drops()); d != 0 {
		t.Errorf("dropped: A %v, B %v; want none", ia.drops(), ib.drops())
	}
}

// refresh makes a PostgreSQL store read what another instance wrote.
func refresh(t *testing.T, db Store) {
	t.Helper()
	if rf, ok := db.(interface {
		Refresh(context.Context) (bool, error)
	}); ok {
		if _, err := rf.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
