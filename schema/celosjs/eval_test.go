package celosjs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
)

// evalSrc evaluates one JavaScript source as the file w.js.
func evalSrc(t *testing.T, src string) *Result {
	t.Helper()
	t.Chdir(t.TempDir())
	if err := os.WriteFile("w.js", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return Evaluate([]string{"w.js"}, Options{Timeout: time.Second})
}

// TestBadCalls: every misuse of the API is an error at its line that says
// which function and which argument.
func TestBadCalls(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"id not a string", `celos.defineWorkflow({id: 3});`, `w.js:1:21: Workflow ID must be a string: the number 3`},
		{"id not a celos id", `celos.defineWorkflow({id: "a b"});`, `w.js:1:21: workflow id "a b" is not a celos id (letters, digits, '.', '_' and '-', at most 255 bytes)`},
		{"no trigger", "celos.defineWorkflow({id: \"w\", schedule: celos.hourlySchedule()});", `w.js:1:21: celos.defineWorkflow("w"): trigger is missing`},
		{"bad cron", `celos.cronSchedule("0 0 * *");`, `w.js:1:19: Error in cron expression "0 0 * *": expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 4`},
		{"trigger not a trigger", `celos.andTrigger(celos.alwaysTrigger(), "x");`, `w.js:1:17: celos.andTrigger: argument 2 must be a trigger (celos.*Trigger(...)), not the string "x"`},
		{"empty path", `celos.hdfsCheckTrigger("");`, `w.js:1:23: Undefined path in hdfsCheckTrigger`},
		{"bad success id", `celos.successTrigger("a/b");`, `w.js:1:21: celos.successTrigger: "a/b" is not a workflow id (letters, digits, '.', '_' and '-', at most 255 bytes)`},
		{"not without trigger", `celos.notTrigger();`, `w.js:1:17: Undefined sub trigger`},
		{"offset not a number", `celos.offsetTrigger("1h", celos.alwaysTrigger());`, `w.js:1:20: celos.offsetTrigger: the seconds must be a number, not the string "1h"`},
		{"fractional delay", `celos.delayTrigger(1.5);`, `w.js:1:19: celos.delayTrigger: the seconds must be a whole number, not 1.5`},
		{"zero concurrency", `celos.serialSchedulingStrategy(0);`, `w.js:1:31: celos.serialSchedulingStrategy: the concurrency must be at least 1, not 0`},
		{"properties a string", `celos.oozieExternalService("x");`, `w.js:1:27: celos.oozieExternalService: the properties must be an object or a function(slotID), not the string "x"`},
		{"numeric property", "celos.defineWorkflow({id: \"w\", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),\n trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({n: 3})});", `w.js:2:77: the properties of "w": property "n" must be a string, not the number 3 (Celos would fail at submit time)`},
		{"hdfsCheck at load time", `celos.hdfsCheck("/x");`, `w.js:1:16: celos.hdfsCheck cannot be converted: it reads HDFS while the file is evaluated, and a CUE workflow is static (use celos.hdfsCheckTrigger)`},
		{"registers", `celos.getRegister("b", "k");`, `w.js:1:18: celos.getRegister cannot be converted: it reads Celos's registers while the file is evaluated, and a CUE workflow is static`},
		{"Rhino Packages", `var x = new Packages.java.util.ArrayList();`, `w.js:1:13: ReferenceError: Packages is not defined`},
		{"triggers nested too deep", "var t = celos.alwaysTrigger();\nfor (var i = 0; i < 100000; i++) { t = celos.notTrigger(t); }", `w.js:2:56: celos.notTrigger: triggers nest deeper than 16 levels (a celos limit)`},
		{"too many triggers", "var t = celos.alwaysTrigger();\nfor (var i = 0; i < 15; i++) { t = celos.andTrigger(t, t, t, t, t, t, t, t, t, t); }", `w.js:2:52: celos.andTrigger: a trigger of more than 10000 triggers (a celos limit; the same trigger used twice counts twice)`},
		{"endless recursion", "function f(n) { return f(n + 1) + 1; }\nf(0);", `w.js:1:25: RangeError: Maximum call stack size exceeded (calls nested deeper than 10000: an endless recursion?)`},
		{"twice in one file", "function d() { celos.defineWorkflow({id: \"w\", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(), trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({})}); }\nd();\nd();", `w.js:1:36: workflow "w" is defined twice in this file (first at w.js:1:36, called at w.js:2:2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := evalSrc(t, tt.src)
			got := strs(res.Problems)
			if d := cmp.Diff([]string{tt.want}, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if len(res.Workflows()) != 0 {
				t.Errorf("a failed file converted %d workflows", len(res.Workflows()))
			}
		})
	}
}

// TestPropertyFunctions: what maps onto slot-time tokens converts, what
// does not is a TODO, a function that throws is reported.
func TestPropertyFunctions(t *testing.T) {
	tests := []struct {
		name, fn string
		props    map[string]string
		todo     []string
		problem  string
	}{
		{"joda pattern", `function (s) { return {p: "/x/" + s.getScheduledTime().toString("yyyy-MM-dd/HH") + "00"}; }`, map[string]string{"p": "/x/${year}-${month}-${day}/${hour}00"}, nil, ""},
		{"two-digit year", `function (s) { return {p: s.getScheduledTime().toString("yyMMdd")}; }`, map[string]string{}, []string{"p"}, ""},
		{"tokens passed through", `function (s) { return {p: "/x/${year}"}; }`, map[string]string{"p": "/x/${year}"}, nil, ""},
		{"iso string", `function (s) { return {p: s.getScheduledTime().toString()}; }`, map[string]string{"p": "${year}-${month}-${day}T${hour}:${minute}:${second}.000Z"}, nil, ""},
		{"workflow id", `function (s) { return {p: "" + s.getWorkflowId(), q: s.toString().split("@")[0]}; }`, map[string]string{"p": "w", "q": "w"}, nil, ""},
		{"previous hour", `function (s) { return {p: s.getScheduledTime().minusHours(1).toString("HH")}; }`, map[string]string{}, []string{"p"}, ""},
		{"key only sometimes", `function (s) { var o = {}; if (s.getScheduledTime().getHour() == 0) { o.midnight = "yes"; } return o; }`, map[string]string{}, []string{"midnight"}, ""},
		{"throws", `function (s) { throw new Error("boom"); }`, nil, nil, `w.js:2:67: the property function of workflow "w" fails for slot time 2037-11-23T19:47:58Z: boom`},
		{"endless", `function (s) { for (;;) {} }`, nil, nil, `w.js:`},
		{"number value", `function (s) { return {n: 3}; }`, nil, nil, `w.js:2:45: the property function of workflow "w" fails for slot time 2037-11-23T19:47:58Z: the property function of "w": property "n" must be a string, not the number 3 (Celos would fail at submit time)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := evalSrc(t, "celos.defineWorkflow({id: \"w\", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(), trigger: celos.alwaysTrigger(),\n externalService: celos.oozieExternalService("+tt.fn+")});")
			if tt.problem != "" {
				if len(res.Problems) != 1 || len(strs(res.Problems)[0]) < len(tt.problem) || strs(res.Problems)[0][:len(tt.problem)] != tt.problem {
					t.Fatalf("problems %q, want one starting %q", strs(res.Problems), tt.problem)
				}
				return
			}
			if len(res.Problems) > 0 {
				t.Fatalf("problems: %v", res.Problems)
			}
			w := res.Workflows()[0]
			if d := cmp.Diff(tt.props, w.ExternalService.Properties); d != "" {
				t.Errorf("converted properties (-want +got):\n%s", d)
			}
			var todo []string
			for k := range w.Props.TODO {
				todo = append(todo, k)
			}
			if d := cmp.Diff(tt.todo, todo); d != "" {
				t.Errorf("TODO properties (-want +got):\n%s", d)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	tm := time.Date(2015, 9, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct{ in, want string }{
		{"/in/${year}-${month}-${day}/${hour}${minute}${second}", "/in/2015-09-02/030405"},
		{"no tokens", "no tokens"},
		{"${millisecond} ${unknown}", "000 ${unknown}"},
	}
	for _, tt := range tests {
		if got := Substitute(tt.in, tm); got != tt.want {
			t.Errorf("Substitute(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIDParams(t *testing.T) {
	tests := []struct {
		ids  []string
		want []string
	}{
		{[]string{"wordcount-nyc", "wordcount-lax"}, []string{"nyc", "lax"}},
		{[]string{"ingest-clicks-hourly", "ingest-views-hourly"}, []string{"clicks", "views"}},
		{[]string{"job-new", "job-nyc"}, []string{"new", "nyc"}}, // not "ew", "yc"
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"x-1", "x-1-y"}, []string{"1", "1-y"}},
		{[]string{"pre-x", "pre-"}, nil}, // one id is all prefix
	}
	for _, tt := range tests {
		_, _, got, _ := idSplit(tt.ids)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("idSplit(%q) params (-want +got):\n%s", tt.ids, d)
		}
	}
}

// TestDefaultsGlobals: CELOS_DEFAULT_* are read as Celos read them: the
// file system and Oozie URL when the builder is called, the default
// properties at the end (Celos merged them at submit time).
func TestDefaultsGlobals(t *testing.T) {
	res := evalSrc(t, `
var CELOS_DEFAULT_HDFS = "hdfs://a";
var CELOS_DEFAULT_OOZIE = "http://o1";
var CELOS_DEFAULT_OOZIE_PROPERTIES = {"user.name": "u1"};
var t = celos.hdfsCheckTrigger("/p");
var s = celos.oozieExternalService({k: "v"});
CELOS_DEFAULT_HDFS = "hdfs://b";
CELOS_DEFAULT_OOZIE = "http://o2";
CELOS_DEFAULT_OOZIE_PROPERTIES["user.name"] = "u2";
celos.defineWorkflow({id: "w", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(), trigger: t, externalService: s});
`)
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	w := res.Workflows()[0]
	want := workflow.ExternalService{Type: "oozie", URL: "http://o1", Properties: map[string]string{"k": "v", "user.name": "u2"}}
	if d := cmp.Diff(want, w.ExternalService); d != "" {
		t.Errorf("service (-want +got):\n%s", d)
	}
	if w.Trigger.FS != "hdfs://a" {
		t.Errorf("fs = %q, want hdfs://a", w.Trigger.FS)
	}
}

// TestDefaultsErrors: an error in a defaults file is reported with the
// defaults file's position and the importing file fails.
func TestDefaultsErrors(t *testing.T) {
	tests := []struct {
		name, defaults, want string
	}{
		{"syntax error", "var x = ;", `w.js:1:21: d/x.js:1:9: syntax error: Unexpected token ;`},
		{"throws", "var a = 1;\nthrow new Error(\"bad default\");", `d/x.js:2:7: bad default`},
		{"missing", "", `w.js:1:21: celos.importDefaults("nope"): d/nope.js: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			name := "x"
			if tt.defaults == "" {
				name = "nope"
			}
			if err := os.Mkdir("d", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("d/x.js", []byte(tt.defaults), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("w.js", []byte(`celos.importDefaults("`+name+`");`), 0o644); err != nil {
				t.Fatal(err)
			}
			res := Evaluate([]string{"w.js"}, Options{DefaultsDir: "d", Timeout: time.Second})
			if d := cmp.Diff([]string{tt.want}, strs(res.Problems)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestGroups: workflows from one call site are factored into a
// comprehension when they differ in the id part and at most three other
// literals, one per line; else written one by one. Every case is checked
// by compiling it and comparing it with the JavaScript.
func TestGroups(t *testing.T) {
	const def = `function d(x, conc, cron, delay, off) {
  celos.defineWorkflow({id: "job-" + x, schedule: celos.cronSchedule(cron), schedulingStrategy: celos.serialSchedulingStrategy(conc),
    trigger: celos.andTrigger(celos.delayTrigger(delay), celos.offsetTrigger(off, celos.successTrigger("up-" + x))),
    externalService: celos.oozieExternalService({"oozie.wf.application.path": "/" + x + "/workflow.xml"})});
}
`
	tests := []struct {
		name, calls string
		want        string // the comprehension's first line, "" for none
	}{
		{"id only", `d("nyc", 1, "0 0 * * * ?", 60, 0); d("lax", 1, "0 0 * * * ?", 60, 0);`, `for name in ["nyc", "lax"] {`},
		{"one-letter parts", `d("a", 1, "0 0 * * * ?", 60, 0); d("b", 1, "0 0 * * * ?", 60, 0);`, `for name in ["a", "b"] {`},
		{"three values", `d("nyc", 1, "0 0 1 * * ?", 60, 0); d("lax", 2, "0 0 2 * * ?", 120, 0);`, `for wf in [`},
		{"two seconds", `d("nyc", 1, "0 0 * * * ?", 60, 60); d("lax", 1, "0 0 * * * ?", 120, 120);`, `for wf in [`},
		{"four values", `d("nyc", 1, "0 0 1 * * ?", 60, 1); d("lax", 2, "0 0 2 * * ?", 120, 2);`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := evalSrc(t, def+tt.calls)
			if len(res.Problems) > 0 {
				t.Fatal(res.Problems)
			}
			files, err := Generate(res, GenOptions{Package: "p"})
			if err != nil {
				t.Fatal(err)
			}
			src := string(files["w.cue"])
			got := ""
			for _, line := range strings.Split(src, "\n") {
				if strings.HasPrefix(line, "for ") {
					got = line
				}
			}
			if got != tt.want {
				t.Errorf("comprehension %q, want %q in:\n%s", got, tt.want, src)
			}
			if err := os.Mkdir("out", 0o755); err != nil {
				t.Fatal(err)
			}
			for n, data := range files {
				if err := os.WriteFile(filepath.Join("out", n), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p, _, err := schema.Compile("out")
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if d := Compare(res, p); len(d) > 0 {
				t.Errorf("--check: %v\n%s", d, src)
			}
		})
	}
}

// TestFileNames: a workflow file named like a generated file (project.js,
// defaults.js) or twice the same base name gets a file of its own.
func TestFileNames(t *testing.T) {
	t.Chdir(t.TempDir())
	def := `var CELOS_DEFAULT_HDFS = "hdfs://nn"; celos.defineWorkflow({id: "%s", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(), trigger: celos.hdfsCheckTrigger("/x"), externalService: celos.oozieExternalService({})});`
	var paths []string
	for i, p := range []string{"project.js", "defaults.js", "a/w.js", "b/w.js"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf(def, fmt.Sprint("w", i))), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	files, err := Generate(Evaluate(paths, Options{}), GenOptions{Package: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if d := cmp.Diff([]string{"defaults.cue", "defaults_2.cue", "project.cue", "project_2.cue", "w.cue", "w_2.cue"}, names); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
}

// TestCompare: --check finds a workflow missing from the CUE, one only in
// the CUE, a changed field, and a property function whose CUE properties
// differ at a sample slot time.
func TestCompare(t *testing.T) {
	res := evalSrc(t, `
var s = celos.hourlySchedule(), st = celos.serialSchedulingStrategy();
celos.defineWorkflow({id: "a", schedule: s, schedulingStrategy: st, trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({p: "/a"})});
celos.defineWorkflow({id: "b", schedule: s, schedulingStrategy: st, trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService(function (x) {
  return {day: x.getScheduledTime().toString("yyyy-MM-dd")};
})});`)
	if len(res.Problems) > 0 {
		t.Fatal(res.Problems)
	}
	wf := func(id string, props map[string]string) workflow.Workflow {
		return workflow.Workflow{ID: id, Schedule: workflow.Schedule{Type: "cron", Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger: workflow.Trigger{Type: "always"}, SchedulingStrategy: workflow.Strategy{Type: "serial", Concurrency: 1},
			ExternalService: workflow.ExternalService{Type: "oozie", Properties: props}, StartTime: workflow.DefaultStartTime,
			WaitTimeoutSeconds: workflow.NeverTimeout}
	}
	a := wf("a", map[string]string{"p": "/a"})
	b := wf("b", map[string]string{"day": "${year}-${month}-${day}"})
	tests := []struct {
		name string
		cue  []workflow.Workflow
		want []string // ids that differ
	}{
		{"equal", []workflow.Workflow{a, b}, nil},
		{"missing", []workflow.Workflow{a}, []string{"b"}},
		{"extra", []workflow.Workflow{a, b, wf("c", nil)}, []string{"c"}},
		{"changed field", []workflow.Workflow{wf("a", map[string]string{"p": "/A"}), b}, []string{"a"}},
		{"changed retry", []workflow.Workflow{func() workflow.Workflow { w := a; w.MaxRetryCount = 1; return w }(), b}, []string{"a"}},
		{"property function", []workflow.Workflow{a, wf("b", map[string]string{"day": "${year}-${day}-${month}"})}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, d := range Compare(res, &workflow.Project{Workflows: tt.cue}) {
				got = append(got, d.ID)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("differing ids (-want +got):\n%s", d)
			}
		})
	}
}

// TestMemoryLimit: a loop that fills memory is stopped by the memory
// limit, at its line, long before the time limit.
func TestMemoryLimit(t *testing.T) {
	t.Chdir(t.TempDir())
	src := "var a = [];\nfor (;;) { a.push(\"item \" + a.length); }\n"
	if err := os.WriteFile("w.js", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := Evaluate([]string{"w.js"}, Options{Timeout: 60 * time.Second, MemoryLimit: 128 << 20})
	want := []string{"w.js:2:N: evaluation used more than 128 MiB of memory (an endless loop?)"}
	got := strs(res.Problems)
	for i := range got {
		got[i] = regexp.MustCompile(`^w\.js:2:\d+:`).ReplaceAllString(got[i], "w.js:2:N:")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("stopped after %s", el)
	}
}

// TestHostileObjects: JavaScript that runs when the Go side reads what a
// file left (a getter or Proxy in the properties or the defaults
// globals, the object a property function returns) is bounded by the
// time limit and its errors are reported at their line; before, an
// endless getter hung import-js and a throwing one crashed it.
func TestHostileObjects(t *testing.T) {
	def := func(props string) string {
		return "celos.defineWorkflow({id: \"w\", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),\n" +
			" trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService(" + props + ")});\n"
	}
	getter := func(body string) string {
		return "var p = {}; Object.defineProperty(p, \"x\", {enumerable: true, get: function() { " + body + " }});\n"
	}
	tests := []struct {
		name, src, want string
	}{
		{"endless getter", getter("for (;;) {}") + def("p"), `w.js:1:N: evaluation did not finish within 1s (an endless loop?)`},
		{"throwing getter", getter(`throw new Error("boom");`) + def("p"), `w.js:1:N: boom`},
		{"throwing Proxy", `var p = new Proxy({}, {ownKeys: function() { throw "no keys"; }});` + "\n" + def("p"), `w.js:1:N: thrown: no keys`},
		{"endless global getter", `Object.defineProperty(this, "CELOS_DEFAULT_HDFS", {get: function() { for (;;) {} }});`, `w.js:1:N: evaluation did not finish within 1s (an endless loop?)`},
		{"throwing defaults Proxy", `var CELOS_DEFAULT_OOZIE_PROPERTIES = new Proxy({}, {ownKeys: function() { throw "no keys"; }});`, `w.js:1:N: thrown: no keys`},
		{"property function's getter", getter("for (;;) {}") + def("function(s) { return p; }"), `w.js:1:N: the property function of workflow "w" fails for slot time 2026-01-01T00:00:00Z: evaluation did not finish within 1s (an endless loop?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan *Result, 1)
			go func() { done <- evalSrc(t, tt.src) }()
			var res *Result
			select {
			case res = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("Evaluate did not return within 60s (the time limit is 1s)")
			}
			got := strs(res.Problems)
			for i := range got {
				got[i] = regexp.MustCompile(`^w\.js:1:\d+:`).ReplaceAllString(got[i], "w.js:1:N:")
				got[i] = regexp.MustCompile(`slot time [0-9T:-]+Z`).ReplaceAllString(got[i], "slot time 2026-01-01T00:00:00Z")
			}
			if d := cmp.Diff([]string{tt.want}, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestDefaultsImportLimits: celos.importDefaults reads files of the
// defaults directory only (before, "../../x" read any .js file), and an
// import cycle is an error saying so at once (before, it recursed until
// the time limit and was reported as an endless loop). Importing one
// file twice, not in a cycle, is fine.
func TestDefaultsImportLimits(t *testing.T) {
	tests := []struct {
		name, src string
		defaults  map[string]string
		want      []string
	}{
		{"parent", `celos.importDefaults("../secret");`, nil,
			[]string{`w.js:1:21: celos.importDefaults("../secret"): not a file of the defaults directory (a name such as "common", without ".." or a leading /)`}},
		{"absolute", `celos.importDefaults("/tmp/x");`, nil,
			[]string{`w.js:1:21: celos.importDefaults("/tmp/x"): not a file of the defaults directory (a name such as "common", without ".." or a leading /)`}},
		{"self", `celos.importDefaults("a");`, map[string]string{"a": `celos.importDefaults("a");`},
			[]string{`d/a.js:1:21: celos.importDefaults("a"): an import cycle: d/a.js imports d/a.js`}},
		{"cycle", `celos.importDefaults("a");`, map[string]string{"a": `celos.importDefaults("b");`, "b": `var B = 1; celos.importDefaults("a");`},
			[]string{`d/b.js:1:32: celos.importDefaults("a"): an import cycle: d/a.js imports d/b.js imports d/a.js`}},
		{"twice", `celos.importDefaults("a"); celos.importDefaults("sub/b"); celos.importDefaults("a");`, map[string]string{"a": `var A = 1;`, "sub/b": `celos.importDefaults("a");`}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := os.MkdirAll("d/sub", 0o755); err != nil {
				t.Fatal(err)
			}
			for n, src := range tt.defaults {
				if err := os.WriteFile("d/"+n+".js", []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile("secret.js", []byte(`var SECRET = "x";`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("w.js", []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			res := Evaluate([]string{"w.js"}, Options{DefaultsDir: "d", Timeout: 30 * time.Second})
			if d := cmp.Diff(tt.want, strs(res.Problems)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
