// Package testcase is the compiled form of a project's test cases (the
// `tests` part of a celos project, run by `celos test`): what the CUE side
// (package schema) produces and the sandbox runner (scheduler/sandbox)
// consumes, with the checks that must hold before anything runs. Like
// schema/workflow it depends on no CUE package.
package testcase

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/cron"
	"github.com/celos-go/celos/schema/workflow"
)

// ErrInvalid is wrapped by every error of Validate.
var ErrInvalid = errors.New("invalid test case")

// NamePattern is what a test case name may look like (it names the case's
// sandbox directory and its JUnit test case).
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)

// DefaultTimeout bounds a case that names no timeout.
const DefaultTimeout = 10 * time.Minute

// DefaultPathProperties are the Oozie properties that are HDFS paths in
// every project: they are rewritten under a case's prefix without being
// listed in pathProperties.
var DefaultPathProperties = []string{
	"oozie.wf.application.path",
	"oozie.coord.application.path",
	"oozie.bundle.application.path",
	"oozie.libpath",
}

// Comparer types.
const (
	ComparePlain  = "plain"
	CompareNDJSON = "ndjson"
	CompareTSV    = "tsv"
)

// Suite is every test case of a project, sorted by name.
type Suite struct {
	Cases []Case `json:"cases"`
}

// Case is one test case: inputs written under a fresh prefix, the
// workflows stepped through [Start, End], outputs compared.
type Case struct {
	Name string `json:"name"`
	// Start and End are the first and last slot times the case covers
	// (both included, as in Celos CI); Start is before End.
	Start time.Time `json:"sampleTimeStart"`
	End   time.Time `json:"sampleTimeEnd"`
	// Workflows are the ids of the workflows under test; empty means
	// every workflow of the project.
	Workflows []string `json:"workflows,omitempty"`
	Inputs    []Input  `json:"inputs"`
	Outputs   []Output `json:"outputs"`
	// Timeout bounds the case's run (stepping and comparing).
	Timeout time.Duration `json:"timeout"`
	// PathProperties are the Oozie properties, besides
	// DefaultPathProperties, whose values are HDFS paths to rewrite under
	// the case's prefix.
	PathProperties []string `json:"pathProperties,omitempty"`
	// Services are stand-ins by workflow id: a workflow whose own
	// external service the run does not have (Oozie on the local disk)
	// runs on its stand-in instead.
	Services map[string]workflow.ExternalService `json:"services,omitempty"`
	// Where locates the case in the project's files ("file:line:col"),
	// for messages.
	Where string `json:"-"`
}

// Input is a fixture written to Path (under the case's prefix) before the
// case starts: a local directory or file (Fixture, an absolute path), or
// inline Files (relative name → content).
type Input struct {
	Path    string            `json:"path"`
	Fixture string            `json:"fixture,omitempty"`
	Files   map[string]string `json:"files,omitempty"`
}

// Output is what the case compares once stepped: the tree at Path (under
// the prefix) with the expected tree, a local directory (Expected, an
// absolute path) or inline Files.
type Output struct {
	Path     string            `json:"path"`
	Expected string            `json:"expected,omitempty"`
	Files    map[string]string `json:"files,omitempty"`
	Comparer Comparer          `json:"comparer"`
}

// Comparer says how an output is compared.
type Comparer struct {
	// Type is plain, ndjson or tsv.
	Type string `json:"type"`
	// Ignore (ndjson) lists fields left out of the comparison, as
	// dot-separated paths ("meta.generatedAt").
	Ignore []string `json:"ignore,omitempty"`
	// OrderedRows and OrderedColumns (tsv) make row and column order
	// significant.
	OrderedRows    bool `json:"orderedRows,omitempty"`
	OrderedColumns bool `json:"orderedColumns,omitempty"`
}

// CheckPath checks an HDFS path of a test case: absolute, clean (no "."
// or ".." elements, no doubled or trailing slash), not the root, no URI.
// Such a path stays under the case's prefix once rewritten.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case strings.Contains(p, "://") || strings.HasPrefix(p, "hdfs:") || strings.HasPrefix(p, "file:"):
		return fmt.Errorf("%q is a URI: write the path alone (it is put under the test's prefix on the file system the test runs on)", p)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is not absolute", p)
	case p == "/":
		return errors.New(`"/" is the whole sandbox: name a directory under it`)
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == ".." {
			return fmt.Errorf("%q leaves the test's prefix (a .. element)", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%q is not clean (write %q)", p, path.Clean(p))
	}
	return nil
}

// CheckFileName checks the name of an inline file: relative, clean, inside
// its directory.
func CheckFileName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("file name %q must be a clean relative path inside the directory", name)
	}
	return nil
}

// overlaps reports whether one of two clean absolute paths is the other or
// under it.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Validate checks a suite against the project: names, ranges, paths,
// overlapping inputs and outputs, workflows that exist, comparers. It
// returns every problem, joined, each naming its case.
func (s *Suite) Validate(p *workflow.Project) error {
	ids := map[string]bool{}
	for _, w := range p.Workflows {
		ids[w.ID] = true
	}
	var errs []error
	seen := map[string]bool{}
	for i := range s.Cases {
		c := &s.Cases[i]
		if seen[strings.ToLower(c.Name)] {
			errs = append(errs, fmt.Errorf("%w %q: another case has the same name (names are compared ignoring case: they name sandbox directories)", ErrInvalid, c.Name))
		}
		seen[strings.ToLower(c.Name)] = true
		if err := c.Validate(ids); err != nil {
			errs = append(errs, err)
		}
		for _, msg := range c.SlotProblems(p) {
			errs = append(errs, fmt.Errorf("%w %q: %s", ErrInvalid, c.Name, msg))
		}
	}
	return errors.Join(errs...)
}

