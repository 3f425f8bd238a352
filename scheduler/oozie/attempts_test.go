package oozie_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestAttempts: the jobs named after the slot's celosWorkflowName are its
// attempts, oldest first, with their Oozie status; another slot's job is
// not one.
func TestAttempts(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	s := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil)
	w := newWorkflow("", map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)}
	if got, err := s.Attempts(ctx, w, id); err != nil || len(got) != 0 {
		t.Fatalf("before any submit: %v, %v", got, err)
	}
	first, err := s.Submit(ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetStatus(first, oozie.StatusFailed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: id.Time.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	second, err := s.Submit(ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Attempts(ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ExternalID != first || got[1].ExternalID != second {
		t.Fatalf("attempts = %+v, want %s then %s", got, first, second)
	}
	if got[0].Status != "FAILED (action main: JA018 Output directory exists)" || got[0].Running || got[0].Success || got[0].Submitted.IsZero() {
		t.Errorf("first attempt: %+v", got[0])
	}
	if !got[1].Running || !got[1].Ended.IsZero() {
		t.Errorf("second attempt (running): %+v", got[1])
	}

	f.SetMode(ooziefake.Error500)
	if _, err := s.Attempts(ctx, w, id); !errors.Is(err, external.ErrUnavailable) {
		t.Errorf("Attempts on 500: %v", err)
	}
}
