package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/schema/workflow"
)

// TestServerOnPostgres runs the real server with --db a PostgreSQL URL
// (the password in it) and a command workflow: the slot runs to SUCCESS,
// its state is a row of the database, and neither the log nor the errors
// of bad start-ups (wrong password, newer schema, no --jobs) name the
// password; a failed start-up never listens.
func TestServerOnPostgres(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE celos", "CREATE DATABASE future"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	os.Mkdir(wf, 0o755)
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	p := workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: []workflow.Workflow{{
		ID:                 "hello",
		Schedule:           workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger:            workflow.Trigger{Type: workflow.TriggerAlways},
		SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService:    workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"true"}},
		StartTime:          start,
		WaitTimeoutSeconds: workflow.NeverTimeout,
	}}}
	b, _ := p.Marshal()
	os.WriteFile(filepath.Join(wf, "p.json"), b, 0o644)

	logs := &servertest.LockedBuffer{}
	cfg := Config{Port: 0, Workflows: wf, DB: srv.DSN("celos"), Jobs: filepath.Join(dir, "jobs"), URLFile: filepath.Join(dir, "url"), Stderr: logs}
	url, stop := startRun(t, cfg, openEngine)
	status := ""
	for end := time.Now().Add(2 * time.Minute); status != "SUCCESS" && time.Now().Before(end); {
		status = stepAndRead(t, url, "2015-09-13T13:40Z", "hello", "2015-09-13T13:00Z")
		time.Sleep(100 * time.Millisecond) // the command runs on its own
	}
	// The clock offset from the database is exported (same host: about 0).
	if m := get(t, url+"/metrics"); !strings.Contains(m, "\ncelos_cluster_clock_skewed 0\n") || !strings.Contains(m, "\ncelos_cluster_clock_offset_seconds ") {
		t.Errorf("/metrics lacks the clock offset and skew:\n%s", grepLines(m, "celos_cluster_"))
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if status != "SUCCESS" {
		t.Fatalf("slot is %s", status)
	}
	var got string
	if err := queryOne(srv, "celos", "SELECT status FROM celos_slots WHERE workflow = 'hello' AND slot_time = '2015-09-13T13:00Z'", &got); err != nil || got != "SUCCESS" {
		t.Fatalf("the row: %q %v", got, err)
	}
	if !strings.Contains(logs.String(), "postgres://celos@127.0.0.1") {
		t.Errorf("the log does not name the database:\n%s", logs.String())
	}

	if err := srv.Exec(ctx, "future", "CREATE TABLE celos_schema_version (version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL, applied_at timestamptz)",
		"INSERT INTO celos_schema_version VALUES (9999, 'x', 'y', now())"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"wrong password": {Config{DB: strings.Replace(srv.DSN("celos"), srv.Password, "Wr0ngPw", 1), Jobs: cfg.Jobs}, "password authentication failed"},
		"newer schema":   {Config{DB: srv.DSN("future"), Jobs: cfg.Jobs}, "schema is newer than this celos"},
		"no --jobs":      {Config{DB: srv.DSN("celos")}, "--jobs DIR is needed"},
	} {
		logs := &servertest.LockedBuffer{}
		c.cfg.Workflows, c.cfg.Stderr, c.cfg.URLFile = wf, logs, filepath.Join(dir, "url-"+strings.ReplaceAll(name, " ", "-"))
		err := run(ctx, c.cfg, openEngine)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error with %q, got %v", name, c.want, err)
			continue
		}
		for _, secret := range []string{srv.Password, "Wr0ngPw"} {
			if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("%s: the password is in the error or the log:\n%v\n%s", name, err, logs.String())
			}
		}
		if _, err := os.Stat(c.cfg.URLFile); err == nil {
			t.Errorf("%s: the server listened", name)
		}
	}
	if strings.Contains(logs.String(), srv.Password) {
		t.Errorf("the password is in the log:\n%s", logs.String())
	}
}

func queryOne(srv *pgtest.Server, db, q string, dest any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, srv.DSN(db))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, q).Scan(dest)
}
