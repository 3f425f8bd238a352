package ui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// filedService is memService with the engine's WorkflowFile.
type filedService struct {
	*memService
	files map[string]string
}

func (f filedService) WorkflowFile(id string) (string, error) {
	file, ok := f.files[id]
	if !ok {
		return "", fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	return file, nil
}

// TestGridGroupsByProject: without --ui-config the rows are grouped by
// project (the workflows file), sorted, with the deploy's commit, time and
// user in the group's header, "dirty" and "changed since" when so, and
// "not deployed with celos deploy" for a file no manifest names.
func TestGridGroupsByProject(t *testing.T) {
	m := newMem()
	files := map[string]string{}
	for id, file := range map[string]string{"wc-nyc": "wordcount.json", "wc-lax": "wordcount.json", "ingest": "ingest.json", "adhoc": "byhand.json"} {
		m.add(id, time.Hour, workflow.ServiceOozie)
		files[id] = file
	}
	at := time.Date(2026, 11, 24, 9, 12, 0, 0, time.UTC)
	deploys := map[string]Deployment{
		"wordcount.json": {Commit: "d6d8a42c0ffee", Dirty: true, At: at, User: "alice"},
		"ingest.json":    {Commit: "0123456789", At: at.Add(-time.Hour), User: "ci", Changed: true},
	}
	h, err := New(filedService{m, files}, Options{Now: func() time.Time { return demoNow }, Deployment: func(file string) (Deployment, bool) {
		d, ok := deploys[file]
		return d, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	page := wantStatus(t, get(t, h, "/ui"), 200)
	groups := regexp.MustCompile(`(?s)<section class="grp" data-group="([^"]*)">(.*?)</section>`).FindAllStringSubmatch(page, -1)
	var names []string
	for _, g := range groups {
		names = append(names, g[1])
	}
	if got := strings.Join(names, " "); got != "byhand ingest wordcount" {
		t.Fatalf("groups = %s, want byhand ingest wordcount", got)
	}
	for i, want := range [][]string{
		{"not deployed with celos deploy", `data-w="adhoc"`},
		{"deployed <code>0123456</code> · 2026-11-24 08:12 UTC · ci", "changed since", `data-w="ingest"`},
		{"deployed <code>d6d8a42</code> <b class=\"dirty\"", "dirty</b> · 2026-11-24 09:12 UTC · alice", "2 workflows", `data-w="wc-lax"`, `data-w="wc-nyc"`},
	} {
		for _, w := range want {
			if !strings.Contains(groups[i][2], w) {
				t.Errorf("group %s lacks %q:\n%s", names[i], w, groups[i][2])
			}
		}
	}
	if strings.Contains(groups[2][2], "changed since") {
		t.Error("an unchanged file marked changed")
	}
	// With --ui-config, the config's groups win (as in Celos).
	h, _ = New(filedService{m, files}, Options{Now: func() time.Time { return demoNow }, Config: Config{Groups: []Group{{Name: "Mine", Workflows: []string{"adhoc"}}}}})
	page = wantStatus(t, get(t, h, "/ui"), 200)
	if !strings.Contains(page, `data-group="Mine"`) || !strings.Contains(page, `data-group="Unlisted workflows"`) || strings.Contains(page, `data-group="wordcount"`) {
		t.Error("the UI config's groups do not replace the projects")
	}
}
