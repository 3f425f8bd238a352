package sandbox

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

func TestRewritePath(t *testing.T) {
	const pre = "/user/u/.celos-test/p/run-1/case"
	tests := []struct {
		prefix, in string
		local      bool
		want       string
	}{
		// The rules of issue 15.
		{pre, "/in/${year}", false, pre + "/in/${year}"},
		{pre, "hdfs://ns:2345/x", false, "hdfs://ns:2345" + pre + "/x"},
		{pre, "hdfs:///x", false, "hdfs://" + pre + "/x"},
		{"/", "/in/${year}", false, "/in/${year}"},
		{"/", "hdfs://ns:2345/x", false, "hdfs://ns:2345/x"},
		{"/", "hdfs:///x", false, "hdfs:///x"},
		// More.
		{pre, "hdfs://ns:2345", false, "hdfs://ns:2345" + pre},
		{pre, "HDFS://ns/x", false, "HDFS://ns" + pre + "/x"},
		{pre, "${nameNode}/lib", false, "${nameNode}" + pre + "/lib"},
		{pre, "/a/../b", false, pre + "/a/../b"}, // as written: HDFS resolves it under the prefix
		{pre, "file:///x/y", false, "file://" + pre + "/x/y"},
		// On the local disk, scheme and authority go.
		{"/tmp/t/case", "/in/x", true, "/tmp/t/case/in/x"},
		{"/tmp/t/case", "hdfs://ns:2345/x", true, "/tmp/t/case/x"},
		{"/tmp/t/case", "hdfs:///x", true, "/tmp/t/case/x"},
		{"/tmp/t/case", "${nameNode}/x", true, "/tmp/t/case/x"},
		{"/", "hdfs://ns/x", true, "/x"},
		// Relative paths are relative to the sandbox, as they were to
		// the server's working directory or the HDFS user's home.
		{pre, "in/x", false, pre + "/in/x"},
		{"/tmp/t/case", "var/in/${hour}/_READY", true, "/tmp/t/case/var/in/${hour}/_READY"},
	}
	for _, tt := range tests {
		got, err := RewritePath(tt.prefix, tt.in, tt.local)
		if err != nil || got != tt.want {
			t.Errorf("RewritePath(%q, %q, local=%v) = %q, %v; want %q", tt.prefix, tt.in, tt.local, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "s3a://bucket/x", "${nameNode}x"} {
		if got, err := RewritePath(pre, bad, false); !errors.Is(err, ErrNotRewritable) {
			t.Errorf("RewritePath(%q) = %q, %v; want ErrNotRewritable", bad, got, err)
		}
	}
}

func TestRewriteWorkflows(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	oz := fixture.Hourly("oz")
	oz.Trigger = workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{
		{Type: workflow.TriggerHDFSCheck, Path: "/in/${hour}", FS: "hdfs://nn:8020"},
		{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "hdfs:///stop"}},
	}}
	oz.ExternalService = fixture.Oozie(map[string]string{
		"oozie.wf.application.path": "/app/wf.xml",
		"inputPath":                 "/in/${hour}",
		"outputPath":                "/out/${hour}",
		"queue":                     "default",
	})
	cmd := fixture.Hourly("cmd")
	cmd.ExternalService = fixture.Command("true")
	cmd.StartTime = start.Add(48 * time.Hour)
	p := fixture.Project("p", cmd, oz)
	orig, _ := p.Marshal()
	c := &testcase.Case{Start: start, PathProperties: []string{"inputPath"}}
	got, err := Rewrite{Prefix: "/pre", FS: "hdfs://nn:8020"}.Workflows(p, c)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := p.Marshal()
	if diff := cmp.Diff(string(orig), string(after)); diff != "" {
		t.Errorf("the project changed:\n%s", diff)
	}
	w := got.Workflows[1]
	wantTrigger := workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{
		{Type: workflow.TriggerHDFSCheck, Path: "/pre/in/${hour}", FS: "hdfs://nn:8020"},
		{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "hdfs:///pre/stop"}},
	}}
	if diff := cmp.Diff(wantTrigger, w.Trigger); diff != "" {
		t.Errorf("trigger (-want +got):\n%s", diff)
	}
	wantProps := map[string]string{
		"oozie.wf.application.path": "/pre/app/wf.xml",
		"inputPath":                 "/pre/in/${hour}",
		"outputPath":                "/out/${hour}", // not marked as a path
		"queue":                     "default",
	}
	if diff := cmp.Diff(wantProps, w.ExternalService.Properties); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	if !w.StartTime.Equal(start) {
		t.Errorf("start time %v, want the case's start %v", w.StartTime, start)
	}
	if c := got.Workflows[0]; !c.StartTime.Equal(start.Add(48*time.Hour)) || c.ExternalService.Env[PrefixEnv] != "/pre" || c.ExternalService.Env[FSEnv] != "hdfs://nn:8020" {
		t.Errorf("command workflow: start %v, env %v", c.StartTime, c.ExternalService.Env)
	}

	// A stand-in replaces the Oozie service; local drops the fs.
	c.Services = map[string]workflow.ExternalService{"oz": fixture.Command("sh", "-c", "echo")}
	got, err = Rewrite{Prefix: "/tmp/x", FS: "file:///", Local: true}.Workflows(p, c)
	if err != nil {
		t.Fatal(err)
	}
	w = got.Workflows[1]
	if w.ExternalService.Type != workflow.ServiceCommand || w.ExternalService.Env[PrefixEnv] != "/tmp/x" || w.Trigger.Triggers[0].FS != "" || w.Trigger.Triggers[0].Path != "/tmp/x/in/${hour}" {
		t.Errorf("local with a stand-in: %+v", w)
	}

	// A path that cannot be rewritten is an error naming the workflow.
	c.Services = nil
	oz.ExternalService.Properties["oozie.libpath"] = "s3a://bucket/lib"
	p = fixture.Project("p", oz)
	if _, err := (Rewrite{Prefix: "/pre"}).Workflows(p, c); !errors.Is(err, ErrNotRewritable) || err.Error() != `workflow oz: property oozie.libpath: "s3a://bucket/lib": a s3a: URI cannot be put under the test's prefix (only hdfs: and file: ones)` {
		t.Errorf("s3a libpath: %v", err)
	}

	// Commands run in the work directory, a relative dir under it.
	for dir, want := range map[string]string{"": "/w", "sub": "/w/sub", "/abs": "/abs"} {
		cw := fixture.Hourly("c")
		cw.ExternalService = fixture.Command("true")
		cw.ExternalService.Dir = dir
		got, err := Rewrite{Prefix: "/pre", WorkDir: "/w"}.Workflows(fixture.Project("p", cw), c)
		if err != nil || got.Workflows[0].ExternalService.Dir != want {
			t.Errorf("dir %q: %v %v, want %q", dir, got, err, want)
		}
	}
}

// TestRewriteStandInOnlyWhenMissing: a stand-in replaces a service the run
// does not have, and only such a one.
func TestRewriteStandInOnlyWhenMissing(t *testing.T) {
	oz := fixture.Hourly("oz")
	oz.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "/app"})
	p := fixture.Project("p", oz)
	c := &testcase.Case{Services: map[string]workflow.ExternalService{"oz": fixture.Command("true")}}
	for _, tt := range []struct {
		have map[string]bool
		want string
	}{
		{map[string]bool{"command": true}, "command"},
		{map[string]bool{"command": true, "oozie": true}, "oozie"},
	} {
		got, err := Rewrite{Prefix: "/p", Have: tt.have}.Workflows(p, c)
		if err != nil {
			t.Fatal(err)
		}
		if typ := got.Workflows[0].ExternalService.Type; typ != tt.want {
			t.Errorf("have %v: runs on %s, want %s", tt.have, typ, tt.want)
		}
	}
}
