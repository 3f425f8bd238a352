package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

// CompileWithTests is Compile that also returns the project's compiled
// test cases (its `tests` field, checked by the schema's #Tests), for
// `celos test`. Both check what the schema cannot: fixture and expected
// paths exist inside the package directory, the range is not empty,
// paths do not overlap, the workflows named exist. The suite is empty (not
// nil) for a project without tests.
func CompileWithTests(dir string) (*workflow.Project, *testcase.Suite, []Diagnostic, error) {
	return compileDir(dir, Options{})
}

// cueTestCase is a test case as the schema writes it.
type cueTestCase struct {
	Name           string                              `json:"name"`
	Start          time.Time                           `json:"sampleTimeStart"`
	End            time.Time                           `json:"sampleTimeEnd"`
	Workflows      []string                            `json:"workflows"`
	Inputs         []testcase.Input                    `json:"inputs"`
	Outputs        []testcase.Output                   `json:"outputs"`
	TimeoutSeconds int64                               `json:"timeoutSeconds"`
	PathProperties []string                            `json:"pathProperties"`
	Services       map[string]workflow.ExternalService `json:"services"`
}

// extractTests converts the evaluated `tests` of the package.
func (c *compiler) extractTests(p *workflow.Project) *testcase.Suite {
	suite := &testcase.Suite{Cases: []testcase.Case{}}
	tv := c.root.LookupPath(cue.ParsePath("tests"))
	if !tv.Exists() {
		return suite
	}
	it, err := tv.Fields()
	if err != nil {
		c.addCUEError(err, c.dir)
		return nil
	}
	ids := map[string]bool{}
	for _, w := range p.Workflows {
		ids[w.ID] = true
	}
	for it.Next() {
		tc, ok := c.testCase(it.Selector().Unquoted(), it.Value(), p, ids)
		if ok {
			suite.Cases = append(suite.Cases, tc)
		}
	}
	if c.failed() {
		return nil
	}
	sort.Slice(suite.Cases, func(i, j int) bool { return suite.Cases[i].Name < suite.Cases[j].Name })
	if err := suite.Validate(p); err != nil {
		for _, e := range splitJoined(err) {
			c.errorf(c.valuePos(tv), "tests: %v", e)
		}
		return nil
	}
	return suite
}

// testCase converts one concrete test case and checks it, reporting at the
// positions of the values concerned.
func (c *compiler) testCase(name string, v cue.Value, p *workflow.Project, ids map[string]bool) (testcase.Case, bool) {
	label := "tests." + cuePathLabel(name)
	data, err := v.MarshalJSON()
	if err != nil {
		c.addCUEError(err, c.dir)
		return testcase.Case{}, false
	}
	var raw cueTestCase
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		c.errorf(c.valuePos(v), "%s: internal error: the schema and the compiled form disagree: %v", label, err)
		return testcase.Case{}, false
	}
	tc := testcase.Case{
		Name: raw.Name, Start: raw.Start.UTC(), End: raw.End.UTC(), Workflows: raw.Workflows,
		Inputs: raw.Inputs, Outputs: raw.Outputs, Timeout: time.Duration(raw.TimeoutSeconds) * time.Second,
		PathProperties: raw.PathProperties, Services: raw.Services, Where: c.valuePos(v),
	}
	if len(tc.Services) == 0 {
		tc.Services = nil
	}
	if len(tc.PathProperties) == 0 {
		tc.PathProperties = nil
	}
	at := func(sel ...cue.Selector) string { return c.valuePos(v.LookupPath(cue.MakePath(sel...))) }
	ok := true
	for _, f := range []struct {
		field string
		t     time.Time
	}{{"sampleTimeStart", raw.Start}, {"sampleTimeEnd", raw.End}} {
		if _, off := f.t.Zone(); off != 0 {
			c.errorf(at(cue.Str(f.field)), "%s.%s: %s is not in UTC (write it with a Z)", label, f.field, f.t.Format(time.RFC3339))
			ok = false
		}
	}
	for i := range tc.Inputs {
		in := &tc.Inputs[i]
		if in.Fixture == "" {
			continue
		}
		abs, err := c.localPath(in.Fixture, false)
		if err != nil {
			c.errorf(at(cue.Str("inputs"), cue.Index(i), cue.Str("fixture")), "%s.inputs[%d].fixture: %v", label, i, err)
			ok = false
		}
		in.Fixture = abs
	}
	for i := range tc.Outputs {
		out := &tc.Outputs[i]
		if out.Expected == "" {
			continue
		}
		abs, err := c.localPath(out.Expected, true)
		if err != nil {
			c.errorf(at(cue.Str("outputs"), cue.Index(i), cue.Str("expected")), "%s.outputs[%d].expected: %v", label, i, err)
			ok = false
		}
		out.Expected = abs
	}
	if ok {
		for _, msg := range append(tc.Problems(ids), tc.SlotProblems(p)...) {
			c.errorf(c.valuePos(v), "%s: %s", label, msg)
			ok = false
		}
	}
	return tc, ok
}

// errOutside is the error of a fixture path that leaves the package.
var errOutside = errors.New("is outside the package directory (fixtures live in the project)")

// localPath resolves a fixture or expected path, relative to the package
// directory, to an absolute path that exists inside it (symbolic links
// resolved); dirOnly requires a directory.
func (c *compiler) localPath(rel string, dirOnly bool) (abs string, err error) {
	defer func() { c.recordPath(rel, dirOnly, abs, err) }()
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("%q is absolute: name it relative to the package directory", rel)
	}
	clean := filepath.Clean(filepath.FromSlash(rel))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q %w", rel, errOutside)
	}
	abs = filepath.Join(c.dir, clean)
	fi, err := os.Stat(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("%s does not exist", c.rel(abs))
		}
		return "", fmt.Errorf("%s: %v", c.rel(abs), unwrapPathError(err))
	}
	if dirOnly && !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", c.rel(abs))
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is neither a directory nor a regular file", c.rel(abs))
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%s: %v", c.rel(abs), unwrapPathError(err))
	}
	base, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		return "", err
	}
	if real != base && !strings.HasPrefix(real, base+string(filepath.Separator)) {
		return "", fmt.Errorf("%q %w (through a symbolic link)", rel, errOutside)
	}
	return abs, nil
}
