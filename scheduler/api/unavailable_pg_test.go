package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/statepg"
)

// TestWorkflowSlotsWithThePostgresStoreGone: a request whose state
// database (PostgreSQL) cannot be reached answers 503 unavailable with a
// reference to the logged error, not 500 internal as a bug of the server
// would; the answer names neither the database's host nor its user.
func TestWorkflowSlotsWithThePostgresStoreGone(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := srv.CreateDB(t)
	pg, err := statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	w := fixture.Hourly("wf")
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", w)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	eng, err := engine.New(engine.Options{WorkflowsDir: wdir, Store: pg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(eng, api.Options{Logger: log})
	srv.Stop()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/workflow-slots?id=wf&start=2024-01-01T00:00Z&end=2024-01-01T05:00Z", nil))
	api.CheckAnswer(t, "GET", "/workflow-slots", rec)
	var e struct{ Error, Code string }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != 503 || err != nil || e.Code != "unavailable" {
		t.Fatalf("GET /workflow-slots with the database gone: %d %s; want 503, code unavailable\nlog: %s", rec.Code, rec.Body, logs.String())
	}
	i := strings.Index(e.Error, "reference ")
	if i < 0 {
		t.Fatalf("answer %q names no reference", e.Error)
	}
	ref := strings.Fields(e.Error[i+len("reference "):])[0]
	ref = strings.TrimSuffix(ref, "):")
	if !strings.Contains(logs.String(), "reference="+ref) {
		t.Errorf("the log has no line with reference %s:\n%s", ref, logs.String())
	}
	for _, secret := range []string{"127.0.0.1", "localhost", "user="} {
		if strings.Contains(e.Error, secret) {
			t.Errorf("answer %q names %q", e.Error, secret)
		}
	}
}
