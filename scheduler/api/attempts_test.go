package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestSlotAttempts: GET /slot-attempts answers the slot as it is now and
// every job the lister (here the real command service, its jobs run as
// processes) has for it, oldest first, as openapi.json describes; a time
// not in the schedule and an unknown workflow are 404, a bad time 400, a
// server without a lister 501. The engine and the server's wiring are
// tested end to end by scheduler/server's TestRunWiresAttemptsAndDeploys.
func TestSlotAttempts(t *testing.T) {
	cmd, err := command.New(filepath.Join(t.TempDir(), "jobs"), command.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := newFake("wc")
	at := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	id := slot.ID{Workflow: "wc", Time: at}
	var ext []string
	for _, argv := range [][]string{{"sh", "-c", "exit 3"}, {"true"}} {
		w := *f.workflows["wc"]
		w.ExternalService = workflow.ExternalService{Type: workflow.ServiceCommand, Command: argv}
		x, err := cmd.Submit(ctx, &w, id)
		if err != nil {
			t.Fatal(err)
		}
		ext = append(ext, x)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cmd.Wait(tctx); err != nil {
		t.Fatal(err)
	}
	f.states[id] = slot.State{ID: id, Status: slot.Success, ExternalID: ext[1], RetryCount: 1}
	h := New(f, Options{Now: func() time.Time { return at.Add(time.Hour) }, Attempts: cmd})
	do := func(h *Handler, code int, target string) []byte {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		CheckAnswer(t, "GET", "/slot-attempts", rec)
		if rec.Code != code {
			t.Fatalf("GET %s: %d, want %d: %s", target, rec.Code, code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	var got SlotAttempts
	if err := json.Unmarshal(do(h, 200, "/slot-attempts?id=wc&time=2015-09-13T13:00Z"), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Attempts) != 2 || got.Attempts[0].ExternalID != ext[0] || got.Attempts[1].ExternalID != ext[1] {
		t.Fatalf("attempts: %+v", got.Attempts)
	}
	a, b := got.Attempts[0], got.Attempts[1]
	if a.Status != "exit 3" || a.ExitCode == nil || *a.ExitCode != 3 || a.Success || !a.HasLog || a.Ended.IsZero() {
		t.Errorf("first attempt: %+v", a)
	}
	if b.Status != "exit 0" || !b.Success || got.Slot.ExternalID == nil || *got.Slot.ExternalID != b.ExternalID || got.Slot.RetryCount != 1 {
		t.Errorf("second attempt %+v, slot %+v", b, got.Slot)
	}
	// A slot without jobs has an empty list, not null.
	if body := do(h, 200, "/slot-attempts?id=wc&time=2015-09-13T12:00Z"); !containsJSON(body, `"attempts":[]`) {
		t.Errorf("a slot without jobs: %s", body)
	}
	do(h, 404, "/slot-attempts?id=nope&time=2015-09-13T13:00Z")
	do(h, 404, "/slot-attempts?id=wc&time=2015-09-13T13:07Z")
	do(h, 400, "/slot-attempts?id=wc&time=later")
	do(New(f, Options{}), 501, "/slot-attempts?id=wc&time=2015-09-13T13:00Z")
}

// containsJSON reports whether the compacted JSON body contains s.
func containsJSON(body []byte, s string) bool {
	var buf bytes.Buffer
	return json.Compact(&buf, body) == nil && strings.Contains(buf.String(), s)
}
