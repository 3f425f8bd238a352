package schema

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/cache"
	"github.com/celos-go/celos/schema/workflow"
)

// cacheProject writes a project with an @embed'd file and a vendored
// module file, and returns its directory.
func cacheProject(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/proj\"\nlanguage: version: \"v0.17.0\"\n",
		"proj.cue": `@extern(embed)

package proj

import "celos.dev/celos"

_props: _ @embed(file=props.json)

workflows: celos.#Workflows
workflows: a: {
	schedule: celos.#Hourly
	trigger: celos.#Always
	externalService: celos.#Oozie & {properties: _props}
}
`,
		"props.json": `{"oozie.wf.application.path": "/app/workflow.xml", "queue": "etl"}`,
		"tests.cue": `package proj

import "celos.dev/celos"

tests: celos.#Tests
tests: one: {
	sampleTimeStart: "2026-01-01T10:00:00Z"
	sampleTimeEnd:   "2026-01-01T11:00:00Z"
	inputs: [{path: "/in", fixture: "fx/in"}]
	outputs: [{path: "/out", expected: "fx/out"}]
}
`,
		"fx/in/a.txt":  "a\n",
		"fx/out/a.txt": "a\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// outcome is what a compile tells its user.
type outcome struct {
	JSON  string
	Diags []Diagnostic
	Err   string
}

func outcomeOf(r *Compiled) outcome {
	o := outcome{JSON: string(r.JSON), Diags: r.Diags}
	if r.Err != nil {
		o.Err = r.Err.Error()
	}
	return o
}

// uncached is the answer of a compile without the cache.
func uncached(t *testing.T, dir string) outcome {
	t.Helper()
	r := CompileCached(dir, nil)
	if r.Hit {
		t.Fatal("a hit without a cache")
	}
	return outcomeOf(r)
}

// TestCompileCachedAnswers: the second compile of an unchanged project is
// a hit with exactly the first's answer (the document byte for byte, the
// diagnostics), for a valid and an invalid project; the project parses.
func TestCompileCachedAnswers(t *testing.T) {
	dir := cacheProject(t)
	cc := &Cache{Store: cache.Open(t.TempDir()), Build: "test"}
	want := uncached(t, dir)
	if want.Err != "" || !strings.Contains(want.JSON, `"queue": "etl"`) {
		t.Fatalf("project: %+v", want)
	}
	for i, hit := range []bool{false, true, true} {
		r := CompileCached(dir, cc)
		if r.Hit != hit {
			t.Fatalf("run %d: hit %v, want %v", i, r.Hit, hit)
		}
		if d := cmp.Diff(want, outcomeOf(r)); d != "" {
			t.Fatalf("run %d (-uncached +cached):\n%s", i, d)
		}
		p, err := r.Load()
		if err != nil || len(p.Workflows) != 1 || p.Workflows[0].ExternalService.Properties["queue"] != "etl" {
			t.Fatalf("run %d: Load: %+v %v", i, p, err)
		}
	}

	// An invalid project: its diagnostics come back the same.
	writeFile(t, filepath.Join(dir, "proj.cue"), strings.Replace(readFile(t, filepath.Join(dir, "proj.cue")), "celos.#Hourly", `{type: "cron", cron: "61 * * * * ?"}`, 1))
	want = uncached(t, dir)
	if want.Err == "" {
		t.Fatal("the bad cron was accepted")
	}
	for i, hit := range []bool{false, true} {
		r := CompileCached(dir, cc)
		if r.Hit != hit {
			t.Fatalf("invalid, run %d: hit %v, want %v", i, r.Hit, hit)
		}
		if d := cmp.Diff(want, outcomeOf(r)); d != "" {
			t.Fatalf("invalid, run %d (-uncached +cached):\n%s", i, d)
		}
	}
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCompileCachedInvalidation: a change to any input is a miss whose
// answer is the uncached compile's: the .cue file, the @embed'd file, a
// new .cue file, the module file, a vendored copy of the schema (which
// only adds a warning), another build of celos, and the working
// directory (diagnostics are relative to it).
func TestCompileCachedInvalidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string, cc *Cache)
	}{
		{"the .cue file", func(t *testing.T, dir string, cc *Cache) {
			writeFile(t, filepath.Join(dir, "proj.cue"), readFile(t, filepath.Join(dir, "proj.cue"))+"\nworkflows: b: workflows.a\n")
		}},
		{"the embedded file", func(t *testing.T, dir string, cc *Cache) {
			writeFile(t, filepath.Join(dir, "props.json"), `{"oozie.wf.application.path": "/app/workflow.xml", "queue": "ETL"}`)
		}},
		{"a new .cue file", func(t *testing.T, dir string, cc *Cache) {
			writeFile(t, filepath.Join(dir, "more.cue"), "package proj\n\nworkflows: c: workflows.a\n")
		}},
		{"the module file", func(t *testing.T, dir string, cc *Cache) {
			writeFile(t, filepath.Join(dir, "cue.mod", "module.cue"), "module: \"example.com/proj\"\nlanguage: version: \"v99.0.0\"\n")
		}},
		{"a vendored schema", func(t *testing.T, dir string, cc *Cache) {
			writeFile(t, filepath.Join(dir, filepath.FromSlash(SchemaVendorDir), "schema.cue"), "package celos\n")
		}},
		{"another build", func(t *testing.T, dir string, cc *Cache) { cc.Build = "test2" }},
		{"the working directory", func(t *testing.T, dir string, cc *Cache) { t.Chdir(dir) }},
		// Fixtures are not compile inputs (a directory of files): the
		// answer holds only while each named path is what it was.
		{"a fixture removed", func(t *testing.T, dir string, cc *Cache) {
			if err := os.RemoveAll(filepath.Join(dir, "fx")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cacheProject(t)
			cc := &Cache{Store: cache.Open(t.TempDir()), Build: "test"}
			before := CompileCached(dir, cc)
			if r := CompileCached(dir, cc); !r.Hit {
				t.Fatal("no hit before the change")
			}
			tc.change(t, dir, cc)
			r := CompileCached(dir, cc)
			if r.Hit {
				t.Fatal("a hit after the change")
			}
			want := uncached(t, dir)
			if d := cmp.Diff(want, outcomeOf(r)); d != "" {
				t.Fatalf("(-uncached +cached):\n%s", d)
			}
			if tc.name != "another build" && tc.name != "the working directory" && cmp.Equal(outcomeOf(before), want) {
				t.Fatal("the change changed nothing: the test proves nothing")
			}
			if r := CompileCached(dir, cc); !r.Hit || !cmp.Equal(want, outcomeOf(r)) {
				t.Fatalf("no hit after the change was compiled: %+v", r)
			}
		})
	}
}