// MaxCaseSlots bounds the slot times one workflow of a case covers: a
// case steps its workflows through every one of them (some tens of
// milliseconds each with a local command), so a range of years of a
// minutely workflow would run for days and hold millions of slots.
const MaxCaseSlots = 10000

// SlotProblems names, sorted, the workflows of the case (all of the
// project's when it names none) that have more than MaxCaseSlots slot
// times in [Start, End]. A dependent workflow has its upstream's slots.
// Schedules that do not parse are left to the project's own checks.
func (c *Case) SlotProblems(p *workflow.Project) []string {
	var out []string
	for _, id := range c.tooManySlots(p) {
		out = append(out, fmt.Sprintf("workflow %s has more than %d slots from sampleTimeStart to sampleTimeEnd; a case covers at most %d per workflow (a shorter range)",
			id, MaxCaseSlots, MaxCaseSlots))
	}
	return out
}

func (c *Case) tooManySlots(p *workflow.Project) []string {
	if c.Start.IsZero() || !c.End.After(c.Start) {
		return nil
	}
	byID := map[string]*workflow.Workflow{}
	for i := range p.Workflows {
		byID[p.Workflows[i].ID] = &p.Workflows[i]
	}
	ids := c.Workflows
	if len(ids) == 0 {
		ids = slices.Sorted(maps.Keys(byID))
	}
	var out []string
	for _, id := range slices.Sorted(slices.Values(ids)) {
		w := byID[id]
		for hops := 0; w != nil && w.Schedule.Type == workflow.ScheduleDependent && hops <= len(p.Workflows); hops++ {
			w = byID[w.Schedule.Workflow]
		}
		if w == nil || w.Schedule.Type != workflow.ScheduleCron {
			continue
		}
		loc, err := time.LoadLocation(w.Schedule.TimeZone)
		if err != nil {
			continue
		}
		expr, err := cron.Parse(w.Schedule.Cron, loc)
		if err != nil {
			continue
		}
		if len(expr.AppendBetweenLimit(nil, c.Start, c.End.Add(time.Second), MaxCaseSlots+1)) > MaxCaseSlots {
			out = append(out, id)
		}
	}
	return out
}

// Validate checks one case; ids are the project's workflow ids. Each
// error wraps ErrInvalid and names the case.
func (c *Case) Validate(ids map[string]bool) error {
	var errs []error
	for _, p := range c.Problems(ids) {
		errs = append(errs, fmt.Errorf("%w %q: %s", ErrInvalid, c.Name, p))
	}
	return errors.Join(errs...)
}

// Problems lists what is wrong with a case (see Validate), without its
// name.
func (c *Case) Problems(ids map[string]bool) []string {
	var errs []string
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	if !NamePattern.MatchString(c.Name) {
		bad("the name must match %s", NamePattern)
	}
	switch {
	case c.Start.IsZero() || c.End.IsZero():
		bad("sampleTimeStart and sampleTimeEnd are required")
	case c.End.Equal(c.Start):
		bad("sampleTimeStart and sampleTimeEnd are both %s: a range of 0 covers no time", c.Start.UTC().Format(time.RFC3339))
	case c.End.Before(c.Start):
		bad("sampleTimeEnd %s is before sampleTimeStart %s", c.End.UTC().Format(time.RFC3339), c.Start.UTC().Format(time.RFC3339))
	}
	if c.Timeout <= 0 {
		bad("timeout must be positive")
	}
	for _, id := range c.Workflows {
		if !ids[id] {
			bad("workflows: %q is not a workflow of the project", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Services)) {
		if !ids[id] {
			bad("services: %q is not a workflow of the project", id)
		}
	}
	if len(c.Outputs) == 0 {
		bad("no outputs: a case compares at least one")
	}
	type named struct {
		what, path string
		input      bool
	}
	var all []named
	for i, in := range c.Inputs {
		what := fmt.Sprintf("inputs[%d]", i)
		if err := CheckPath(in.Path); err != nil {
			bad("%s.path %v", what, err)
			continue
		}
		if (in.Fixture == "") == (len(in.Files) == 0) {
			bad("%s: give either fixture (a directory or file) or files (inline)", what)
		}
		for _, name := range slices.Sorted(maps.Keys(in.Files)) {
			if err := CheckFileName(name); err != nil {
				bad("%s.files: %v", what, err)
			}
		}
		all = append(all, named{what, in.Path, true})
	}
	for i, out := range c.Outputs {
		what := fmt.Sprintf("outputs[%d]", i)
		if err := CheckPath(out.Path); err != nil {
			bad("%s.path %v", what, err)
			continue
		}
		if (out.Expected == "") == (out.Files == nil) {
			bad("%s: give either expected (a directory) or files (inline)", what)
		}
		for _, name := range slices.Sorted(maps.Keys(out.Files)) {
			if err := CheckFileName(name); err != nil {
				bad("%s.files: %v", what, err)
			}
		}
		switch out.Comparer.Type {
		case ComparePlain, CompareNDJSON, CompareTSV:
		default:
			bad("%s.comparer: unknown type %q (plain, ndjson or tsv)", what, out.Comparer.Type)
		}
		all = append(all, named{what, out.Path, false})
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			// Inputs may be layered; an output must not overlap an
			// input (it would compare the fixture) or another output.
			if (!all[i].input || !all[j].input) && overlaps(all[i].path, all[j].path) {
				bad("%s (%s) and %s (%s) overlap: one is inside the other", all[i].what, all[i].path, all[j].what, all[j].path)
			}
		}
	}
	return errs
}
