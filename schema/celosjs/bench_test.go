package celosjs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/schema"
)

// writeBenchFiles writes n JavaScript files of 10 workflows each, as a
// Celos shop writes them: a defaults file, a helper called for five data
// centres (factored into a comprehension), and five workflows of their
// own with nested triggers, one of them with a property function.
func writeBenchFiles(tb testing.TB, dir string, n int) (files []string, defaults string) {
	tb.Helper()
	defaults = filepath.Join(dir, "defaults")
	wfDir := filepath.Join(dir, "workflows")
	for _, d := range []string{defaults, wfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	common := `var CELOS_DEFAULT_HDFS = "hdfs://nameservice1";
var CELOS_DEFAULT_OOZIE = "http://oozie.example.com:11000/oozie";
var CELOS_DEFAULT_OOZIE_PROPERTIES = {"user.name": "celos", "jobTracker": "rm:8032", "nameNode": CELOS_DEFAULT_HDFS};
`
	if err := os.WriteFile(filepath.Join(defaults, "common.js"), []byte(common), 0o644); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		src := fmt.Sprintf(`celos.importDefaults("common");
var P = "p%[1]d";
function define(dc) {
    celos.defineWorkflow({
        "id": P + "-ingest-" + dc,
        "schedule": celos.hourlySchedule(),
        "schedulingStrategy": celos.serialSchedulingStrategy(2),
        "trigger": celos.hdfsCheckTrigger("/input/" + P + "/" + dc + "/${year}-${month}-${day}/${hour}00/_READY"),
        "externalService": celos.oozieExternalService({
            "oozie.wf.application.path": "/app/" + P + "/ingest.xml",
            "inputPath": "/input/" + P + "/" + dc + "/${year}-${month}-${day}/${hour}00",
            "outputPath": "/output/" + P + "/" + dc + "/${year}-${month}-${day}/${hour}00"
        }),
        "maxRetryCount": 2
    });
}
["nyc", "lax", "ams", "sin", "fra"].forEach(define);
for (var j = 0; j < 5; j++) {
    var up = celos.successTrigger(P + "-ingest-nyc");
    celos.defineWorkflow({
        "id": P + "-report-" + j,
        "schedule": celos.cronSchedule("0 " + j + " 3 * * ?"),
        "schedulingStrategy": celos.serialSchedulingStrategy(),
        "trigger": celos.andTrigger(up, celos.offsetTrigger(3600 * j, up), celos.notTrigger(celos.delayTrigger(600 * j))),
        "externalService": celos.oozieExternalService(j == 0 ? function (slot) {
            return {"oozie.wf.application.path": "/app/" + P + "/report.xml", "day": slot.getScheduledTime().toString("yyyy-MM-dd")};
        } : {"oozie.wf.application.path": "/app/" + P + "/report.xml", "n": "" + j}),
        "waitTimeoutSeconds": 86400
    });
}
`, i)
		path := filepath.Join(wfDir, fmt.Sprintf("project%03d.js", i))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			tb.Fatal(err)
		}
		files = append(files, path)
	}
	return files, defaults
}

// BenchmarkImport1000 converts 1,000 workflows in 100 files to CUE,
// writes the package, compiles it (as celos vet and export do) and
// compares it with the JavaScript (as import-js --check does):
//
//	go test ./schema/celosjs -run '^$' -bench Import1000 -benchtime 5x
//
// With CELOS_IMPORT_BENCH_DIR=DIR the JavaScript files are left in
// DIR/workflows and DIR/defaults, for timing the celos command on them.
func BenchmarkImport1000(b *testing.B) {
	dir := os.Getenv("CELOS_IMPORT_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	files, defaults := writeBenchFiles(b, dir, 100)
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	var eval, gen, compile, compare time.Duration
	for b.Loop() {
		t0 := time.Now()
		res := Evaluate(files, Options{DefaultsDir: defaults})
		t1 := time.Now()
		if len(res.Problems) > 0 || len(res.Workflows()) != 1000 {
			b.Fatalf("%d workflows, problems: %v", len(res.Workflows()), res.Problems)
		}
		out1, err := Generate(res, GenOptions{Package: "bench", Project: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		for name, data := range out1 {
			if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		p, _, err := schema.Compile(out)
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if d := Compare(res, p); len(d) > 0 {
			b.Fatalf("%d differences, the first: %s", len(d), d[0])
		}
		t4 := time.Now()
		eval, gen, compile, compare = eval+t1.Sub(t0), gen+t2.Sub(t1), compile+t3.Sub(t2), compare+t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(eval.Seconds()/n, "eval-s/op")
	b.ReportMetric(gen.Seconds()/n, "generate-s/op")
	b.ReportMetric(compile.Seconds()/n, "compile-s/op")
	b.ReportMetric(compare.Seconds()/n, "compare-s/op")
}

// BenchmarkGenerateOneLoop: Generate for n workflows defined by one loop
// whose members do not fit one comprehension (written one by one).
func BenchmarkGenerateOneLoop(b *testing.B) {
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			src := fmt.Sprintf(`for (var i = 0; i < %d; i++) {
  celos.defineWorkflow({id: "w-" + i, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
    trigger: celos.hdfsCheckTrigger("/in/" + i + "/" + (i %% 7) + "/${year}", "hdfs://nn"),
    externalService: celos.oozieExternalService({"oozie.wf.application.path": "/w/" + (i %% 7) + "/workflow.xml"}, "http://oozie")});
}`, n)
			path := filepath.Join(dir, "w.js")
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			res := Evaluate([]string{path}, Options{Timeout: time.Minute})
			if len(res.Problems) > 0 {
				b.Fatal(res.Problems)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := Generate(res, GenOptions{Package: "p", Project: "p"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEvaluateOneLoop: Evaluate of one file whose loop defines n
// workflows.
func BenchmarkEvaluateOneLoop(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "w.js")
			src := fmt.Sprintf(`for (var i = 0; i < %d; i++) {
  celos.defineWorkflow({id: "w-" + i, schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
    trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({}, "http://oozie")});
}`, n)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if res := Evaluate([]string{path}, Options{Timeout: 10 * time.Minute}); len(res.Problems) > 0 {
					b.Fatal(res.Problems)
				}
			}
		})
	}
}
