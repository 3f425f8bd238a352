package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

// WriteBenchProject writes a project of n generated workflows, each with a
// trigger tree of 8 nodes, with the schema vendored so that `cue export`
// evaluates the same package. It is the input of BenchmarkExport1000 and
// of scripts/bench-export.sh (through TestWriteBenchProject).
func writeBenchProject(t testing.TB, dir string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("package perf\n\nimport \"celos.dev/celos\"\n\nproject: \"perf\"\n\nworkflows: celos.#Workflows\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `
workflows: "wf-%04d": {
	schedule: celos.#Cron & {cron: "0 %d * * * ?"}
	trigger: celos.#And & {triggers: [
		celos.#HdfsCheck & {path: "/input/%d/${year}-${month}-${day}/${hour}00/_READY"},
		celos.#Or & {triggers: [celos.#Success & {workflow: "wf-%04d"}, celos.#HdfsCheck & {path: "/alt/%d/_READY", fs: "hdfs://nn:8020"}]},
		celos.#Offset & {seconds: -3600, trigger: celos.#Not & {trigger: celos.#Delay & {seconds: 600}}},
	]}
	externalService: celos.#Oozie & {properties: {
		"oozie.wf.application.path": "/wf/%d/workflow.xml"
		inputPath:                   "/input/%d/${year}-${month}-${day}/${hour}00/"
	}}
	maxRetryCount: %d
}
`, i, i%60, i, (i+n-1)%n, i, i, i, i%3)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	vendor := filepath.Join(dir, filepath.FromSlash(SchemaVendorDir))
	must(os.MkdirAll(vendor, 0o755))
	must(os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte(syntheticModule), 0o644))
	for _, f := range SchemaFiles() {
		must(os.WriteFile(filepath.Join(vendor, f.Name), f.Data, 0o644))
	}
	must(os.WriteFile(filepath.Join(dir, "perf.cue"), []byte(b.String()), 0o644))
}

// BenchmarkExport1000 compiles a project of 1,000 workflows (trigger trees
// of 8 nodes) side by side with what `cue export` does to the same package
// (load, evaluate, check concreteness, marshal JSON) through the same CUE
// library. `make bench` runs it; docs/benchmarks.md has the figures.
func BenchmarkExport1000(b *testing.B) {
	dir := b.TempDir()
	writeBenchProject(b, dir, 1000)
	b.Run("celos", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p, _, err := Compile(dir)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cue", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			inst := load.Instances([]string{"."}, &load.Config{Dir: dir, Env: []string{"CUE_REGISTRY=none"}})[0]
			if inst.Err != nil {
				b.Fatal(inst.Err)
			}
			v := cuecontext.New().BuildInstance(inst)
			if err := v.Validate(cue.Concrete(true)); err != nil {
				b.Fatal(err)
			}
			if _, err := v.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
