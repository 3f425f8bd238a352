package ui

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// listedAttempts is an attempt lister over a fixed table (the real
// command and Oozie listers are tested in their packages and in
// TestBrowserDemo).
type listedAttempts map[string][]scheduler.Attempt

func (l listedAttempts) Attempts(_ context.Context, _ *workflow.Workflow, id slot.ID) ([]scheduler.Attempt, error) {
	return l[id.String()], nil
}

// TestSlotAttemptsShown: the details list every attempt with its times,
// duration, status, external ID and log; a log link a service gives is
// kept only when it is a web URL; the log of an earlier attempt is served
// only for an ID the service lists for that slot.
func TestSlotAttemptsShown(t *testing.T) {
	svc := demoService()
	at := demoNow.Truncate(time.Hour).Add(-5 * time.Hour)
	id := slot.ID{Workflow: "ingest-nyc", Time: at}
	cur := svc.states["ingest-nyc"][at.Unix()].ExternalID
	three, zero := 3, 0
	t0 := at.Add(time.Minute)
	lister := listedAttempts{id.String(): {
		{ExternalID: "ingest-nyc@first", Submitted: t0, Started: t0.Add(time.Second), Ended: t0.Add(3 * time.Second), Status: "exit 3", ExitCode: &three, HasLog: true},
		{ExternalID: cur, Submitted: t0.Add(time.Minute), Started: t0.Add(time.Minute), Ended: t0.Add(2*time.Minute + 5*time.Second), Status: "exit 0", Success: true, ExitCode: &zero, HasLog: true, LogURL: "javascript:alert(1)"},
	}}
	logs := func(_ context.Context, _ *workflow.Workflow, st slot.State) (io.ReadCloser, error) {
		if st.ExternalID == "" {
			return nil, fmt.Errorf("none: %w", fs.ErrNotExist)
		}
		return fakeLog{strings.NewReader("log of " + st.ExternalID + "\n")}, nil
	}
	h := newTestHandler(t, svc, Options{Attempts: lister, SlotLog: logs})
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-nyc&time="+slot.FormatTime(at)), 200)
	items := regexp.MustCompile(`(?s)<li class="attempt( last)?" data-ext="([^"]*)">(.*?)</li>`).FindAllStringSubmatch(body, -1)
	if len(items) != 2 {
		t.Fatalf("%d attempts shown, want 2:\n%s", len(items), body)
	}
	for i, want := range [][]string{
		{"#1", "exit 3", "2.0 s", "2026-11-22 09:01:00 UTC", "2026-11-22 09:01:01 UTC", "2026-11-22 09:01:03 UTC", "ingest-nyc@first", `/ui/log?ext=ingest-nyc%40first&amp;id=ingest-nyc&amp;time=2026-11-22T09%3A00%3A00.000Z`},
		{"#2", "exit 0", "1 min 5 s", "the slot's current run", cur},
	} {
		for _, w := range want {
			if !strings.Contains(items[i][3], w) {
				t.Errorf("attempt %d lacks %q:\n%s", i+1, w, items[i][3])
			}
		}
	}
	if items[0][1] != "" || items[1][1] != " last" {
		t.Error("the current attempt is not marked")
	}
	if strings.Contains(body, "javascript:") {
		t.Error("a javascript: log URL became a link")
	}
	// The earlier attempt's log; an ID that is not one of the slot's.
	if got := wantStatus(t, get(t, h, "/ui/log?id=ingest-nyc&time="+slot.FormatTime(at)+"&ext=ingest-nyc%40first"), 200); got != "log of ingest-nyc@first\n" {
		t.Errorf("earlier attempt's log = %q", got)
	}
	wantStatus(t, get(t, h, "/ui/log?id=ingest-nyc&time="+slot.FormatTime(at)+"&ext=other%40job"), 404)

	// A slot whose external ID the service does not list says so.
	other := at.Add(-time.Hour)
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-nyc&time="+slot.FormatTime(other)), 200)
	if !strings.Contains(body, "is not among the jobs the service lists") {
		t.Error("an unlisted external ID is not explained")
	}
	// Without a lister, no attempts section.
	h = newTestHandler(t, svc, Options{SlotLog: logs})
	if strings.Contains(wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-nyc&time="+slot.FormatTime(at)), 200), "attempts") {
		t.Error("an attempts section without a lister")
	}
}
