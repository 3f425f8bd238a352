package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/schema/workflow"
)

// TestCheckOozie: the installation's Oozie is asked before any case runs
// when a workflow runs on it; one that does not answer is named with the
// workflow that needs it; a project whose workflows do not use it (a
// command, an Oozie of their own) does not ask.
func TestCheckOozie(t *testing.T) {
	fake, err := ooziefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	onDefault := fixture.Hourly("wc")
	onDefault.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "/apps/p/wc"})
	onDefault.ExternalService.URL = ""
	ownOozie := fixture.Hourly("own")
	ownOozie.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "/apps/p/own"})
	ownOozie.ExternalService.URL = "http://127.0.0.1:1/oozie"
	command := fixture.Hourly("cmd")
	command.ExternalService = fixture.Command("true")

	ctx := context.Background()
	up := &defaults.Defaults{Oozie: fake.URL}
	if err := CheckOozie(ctx, up, fixture.Project("p", onDefault, command)); err != nil {
		t.Errorf("an Oozie that answers: %v", err)
	}
	fake.Down()
	err = CheckOozie(ctx, up, fixture.Project("p", command, onDefault))
	want := "the Oozie of its defaults (CELOS_DEFAULT_OOZIE " + fake.URL + ") does not answer, and workflow wc runs on it: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("an Oozie that does not answer: got %v, want %q...connection refused", err, want)
	}
	for _, c := range []struct {
		name string
		d    *defaults.Defaults
		p    []workflow.Workflow
	}{
		{"commands and an Oozie of their own", up, []workflow.Workflow{command, ownOozie}},
		{"no defaults", nil, []workflow.Workflow{onDefault}},
		{"no Oozie in the defaults", &defaults.Defaults{HDFS: "hdfs://nn:8020"}, []workflow.Workflow{onDefault}},
	} {
		if err := CheckOozie(ctx, c.d, fixture.Project("p", c.p...)); err != nil {
			t.Errorf("%s: %v, want no check", c.name, err)
		}
	}
	if err := CheckOozie(ctx, &defaults.Defaults{Oozie: "ftp://x"}, fixture.Project("p", onDefault)); err == nil || !strings.HasPrefix(err.Error(), "CELOS_DEFAULT_OOZIE: bad Oozie URL") {
		t.Errorf("a bad URL: %v", err)
	}
}
