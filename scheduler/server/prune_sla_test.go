package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestRunPrunesOldSLARecords: --prune-older-than also removes the
// engine's records of SLA misses sent (register bucket celos-sla-missed)
// whose deadline is more than two windows old, here of a workflow no
// longer deployed, which the engine never reads again; a recent record,
// the bucket's "since" and the registers of other buckets (user data)
// stay. Before, nothing removed them.
func TestRunPrunesOldSLARecords(t *testing.T) {
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "wf")
	os.Mkdir(wfDir, 0o755)
	dbDir := filepath.Join(dir, "db")
	now := time.Now().UTC().Truncate(time.Hour)
	key := func(wf string, at time.Time) string {
		h := sha256.Sum256([]byte(wf))
		return hex.EncodeToString(h[:12]) + "-" + strconv.FormatInt(at.UnixMilli(), 10)
	}
	put := func(bucket, k string, v any) {
		raw, _ := json.Marshal(v)
		p := filepath.Join(dbDir, "register", bucket, k)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record := func(wf string, at time.Time) map[string]string {
		return map[string]string{"workflow": wf, "slot": slot.FormatTime(at), "deadline": slot.FormatTime(at.Add(time.Hour)), "sent": slot.FormatTime(at.Add(time.Hour))}
	}
	old, recent := now.Add(-60*24*time.Hour), now.Add(-2*24*time.Hour)
	put("celos-sla-missed", key("gone", old), record("gone", old))
	put("celos-sla-missed", key("gone", recent), record("gone", recent))
	put("celos-sla-missed", "since", map[string]string{"since": slot.FormatTime(old)})
	put("ingest", key("gone", old), record("gone", old)) // a user's bucket

	log := pruneOnce(t, Config{Workflows: wfDir, DB: dbDir, URLFile: filepath.Join(dir, "url"), PruneOlderThan: 30 * 24 * time.Hour})
	list := func(bucket string) []string {
		entries, _ := os.ReadDir(filepath.Join(dbDir, "register", bucket))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	want := []string{key("gone", recent), "since"}
	slices.Sort(want)
	if d := cmp.Diff(want, list("celos-sla-missed")); d != "" {
		t.Errorf("records of SLA misses after the prune (-want +got):\n%s\nlog:\n%s", d, log)
	}
	if d := cmp.Diff([]string{key("gone", old)}, list("ingest")); d != "" {
		t.Errorf("a user's bucket after the prune (-want +got):\n%s", d)
	}
}