// TestCompileCachedDamagedEntry: an entry damaged on disk, or rewritten
// with a valid checksum but not a compile's content, is not trusted: the
// project is compiled and the entry written again.
func TestCompileCachedDamagedEntry(t *testing.T) {
	for name, content := range map[string]func(old []byte) []byte{
		"flipped byte":        nil,
		"no diagnostics line": func([]byte) []byte { return []byte(`{"format": "celos.dev/workflows/v1"}`) },
		"empty":               func([]byte) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			dir := cacheProject(t)
			cacheDir := t.TempDir()
			cc := &Cache{Store: cache.Open(cacheDir), Build: "test"}
			want := outcomeOf(CompileCached(dir, cc))
			entries, err := filepath.Glob(filepath.Join(cacheDir, cacheKind, "*", "*"))
			if err != nil || len(entries) != 1 {
				t.Fatalf("entries %v %v", entries, err)
			}
			key := filepath.Base(entries[0])
			if content == nil {
				raw := []byte(readFile(t, entries[0]))
				raw[len(raw)-2] ^= 1
				writeFile(t, entries[0], string(raw))
			} else {
				old, _ := cc.Store.Get(cacheKind, key)
				// A valid checksum over content that is not a
				// compile's: the parse of the entry refuses it.
				if err := cc.Store.Put(cacheKind, key, content(old)); err != nil {
					t.Fatal(err)
				}
			}
			r := CompileCached(dir, cc)
			if r.Hit {
				t.Fatalf("damaged entry used: %+v", outcomeOf(r))
			}
			if d := cmp.Diff(want, outcomeOf(r)); d != "" {
				t.Fatalf("(-first +after damage):\n%s", d)
			}
			if r := CompileCached(dir, cc); !r.Hit || !cmp.Equal(want, outcomeOf(r)) {
				t.Fatal("the entry was not written again")
			}
		})
	}
}

