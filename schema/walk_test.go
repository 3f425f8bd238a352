package schema

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema/workflow"
)

// walkMismatches collects, across every test of the package, the
// workflows the walker converted differently from the conversion through
// JSON (see TestMain).
var walkMismatches struct {
	sync.Mutex
	list []string
	n    int // workflows checked
}

// TestMain makes every compile of the package's tests (the goldens of
// testdata/projects, the fuzz seeds, the hostile inputs) check each
// workflow the walker converted against the conversion through JSON, and
// fails the run if one differs. Benchmarks (-bench) run without the check,
// which would add the conversion through JSON to what they measure.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		walkCheck = recordWalk
	}
	code := m.Run()
	walkMismatches.Lock()
	defer walkMismatches.Unlock()
	if len(walkMismatches.list) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the walker and the conversion through JSON disagree on %d of %d workflows:\n%s\n",
			len(walkMismatches.list), walkMismatches.n, strings.Join(walkMismatches.list, "\n"))
		code = 1
	}
	os.Exit(code)
}

// recordWalk is walkCheck for the tests.
func recordWalk(id string, walked, decoded workflow.Workflow, decodedOK bool) {
	walkMismatches.Lock()
	defer walkMismatches.Unlock()
	walkMismatches.n++
	if !decodedOK {
		walkMismatches.list = append(walkMismatches.list, fmt.Sprintf("workflow %q: the walker converted it, the conversion through JSON reported an error", id))
		return
	}
	if d := cmp.Diff(decoded, walked); d != "" {
		walkMismatches.list = append(walkMismatches.list, fmt.Sprintf("workflow %q (-json +walker):\n%s", id, d))
	}
}

// TestWalkerKnowsEveryField fails when a field is added to the Go types of
// a workflow that the walker (walk.go) does not fill in.
func TestWalkerKnowsEveryField(t *testing.T) {
	union := func(m map[string][]string) []string {
		var all []string
		for _, names := range m {
			all = append(all, names...)
		}
		return all
	}
	for _, c := range []struct {
		v     any
		known []string
	}{
		{workflow.Workflow{}, workflowFields},
		{workflow.Contact{}, contactFields},
		{workflow.Strategy{}, strategyFields},
		{workflow.Schedule{}, union(scheduleFields)},
		{workflow.Trigger{}, union(triggerFields)},
		{workflow.ExternalService{}, union(serviceFields)},
	} {
		typ := reflect.TypeOf(c.v)
		var tags []string
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			tags = append(tags, name)
		}
		if d := cmp.Diff(sortedSet(tags), sortedSet(c.known)); d != "" {
			t.Errorf("workflow.%s: the walker's fields differ from the type's json fields (-type +walker):\n%s", typ.Name(), d)
		}
	}
}

// TestWalkerFieldsMatchSchema fails when a shape of the schema (a
// definition, or one type of trigger, schedule or external service) has
// other fields, optional ones included, than the walker looks up for it.
func TestWalkerFieldsMatchSchema(t *testing.T) {
	dir := t.TempDir()
	writeBenchProject(t, dir, 1)
	insts := load.Instances([]string{SchemaImportPath}, &load.Config{Dir: dir, Env: []string{"CUE_REGISTRY=none"}})
	if len(insts) != 1 || insts[0].Err != nil {
		t.Fatalf("load the schema: %v", insts[0].Err)
	}
	ctx := cuecontext.New()
	schema := ctx.BuildInstance(insts[0])
	if err := schema.Err(); err != nil {
		t.Fatal(err)
	}
	fieldsOf := func(def string, typ string) []string {
		v := schema.LookupPath(cue.ParsePath(def))
		if typ != "" {
			v = v.Unify(ctx.CompileString(fmt.Sprintf("{type: %q}", typ)))
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			t.Fatalf("%s (type %q): %v", def, typ, err)
		}
		var names []string
		for it.Next() {
			names = append(names, it.Selector().Unquoted())
		}
		return names
	}
	check := func(def, typ string, want []string) {
		if d := cmp.Diff(sortedSet(fieldsOf(def, typ)), sortedSet(want)); d != "" {
			t.Errorf("%s, type %q: the walker's fields differ from the schema's (-schema +walker):\n%s", def, typ, d)
		}
	}
	check("#Workflow", "", workflowFields)
	check("#Contact", "", contactFields)
	check("#SchedulingStrategy", "", strategyFields)
	for _, c := range []struct {
		def    string
		byType map[string][]string
		types  string // the schema's pattern of types
	}{
		{"#Schedule", scheduleFields, "^(cron|dependent)$"},
		{`#TriggerAt."2"`, triggerFields, "^(hdfsCheck|success|and|or|not|offset|delay|always|dataVolume|failure|sinceLast|event)$"},
		{"#ExternalService", serviceFields, "^(oozie|command)$"},
	} {
		var types []string
		for typ, names := range c.byType {
			types = append(types, typ)
			check(c.def, typ, names)
		}
		want := strings.Split(strings.TrimSuffix(strings.TrimPrefix(c.types, "^("), ")$"), "|")
		if d := cmp.Diff(sortedSet(want), sortedSet(types)); d != "" {
			t.Errorf("%s: the walker's types differ from the test's (-test +walker):\n%s", c.def, d)
		}
		if !strings.Contains(schemaText(), c.types) {
			t.Errorf("%s: the schema's types are no longer %s: update the walker and this test", c.def, c.types)
		}
	}
}

// schemaText is the embedded schema, all files.
func schemaText() string {
	var b strings.Builder
	for _, f := range SchemaFiles() {
		b.Write(f.Data)
	}
	return b.String()
}

// sortedSet is names sorted, each once.
func sortedSet(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return slices.Compact(out)
}

// TestWalkerMatchesJSON compiles the valid projects of testdata/projects
// (and the benchmark project) and checks that the walker converted their
// workflows, each the same as the conversion through JSON (recordWalk).
func TestWalkerMatchesJSON(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "testdata", "projects", "valid", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no valid projects: %v", err)
	}
	bench := t.TempDir()
	writeBenchProject(t, bench, 20)
	dirs = append(dirs, bench)
	walkMismatches.Lock()
	before, bad := walkMismatches.n, len(walkMismatches.list)
	walkMismatches.Unlock()
	workflows := 0
	for _, dir := range dirs {
		p, _, err := Compile(dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		workflows += len(p.Workflows)
	}
	walkMismatches.Lock()
	defer walkMismatches.Unlock()
	if got := walkMismatches.n - before; got != workflows {
		t.Errorf("the walker converted %d of %d workflows; want all", got, workflows)
	}
	if len(walkMismatches.list) > bad {
		t.Errorf("the walker and the conversion through JSON disagree:\n%s", strings.Join(walkMismatches.list[bad:], "\n"))
	}
}
