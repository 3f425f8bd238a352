package celosjs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema"
)

// TestCommentsCannotInject: what the generated comments quote from the
// JavaScript (a helper's parameter list, its name, the file's name) can
// hold a newline; it is written so that the comment still ends where it
// should. Before, a newline there ended the comment and the rest was CUE:
// a parameter list `(dc /*\nworkflows: injected: ...\n//*/)` put a
// workflow the JavaScript never defined into the package (import-js said
// it converted 2 workflows, exit 0); so did a helper's name (a computed
// property name).
func TestCommentsCannotInject(t *testing.T) {
	const injected = `workflows: injected: {schedule: celos.#Hourly, trigger: celos.#Always, externalService: celos.#Oozie & {url: "http://evil", properties: {}}}`
	define := `celos.defineWorkflow({id: "w-" + dc, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
 trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({}, "http://oozie")});`
	tests := []struct {
		name, file, src string
	}{
		{"parameter list", "w.js", "function def(dc /*\n" + injected + "\n//*/) {\n" + define + "\n}\ndef(\"nyc\");\ndef(\"lax\");\n"},
		{"helper name", "w.js", "var o = {[" + strconv.Quote("d\n"+injected+"\n//") + "]: function (dc) {\n" + define + "\n}};\nvar f = o[Object.keys(o)[0]];\nf(\"nyc\");\nf(\"lax\");\n"},
		{"one call", "w.js", "var o = {[" + strconv.Quote("d\n"+injected+"\n//") + "]: function (dc) {\n" + define + "\n}};\nvar f = o[Object.keys(o)[0]];\nf(\"nyc\");\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := os.WriteFile(tt.file, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			res := Evaluate([]string{tt.file}, Options{Timeout: 30 * time.Second})
			if len(res.Problems) > 0 {
				t.Fatal(res.Problems)
			}
			files, err := Generate(res, GenOptions{Package: "p", Project: "p"})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			out := t.TempDir()
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p, _, err := schema.Compile(out)
			if err != nil {
				t.Fatalf("the generated package does not compile:\n%v", err)
			}
			var ids, want []string
			for _, w := range p.Workflows {
				ids = append(ids, w.ID)
			}
			for _, w := range res.Workflows() {
				want = append(want, w.ID)
			}
			sort.Strings(want)
			sort.Strings(ids)
			if d := cmp.Diff(want, ids, cmpEmpty); d != "" {
				t.Errorf("workflows of the generated package (-javascript +cue):\n%s", d)
			}
		})
	}
}

// TestGeneratedFileNames: every file the JavaScript's names give is one
// CUE loads, and no two differ in case only. Before, _common.js and
// .hidden.js became _common.cue and .hidden.cue, which CUE ignores (their
// workflows silently left out; import-js said it converted them, exit
// 0), a name with a newline or a byte that is not UTF-8 made a file CUE
// refuses, and Project.js beside project.js became Project.cue beside
// project.cue: one file on a case-insensitive file system (macOS).
func TestGeneratedFileNames(t *testing.T) {
	t.Chdir(t.TempDir())
	define := `celos.defineWorkflow({id: %q, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
 trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({}, "http://oozie")});`
	var paths, want []string
	for i, name := range []string{"_common.js", ".hidden.js", "..js", "Project.js", "W.js", "w.js", "new\nline.js", "\xff.js", "DEFAULTS.js", "a\\b.js", "c:d.js"} {
		id := fmt.Sprint("w", i)
		if err := os.WriteFile(name, []byte(fmt.Sprintf(define, id)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, name)
		want = append(want, id)
	}
	res := Evaluate(paths, Options{Timeout: 30 * time.Second})
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	files, err := Generate(res, GenOptions{Package: "p", Project: "p"})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	out := t.TempDir()
	lower := map[string]string{}
	for name, data := range files {
		if !fs.ValidPath(name) || strings.ContainsAny(name, "/\\:") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			t.Errorf("generated file %q: CUE does not load it", name)
		}
		if other, dup := lower[strings.ToLower(name)]; dup {
			t.Errorf("generated files %q and %q differ in case only", other, name)
		}
		lower[strings.ToLower(name)] = name
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, _, err := schema.Compile(out)
	if err != nil {
		t.Fatalf("the generated package does not compile:\n%v", err)
	}
	var ids []string
	for _, w := range p.Workflows {
		ids = append(ids, w.ID)
	}
	sort.Strings(ids)
	sort.Strings(want)
	if d := cmp.Diff(want, ids); d != "" {
		t.Errorf("workflows of the generated package (-javascript +cue):\n%s", d)
	}
}

// TestGroupingIsTriedOncePerCallSite: 10,000 workflows from one loop that
// do not fit one comprehension (two literals differ on one line) are
// written one by one, without trying the comprehension again for every
// member. Before, each member retried it over the members left: 1,000
// workflows took 1.3 s, 2,000 took 20 s, 20,000 did not finish in 5
// minutes. The bound below is a deadline against that, not a timing
// claim (it takes about a second).
func TestGroupingIsTriedOncePerCallSite(t *testing.T) {
	t.Chdir(t.TempDir())
	src := `for (var i = 0; i < 10000; i++) {
  celos.defineWorkflow({id: "w-" + i, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
    trigger: celos.hdfsCheckTrigger("/in/" + i + "/" + (i % 7) + "/${year}", "hdfs://nn"),
    externalService: celos.oozieExternalService({"oozie.wf.application.path": "/w/" + (i % 7) + "/workflow.xml"}, "http://oozie")});
}`
	if err := os.WriteFile("w.js", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	res := Evaluate([]string{"w.js"}, Options{Timeout: time.Minute})
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	done := make(chan error, 1)
	var files map[string][]byte
	go func() {
		var err error
		files, err = Generate(res, GenOptions{Package: "p", Project: "p"})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Generate of 10,000 workflows did not finish within 2 minutes")
	}
	if n := strings.Count(string(files["w.cue"]), "\nworkflows: "); n != 10000 {
		t.Errorf("w.cue defines %d workflows one by one, want 10000", n)
	}
}

// TestManyWorkflowsInOneFile: a file defining 40,000 workflows evaluates
// within the default time limit. Before, every definition compared its id
// with every earlier one (to refuse a second definition): 40,000 took
// 5.8 s, past the 5 s limit, and the file was "an endless loop"; now 0.4 s
// (BenchmarkEvaluateOneLoop).
func TestManyWorkflowsInOneFile(t *testing.T) {
	t.Chdir(t.TempDir())
	src := `for (var i = 0; i < 40000; i++) {
  celos.defineWorkflow({id: "w-" + i, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
    trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({}, "http://oozie")});
}
celos.defineWorkflow({id: "w-7", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
    trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({}, "http://oozie")});
`
	if err := os.WriteFile("w.js", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	res := Evaluate([]string{"w.js"}, Options{})
	want := []string{`w.js:5:21: workflow "w-7" is defined twice in this file (first at w.js:2:23)`}
	if d := cmp.Diff(want, strs(res.Problems)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
