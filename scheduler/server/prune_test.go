package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunPrunes: --prune-older-than prunes the state database at start
// (and daily): an old final slot goes, an old RUNNING slot and a recent
// final one stay; a retention under 8 days stops the start.
func TestRunPrunes(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf")
	os.Mkdir(wf, 0o755)
	db := filepath.Join(dir, "db")
	old := time.Now().UTC().Add(-60 * 24 * time.Hour)
	recent := time.Now().UTC().Add(-2 * 24 * time.Hour)
	write := func(at time.Time, status string) string {
		p := filepath.Join(db, "state", "wf", at.Format("2006-01-02"), at.Format("15:04:05.000Z"))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(`{"status":"`+status+`","externalID":"x","retryCount":0}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := write(old.Truncate(time.Hour), "SUCCESS")
	kept := []string{write(old.Truncate(time.Hour).Add(time.Hour), "RUNNING"), write(recent.Truncate(time.Hour), "SUCCESS")}

	// An old run of the command service (its record and log) goes too; the
	// jobs directory is beside the db by default.
	oldJob := filepath.Join(dir, "jobs", "wf", old.Format("20060102T150405Z")+"."+strconv.FormatInt(old.UnixNano(), 10))
	os.MkdirAll(oldJob, 0o755)
	if err := os.WriteFile(filepath.Join(oldJob, "exit.json"), []byte(`{"exitCode":0,"finished":"`+old.Format(time.RFC3339)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	var stderr safeBuffer
	cfg := Config{Workflows: wf, DB: db, URLFile: filepath.Join(dir, "url"), Stderr: &stderr, PruneOlderThan: 30 * 24 * time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	waitFile(t, cfg.URLFile)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "pruned command jobs") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "deleted=1") {
		t.Errorf("log:\n%s", stderr.String())
	}
	if _, err := os.Stat(oldJob); !os.IsNotExist(err) {
		t.Errorf("old command job not pruned: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("old final slot not pruned: %v", err)
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("pruned %s: %v", p, err)
		}
	}

	cfg.PruneOlderThan = 3 * 24 * time.Hour
	os.Remove(cfg.URLFile)
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "must be at least") {
		t.Errorf("3-day retention: %v", err)
	}
}
