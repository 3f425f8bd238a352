package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/testenv"
)

const module = "github.com/celos-go/celos"

// A rule says which packages of the module must not depend, directly or
// through others, on which packages. Only non-test imports count: a test
// may import what its package may not.
type rule struct {
	name      string
	applies   func(rel string) bool // the module's packages the rule constrains, by path relative to the module
	forbidden func(dep string) bool // a dependency they must not have (full import path)
}

var rules = []rule{
	{
		name:      "scheduler/, deploy/ and targets/ do not depend on CUE",
		applies:   anyUnder("scheduler", "deploy", "targets"),
		forbidden: func(dep string) bool { return strings.HasPrefix(dep, "cuelang.org/") },
	},
	{
		name:    "scheduler/, deploy/ and targets/ use schema/ only through the CUE-free contract (schema/workflow, schema/cron)",
		applies: anyUnder("scheduler", "deploy", "targets"),
		forbidden: ours(func(rel string) bool {
			return under(rel, "schema") && !under(rel, "schema/workflow") && !under(rel, "schema/cron")
		}),
	},
	{
		name:      "schema/workflow (the compiled contract) depends on nothing of ours but schema/cron",
		applies:   anyUnder("schema/workflow"),
		forbidden: ours(func(rel string) bool { return !under(rel, "schema/workflow") && !under(rel, "schema/cron") }),
	},
	{
		name:      "scheduler/engine does not depend on its transports (api, ui, metrics, loop) or the server",
		applies:   anyUnder("scheduler/engine"),
		forbidden: ours(anyUnder("scheduler/api", "scheduler/ui", "scheduler/metrics", "scheduler/loop", "scheduler/server")),
	},
	{
		name:      "scheduler/engine does not depend on a store implementation (statedb, statepg): a store plugs in behind engine.Store",
		applies:   anyUnder("scheduler/engine"),
		forbidden: ours(anyUnder("scheduler/statedb", "scheduler/statepg")),
	},
	{
		name:      "scheduler/store (the records every store shares) depends on nothing of ours but slot",
		applies:   anyUnder("scheduler/store"),
		forbidden: ours(func(rel string) bool { return !under(rel, "scheduler/store") && !under(rel, "scheduler/slot") }),
	},
	{
		name:      "the transports (api, ui, metrics, loop) do not depend on the engine or the server",
		applies:   anyUnder("scheduler/api", "scheduler/ui", "scheduler/metrics", "scheduler/loop"),
		forbidden: ours(anyUnder("scheduler/engine", "scheduler/server")),
	},
	{
		name:      "scheduler/ui does not depend on scheduler/engine",
		applies:   anyUnder("scheduler/ui"),
		forbidden: ours(anyUnder("scheduler/engine")),
	},
	{
		name:      "nothing outside cmd/ depends on cmd/",
		applies:   func(rel string) bool { return !under(rel, "cmd") },
		forbidden: ours(anyUnder("cmd")),
	},
	{
		name: "internal/ (but the test helpers of internal/testenv) does not depend on scheduler/",
		applies: func(rel string) bool {
			return under(rel, "internal") && !under(rel, "internal/testenv")
		},
		forbidden: ours(anyUnder("scheduler")),
	},
}

// TestImportRules fails for every package of the module that breaks a
// rule, naming the import in that package which brings the forbidden
// dependency in and the chain of imports to it.
func TestImportRules(t *testing.T) {
	g := loadGraph(t)
	for _, r := range rules {
		constrained := 0
		bad := map[string][]string{} // package → chain to a forbidden dependency
		for _, p := range g.packages {
			rel, ok := relative(p)
			if !ok || !r.applies(rel) {
				continue
			}
			constrained++
			if c := g.chain(p, r.forbidden); c != nil {
				bad[p] = c
			}
		}
		if constrained == 0 {
			t.Errorf("rule %q constrains no package: the layout changed, update the rule", r.name)
		}
		for _, p := range g.packages {
			c, ok := bad[p]
			if !ok {
				continue
			}
			if _, viaBad := bad[c[1]]; viaBad && len(c) > 2 {
				continue // reported at c[1], whose own import is the cause
			}
			if len(c) == 2 {
				t.Errorf("%s imports %s, breaking the rule: %s", short(p), short(c[1]), r.name)
				continue
			}
			t.Errorf("%s imports %s, so it depends on %s (%s), breaking the rule: %s",
				short(p), short(c[1]), short(c[len(c)-1]), chainString(c), r.name)
		}
	}
}

// graph is the non-test import graph of the module's packages and all
// they depend on.
type graph struct {
	packages []string            // the module's packages, in go list order
	imports  map[string][]string // every package → its non-test imports
}

func loadGraph(t *testing.T) *graph {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the module's import graph: %v\n%s", err, stderr.Bytes())
	}
	g := &graph{imports: map[string][]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("read go list's output: %v", err)
		}
		g.imports[p.ImportPath] = p.Imports
		if _, ok := relative(p.ImportPath); ok {
			g.packages = append(g.packages, p.ImportPath)
		}
	}
	if len(g.packages) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return g
}

// chain returns the shortest chain of imports from p to a package
// forbidden accepts (p excluded), or nil when there is none.
func (g *graph) chain(p string, forbidden func(string) bool) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range g.imports[cur] {
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = cur
			if forbidden(next) {
				var c []string
				for n := next; n != ""; n = prev[n] {
					c = append([]string{n}, c...)
				}
				return c
			}
			queue = append(queue, next)
		}
	}
	return nil
}

// relative returns p's path inside the module, and whether p is the
// module's at all.
func relative(p string) (string, bool) {
	if p == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, module+"/")
	return rel, ok
}

// under says whether rel is dir or inside it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

func anyUnder(dirs ...string) func(rel string) bool {
	return func(rel string) bool {
		for _, d := range dirs {
			if under(rel, d) {
				return true
			}
		}
		return false
	}
}

// ours turns a test on relative paths into one on import paths that
// accepts the module's packages only.
func ours(f func(rel string) bool) func(dep string) bool {
	return func(dep string) bool {
		rel, ok := relative(dep)
		return ok && f(rel)
	}
}

// short is p relative to the module, or p itself when it is not ours.
func short(p string) string {
	if rel, ok := relative(p); ok {
		return rel
	}
	return p
}

func chainString(c []string) string {
	s := make([]string, len(c))
	for i, p := range c {
		s[i] = short(p)
	}
	return strings.Join(s, " → ")
}
