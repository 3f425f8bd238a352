package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/celos-go/celos/schema/workflow/testcase"
)

// TestCompileTestCases compiles each project of testdata/projects/tests
// with CompileWithTests and compares its diagnostics with the want file
// (CELOS_UPDATE_GOLDEN=1 rewrites them).
func TestCompileTestCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "projects", "tests", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			abs, _ := filepath.Abs(file)
			ar, err := txtar.ParseFile(abs)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			wantIdx := extract(t, ar, work)
			if wantIdx < 0 {
				t.Fatal("no want file")
			}
			t.Chdir(work)
			p, suite, diags, err := CompileWithTests("proj")
			var b strings.Builder
			for _, d := range diags {
				b.WriteString(d.String() + "\n")
			}
			got := b.String()
			if (err != nil) != (suite == nil) || (err != nil) != (p == nil) {
				t.Errorf("err=%v but suite=%v, project=%v", err, suite != nil, p != nil)
			}
			if update {
				ar.Files[wantIdx].Data = []byte(got)
				if err := os.WriteFile(abs, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(ar.Files[wantIdx].Data), got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompileTestsSuite checks what a valid test case compiles to: times,
// absolute fixture paths, defaults (timeout, comparer), and that Compile
// (without tests) accepts the same project.
func TestCompileTestsSuite(t *testing.T) {
	ar, err := txtar.ParseFile(filepath.Join("..", "testdata", "projects", "tests", "valid.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	extract(t, ar, work)
	dir := filepath.Join(work, "proj")
	p, suite, _, err := CompileWithTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Compile(dir); err != nil {
		t.Fatalf("Compile refuses a project with tests: %v", err)
	}
	if len(p.Workflows) != 1 {
		t.Fatalf("workflows: %d", len(p.Workflows))
	}
	got := suite.Cases
	for i := range got {
		got[i].Where = ""
	}
	want := []testcase.Case{{
		Name:  "one-hour",
		Start: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC),
		End:   time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC),
		Inputs: []testcase.Input{
			{Path: "/in", Fixture: filepath.Join(dir, "fx", "in")},
			{Path: "/in/11", Files: map[string]string{"_READY": "", "a.txt": "a\n"}},
		},
		Outputs: []testcase.Output{
			{Path: "/out", Expected: filepath.Join(dir, "fx", "out"), Comparer: testcase.Comparer{Type: "plain"}},
			{Path: "/out2", Files: map[string]string{}, Comparer: testcase.Comparer{Type: "tsv", OrderedRows: true}},
			{Path: "/out3", Files: map[string]string{"part-0": "{}\n"}, Comparer: testcase.Comparer{Type: "ndjson", Ignore: []string{"meta.at"}}},
		},
		Timeout: 10 * time.Minute,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suite (-want +got):\n%s", diff)
	}
}

// extract writes the files of ar into dir, but the one named "want",
// whose index it returns (-1 when there is none).
func extract(t *testing.T, ar *txtar.Archive, dir string) int {
	t.Helper()
	wantIdx := -1
	for i, f := range ar.Files {
		if f.Name == "want" {
			wantIdx = i
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return wantIdx
}
