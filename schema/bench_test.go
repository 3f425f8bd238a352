package schema

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

// writeBenchProject writes a project of n generated workflows, each with a
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

// TestWriteBenchProject writes the benchmark project into the directory
// $CELOS_BENCH_PROJECT ($CELOS_BENCH_N workflows, default 1,000) for
// scripts/bench-export.sh; without it, a project of 20 workflows into a
// temporary directory. Either way it checks that the project compiles
// with every workflow.
func TestWriteBenchProject(t *testing.T) {
	dir, n := os.Getenv("CELOS_BENCH_PROJECT"), 20
	if dir == "" {
		dir = t.TempDir()
	} else {
		n = 1000
		if s := os.Getenv("CELOS_BENCH_N"); s != "" {
			if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 1 {
				t.Fatalf("CELOS_BENCH_N=%q: want a positive number", s)
			}
		}
	}
	writeBenchProject(t, dir, n)
	p, _, err := Compile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Workflows) != n || p.Project != "perf" {
		t.Fatalf("compiled %q with %d workflows, want perf with %d", p.Project, len(p.Workflows), n)
	}
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExport1000 compiles a project of 1,000 workflows (trigger trees
// of 8 nodes) side by side with what `cue export` does to the same package
// (load, evaluate, check concreteness, marshal JSON) through the same CUE
// library, in one run. Besides ns/op (wall time, which other load on the
// machine inflates) it reports cpu-ms/op, the CPU time used. `make bench`
// runs it; BenchmarkExportCLI1000 compares the two commands as processes.
func BenchmarkExport1000(b *testing.B) {
	dir := b.TempDir()
	writeBenchProject(b, dir, 1000)
	run := func(b *testing.B, f func() error) {
		b.ReportAllocs()
		runtime.GC()
		start := cpuTime()
		for i := 0; i < b.N; i++ {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
	b.Run("celos", func(b *testing.B) {
		run(b, func() error {
			p, _, err := Compile(dir)
			if err != nil {
				return err
			}
			_, err = p.Marshal()
			return err
		})
	})
	b.Run("cue", func(b *testing.B) {
		run(b, func() error {
			inst := load.Instances([]string{"."}, &load.Config{Dir: dir, Env: []string{"CUE_REGISTRY=none"}})[0]
			if inst.Err != nil {
				return inst.Err
			}
			v := cuecontext.New().BuildInstance(inst)
			if err := v.Validate(cue.Concrete(true)); err != nil {
				return err
			}
			_, err := v.MarshalJSON()
			return err
		})
	})
}

// BenchmarkExportCLI1000 runs `celos export` and `cue export` on the same
// generated project of 1,000 workflows as processes, alternately, and
// reports for each its wall time (ns/op), CPU time (cpu-ms/op) and peak
// resident memory (peak-MB). The cue CLI comes from $(go env GOPATH)/bin or
// the PATH (scripts/test-deps.sh installs it).
func BenchmarkExportCLI1000(b *testing.B) {
	cueBin, err := findCUE()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	writeBenchProject(b, filepath.Join(dir, "proj"), 1000)
	celosBin := filepath.Join(dir, "celos")
	build := exec.Command("go", "build", "-o", celosBin, "github.com/celos-go/celos/cmd/celos")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build celos: %v\n%s", err, out)
	}
	run := func(b *testing.B, name string, args ...string) {
		var wall, cpu time.Duration
		var peak int64
		for i := 0; i < b.N; i++ {
			cmd := exec.Command(name, args...)
			cmd.Dir = filepath.Join(dir, "proj")
			cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
			cmd.Stdout = io.Discard
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			// The child's own peak: VmHWM of its address space, polled
			// (the rusage of a child also counts its parent's memory at
			// the fork, and this benchmark process is large).
			done := make(chan int64)
			go func() {
				var hwm int64
				status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
				for {
					select {
					case <-done:
						done <- hwm
						return
					default:
					}
					if kb := vmHWM(status); kb > hwm {
						hwm = kb
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
			err := cmd.Wait()
			wall += time.Since(start)
			done <- 0
			if hwm := <-done; hwm > peak {
				peak = hwm
			}
			if err != nil {
				b.Fatalf("%s: %v\n%s", name, err, stderr.String())
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms/op")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(peak)/1024, "peak-MB")
	}
	b.Run("celos", func(b *testing.B) { run(b, celosBin, "export") })
	b.Run("cue", func(b *testing.B) { run(b, cueBin, "export", ".") })
}

// vmHWM reads the peak resident set size (kB) from a /proc/PID/status.
func vmHWM(status string) int64 {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb
		}
	}
	return 0
}

// findCUE locates the cue CLI: $(go env GOPATH)/bin/cue, else the PATH.
func findCUE() (string, error) {
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			c := filepath.Join(p, "bin", "cue")
			if _, err := os.Stat(c); err == nil {
				return c, nil
			}
		}
	}
	if c, err := exec.LookPath("cue"); err == nil {
		return c, nil
	}
	return "", fmt.Errorf("the cue CLI is not installed: run scripts/test-deps.sh, or go install cuelang.org/go/cmd/cue@v0.17.1")
}