// TestCompileCachedConcurrent: compiles of one project at once, sharing
// a cache, all give the uncached answer.
func TestCompileCachedConcurrent(t *testing.T) {
	dir := cacheProject(t)
	cc := &Cache{Store: cache.Open(t.TempDir()), Build: "test"}
	want := uncached(t, dir)
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				if d := cmp.Diff(want, outcomeOf(CompileCached(dir, cc))); d != "" {
					t.Errorf("(-uncached +cached):\n%s", d)
				}
			}
		}()
	}
	wg.Wait()
}

// TestCompileCachedRefusedNotCached: a project with a file refused (an
// @embed out of the module) is never cached.
func TestCompileCachedRefusedNotCached(t *testing.T) {
	dir := cacheProject(t)
	outside := filepath.Join(filepath.Dir(dir), "secret.json")
	writeFile(t, outside, `{"a": 1}`)
	if err := os.Remove(filepath.Join(dir, "props.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "props.json")); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	cc := &Cache{Store: cache.Open(cacheDir), Build: "test"}
	for i := 0; i < 2; i++ {
		if r := CompileCached(dir, cc); r.Hit || r.Err == nil {
			t.Fatalf("run %d: %+v", i, outcomeOf(r))
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(cacheDir, cacheKind, "*", "*")); len(entries) != 0 {
		t.Fatalf("cached: %v", entries)
	}
}

// TestOptionsEvaluated checks that Options.Evaluated is called once per
// compile, after the evaluation and before any workflow is converted;
// not for a package CUE rejects, nor for an answer from the cache.
func TestOptionsEvaluated(t *testing.T) {
	dir := cacheProject(t)
	var events []string
	oldCheck := walkCheck
	walkCheck = func(id string, walked, decoded workflow.Workflow, decodedOK bool) {
		events = append(events, "walk "+id)
		if oldCheck != nil {
			oldCheck(id, walked, decoded, decodedOK)
		}
	}
	defer func() { walkCheck = oldCheck }()
	opts := Options{Evaluated: func() { events = append(events, "evaluated") }}

	if _, _, err := CompileWith(dir, opts); err != nil {
		t.Fatal(err)
	}
	want := []string{"evaluated", "walk a"}
	if d := cmp.Diff(want, events); d != "" {
		t.Fatalf("uncached (-want +got):\n%s", d)
	}

	cc := &Cache{Store: cache.Open(t.TempDir()), Build: "test"}
	for i, wantEvents := range [][]string{{"evaluated", "walk a"}, nil} {
		events = nil
		r := CompileCachedWith(dir, cc, opts)
		if r.Err != nil || r.Hit != (i == 1) || r.JSON == nil {
			t.Fatalf("cached run %d: hit %v, JSON %d bytes, err %v", i, r.Hit, len(r.JSON), r.Err)
		}
		if d := cmp.Diff(wantEvents, events); d != "" {
			t.Fatalf("cached run %d (-want +got):\n%s", i, d)
		}
	}

	// CUE rejects the package: nothing was evaluated to convert.
	writeFile(t, filepath.Join(dir, "proj.cue"), strings.Replace(readFile(t, filepath.Join(dir, "proj.cue")), "celos.#Always", "42", 1))
	events = nil
	if _, _, err := CompileWith(dir, opts); err == nil {
		t.Fatal("a trigger of 42 was accepted")
	}
	if len(events) != 0 {
		t.Fatalf("invalid package: %v", events)
	}
}
