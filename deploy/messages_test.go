package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// TestFirstDeployFailureSaysNothingIntact: a failed first deploy has no
// previous deployment to reassure about, so the message does not mention
// one (Intact stays true: nothing was left behind).
func TestFirstDeployFailureSaysNothingIntact(t *testing.T) {
	f := newFixture(t)
	boom := errors.New("injected failure")
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &faultFS{FS: fsys, onWrite: func(name string) error {
			if strings.HasSuffix(name, "/lib/wc.jar") {
				return boom
			}
			return nil
		}}
	}
	_, err := Deploy(context.Background(), f.options())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact || se.AtRisk {
		t.Fatalf("want a StepError at the upload, intact, not at risk; got %#v", err)
	}
	if strings.Contains(err.Error(), "previous deployment") {
		t.Errorf("message mentions a previous deployment there never was: %v", err)
	}
}

// TestPlanFailureSaysNothingIntact: plan changes nothing, so its errors do
// not end with the sentence about the previous deployment.
func TestPlanFailureSaysNothingIntact(t *testing.T) {
	f := newFixture(t)
	if _, err := Deploy(context.Background(), f.options()); err != nil {
		t.Fatal(err)
	}
	o := f.options()
	o.Target = f.target + ".missing"
	_, err := MakePlan(context.Background(), o)
	if err == nil || strings.Contains(err.Error(), "previous deployment") {
		t.Fatalf("want an error without the sentence about the previous deployment, got %v", err)
	}
}
