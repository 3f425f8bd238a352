package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/deploy"
	"github.com/celos-go/celos/scheduler/ui"
)

// TestDeployments: the UI's group header reads the project's deploy
// manifest: commit, dirty flag, time, user; a workflows file edited since
// the deploy is marked changed; a missing, malformed or foreign manifest
// and a hostile file name are no deployment.
func TestDeployments(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, deploy.StateDir), 0o755)
	content := []byte(`{"format": "celos.dev/workflows/v1", "project": "wc", "workflows": []}` + "\n")
	os.WriteFile(filepath.Join(dir, "wc.json"), content, 0o644)
	sum := sha256.Sum256(content)
	at := time.Date(2026, 11, 24, 9, 12, 0, 0, time.UTC)
	m := deploy.Manifest{Format: deploy.ManifestFormat, Project: "wc", DeployedAt: at, User: "alice", GitCommit: "d6d8a42c0ffee", GitDirty: true, WorkflowsSHA256: hex.EncodeToString(sum[:])}
	data, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(dir, deploy.StateDir, "wc.manifest.json"), data, 0o644)
	os.WriteFile(filepath.Join(dir, "byhand.json"), content, 0o644)
	os.WriteFile(filepath.Join(dir, "bad.json"), content, 0o644)
	os.WriteFile(filepath.Join(dir, deploy.StateDir, "bad.manifest.json"), []byte("{not json"), 0o644)
	os.WriteFile(filepath.Join(dir, "other.json"), content, 0o644)
	os.WriteFile(filepath.Join(dir, deploy.StateDir, "other.manifest.json"), data, 0o644) // names project wc

	now := at.Add(time.Hour)
	d := newDeployments(dir)
	d.now = func() time.Time { return now }
	got, ok := d.Deployment("wc.json")
	want := ui.Deployment{Commit: "d6d8a42c0ffee", Dirty: true, At: at, User: "alice"}
	if d := cmp.Diff(want, got); !ok || d != "" {
		t.Errorf("wc.json: ok=%v (-want +got):\n%s", ok, d)
	}
	for _, f := range []string{"byhand.json", "bad.json", "other.json", "../wc.json", "wc", ".json", "nope.json"} {
		if got, ok := d.Deployment(f); ok {
			t.Errorf("%s: a deployment %+v", f, got)
		}
	}
	// Edited by hand after the deploy: seen once the entry is rechecked.
	os.WriteFile(filepath.Join(dir, "wc.json"), append(content, ' '), 0o644)
	if got, _ := d.Deployment("wc.json"); got.Changed {
		t.Error("rechecked before deployRecheck")
	}
	now = now.Add(deployRecheck)
	if got, ok := d.Deployment("wc.json"); !ok || !got.Changed {
		t.Errorf("an edited workflows file is not marked changed: %+v %v", got, ok)
	}
}
