package deploy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPlanDistrustsRacyManifest: plan, like deploy, trusts a manifest's
// checksum only when the recorded modification time is at least
// racyMargin older than the deploy that recorded it. A manifest of an
// older celos records the upload's own time; a later write in the same
// second, with the same size, leaves the listing as recorded, and plan
// used to call such a changed file unchanged.
func TestPlanDistrustsRacyManifest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(f.hdfsRoot, "wordcount", "workflow.xml")
	fi, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest as an older celos wrote it: deployed in the second
	// after the upload.
	mpath := filepath.Join(f.wfDir, StateDir, "wordcount.manifest.json")
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["deployedAt"] = fi.ModTime().Add(time.Second).UTC().Format(time.RFC3339Nano)
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// Someone rewrites the live file in that same second, same size.
	old, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(live, []byte(strings.ToUpper(string(old))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	p, err := MakePlan(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, c := range p.FilesChanged {
		changed = append(changed, c.Path)
	}
	if d := cmp.Diff([]string{"workflow.xml"}, changed); d != "" {
		t.Fatalf("files changed (-want +got):\n%s", d)
	}
}
