package celosjs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema"
)

// update rewrites the golden CUE files (testdata/golden/CASE/*.cue).
var update = os.Getenv("CELOS_UPDATE_GOLDEN") != ""

// jsIn lists the .js files of a testdata directory, sorted.
func jsIn(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.js"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	sort.Strings(paths)
	return paths
}

func strs(errs []error) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestGolden converts each fixture directory, compares the CUE with its
// golden files, compiles it as celos vet does and checks it against the
// JavaScript as celos import-js --check does.
func TestGolden(t *testing.T) {
	tests := []struct {
		dir      string
		problems []string
		todos    []string
		// differ are the workflows --check must find different (the TODOs).
		differ []string
		// warnings are celos vet's warnings on the generated package.
		warnings int
		// nothing are the files that define no workflow.
		nothing []string
	}{
		{dir: "good", warnings: 3}, // workflow-bar is in another project
		{
			dir:    "todo",
			todos:  []string{`testdata/todo/yesterday.js:10:50: TODO: workflow "daily-rollup": property "yesterday" of the property function is not converted: its value is not the slot time's fields: "/daily/2015-09-11" at 2015-09-12T20:00:00Z, "/daily/2024-02-28" at 2024-02-29T23:59:59Z, "/daily/2000-12-31" at 2001-01-01T00:00:00Z`},
			differ: []string{"daily-rollup"},
		},
		{
			dir:     "bad",
			nothing: []string{"testdata/bad/empty.js"},
			problems: []string{
				`testdata/bad/dup2.js:2:21: workflow "shared-id" is defined again (first at testdata/bad/dup1.js:1:21); this definition is not converted`,
				`testdata/bad/endless.js:2:N: evaluation did not finish within 200ms (an endless loop?)`,
				`testdata/bad/syntax.js:4:1: syntax error: Unexpected token }`,
				`testdata/bad/throws.js:3:15: no input configured`,
				`testdata/bad/unknown.js:5:16: TypeError: celos.commandTrigger is not a function of Celos's JavaScript API`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			res := Evaluate(jsIn(t, tt.dir), Options{DefaultsDir: filepath.Join("testdata", "defaults"), Timeout: 200 * time.Millisecond})
			// Where an endless loop is interrupted within its line varies.
			problems := strs(res.Problems)
			for i, p := range problems {
				problems[i] = endlessCol.ReplaceAllString(p, "endless.js:2:N:")
			}
			if d := cmp.Diff(tt.problems, problems, cmpEmpty); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
			var nothing []string
			for _, f := range res.Files {
				if f.DefinesNothing() {
					nothing = append(nothing, f.Path)
				}
			}
			if d := cmp.Diff(tt.nothing, nothing, cmpEmpty); d != "" {
				t.Errorf("files defining nothing (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.todos, strs(res.TODOs()), cmpEmpty); d != "" {
				t.Errorf("TODOs (-want +got):\n%s", d)
			}
			files, err := Generate(res, GenOptions{Package: tt.dir, Project: tt.dir})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", tt.dir)
			if update {
				os.RemoveAll(golden)
				if err := os.MkdirAll(golden, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			out := t.TempDir()
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
				if update {
					if err := os.WriteFile(filepath.Join(golden, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, _ := filepath.Glob(filepath.Join(golden, "*.cue"))
			var wantNames, gotNames []string
			for _, w := range want {
				wantNames = append(wantNames, filepath.Base(w))
			}
			for n := range files {
				gotNames = append(gotNames, n)
			}
			sort.Strings(gotNames)
			if d := cmp.Diff(wantNames, gotNames); d != "" {
				t.Errorf("generated files (-golden +got):\n%s", d)
			}
			for _, w := range want {
				data, _ := os.ReadFile(w)
				if d := cmp.Diff(string(data), string(files[filepath.Base(w)])); d != "" {
					t.Errorf("%s (-golden +got; CELOS_UPDATE_GOLDEN=1 rewrites it):\n%s", w, d)
				}
			}

			p, diags, err := schema.Compile(out)
			if err != nil {
				t.Fatalf("the generated package does not compile:\n%v", err)
			}
			if len(diags) != tt.warnings {
				t.Errorf("celos vet: %d diagnostics, want %d warnings: %v", len(diags), tt.warnings, diags)
			}
			var differ []string
			for _, d := range Compare(res, p) {
				differ = append(differ, d.ID)
			}
			if d := cmp.Diff(tt.differ, differ, cmpEmpty); d != "" {
				t.Errorf("--check: differing workflows (-want +got):\n%s", d)
			}
		})
	}
}

var endlessCol = regexp.MustCompile(`endless\.js:2:\d+:`)

var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
})
