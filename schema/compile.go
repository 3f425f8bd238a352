package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	cueembed "cuelang.org/go/cue/inject/embed"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/celos-go/celos/schema/cron"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

// Compile loads the CUE package in dir with the embedded schema (even when
// the project vendors a copy of its own, which is then compared with the
// embedded one: a difference is a warning), unifies it with #Project,
// requires concrete values, converts it to a Project and validates it,
// adding the checks the schema cannot make (cron expressions and time
// zones, references to workflows missing from the project).
//
// It works offline (no module registry is consulted). diags holds every
// diagnostic, warnings included, sorted by position. When the project is
// invalid, the Project is nil and err is a Diagnostics of the errors alone;
// Compile never panics on bad input.
//
// The project's test cases (its tests field) are checked too, as
// CompileWithTests checks them: a project with an invalid test case is
// invalid for every command.
func Compile(dir string) (p *workflow.Project, diags []Diagnostic, err error) {
	p, _, diags, err = compileDir(dir, Options{})
	return p, diags, err
}

// CompileWith is Compile with options (runchecks.go: the installation's
// pools).
func CompileWith(dir string, opts Options) (p *workflow.Project, diags []Diagnostic, err error) {
	p, _, diags, err = compileDir(dir, opts)
	return p, diags, err
}

// compileDir is CompileWithTests with options.
func compileDir(dir string, opts Options) (p *workflow.Project, suite *testcase.Suite, diags []Diagnostic, err error) {
	c := &compiler{embedPos: map[string]token.Pos{}, opts: opts}
	return c.run(dir)
}

// run is CompileWithTests with c's options (its cache, the pools).
func (c *compiler) run(dir string) (p *workflow.Project, suite *testcase.Suite, diags []Diagnostic, err error) {
	c.cwd, _ = os.Getwd()
	defer func() {
		if r := recover(); r != nil {
			// A bug in CUE or here: report it as a diagnostic, not a crash.
			c.errorf("", "internal error compiling %s: %v", dir, r)
			c.panicked = true
			p = nil
		}
		diags = c.sorted()
		var errs Diagnostics
		for _, d := range diags {
			if !d.Warning {
				errs = append(errs, d)
			}
		}
		if len(errs) > 0 {
			p, suite, err = nil, nil, errs
		}
	}()
	p = c.compile(dir)
	if p != nil {
		suite = c.extractTests(p)
	}
	return p, suite, nil, nil
}

type compiler struct {
	cwd       string
	dir       string // absolute directory of the package
	schemaDir string // absolute directory the schema is overlaid at
	diags     []Diagnostic
	root      *cue.Value           // the package, once built
	checkFile string               // the file overlaid into the package to apply #Project
	absArg    bool                 // the directory was given as an absolute path
	deferred  []cueerrors.Error    // errors left to scanMissing
	fsys      *inputFS             // every file of the project is read through it
	embedPos  map[string]token.Pos // host path of an embedded file → its first @embed

	cache *Cache // CompileCached's, or nil
	// paths are the fixture and expected-output paths the test cases
	// named, with what localPath answered: a cached answer holds only
	// while each still answers the same (see CompileCached).
	paths    []pathCheck
	key      string    // the cache key, once the files are read
	hit      *Compiled // the cache's answer
	panicked bool
	opts     Options
}

// syntheticModule is the module file overlaid when the project has no
// cue.mod of its own, so that it can import the schema all the same.
const syntheticModule = "module: \"celos.local/project\"\nlanguage: version: \"v0.17.0\"\n"

// compile runs the phases in order: open the module, read the project,
// load the CUE instance, evaluate it, extract the Project. Each phase
// reports its diagnostics; compiling stops at the first that fails.
func (c *compiler) compile(dir string) *workflow.Project {
	if dir == "" {
		dir = "."
	}
	abs, root, overlay, ok := c.openModule(dir)
	if !ok {
		return nil
	}
	if !c.readProject(dir, abs, root, overlay) {
		return nil
	}
	if c.cache != nil && c.lookupCache(dir) {
		return nil
	}
	inst := c.loadInstance(dir, abs, root)
	if inst == nil {
		return nil
	}
	pv := c.evaluate(inst, dir)
	if c.failed() {
		return nil
	}
	if c.opts.Evaluated != nil {
		c.opts.Evaluated()
	}
	return c.extractProject(pv, inst.PkgName, dir)
}

// openModule checks that dir is a directory and finds its module root:
// the nearest directory with a cue.mod, else dir itself with a module
// file overlaid. The overlay returned also holds the embedded schema at
// its vendored place (c.schemaDir), blanking vendored files it lacks.
func (c *compiler) openModule(dir string) (abs, root string, overlay map[string][]byte, ok bool) {
	c.absArg = filepath.IsAbs(dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		c.errorf(dir, "%v", err)
		return "", "", nil, false
	}
	c.dir = abs
	fi, err := os.Stat(abs)
	switch {
	case os.IsNotExist(err):
		c.errorf(dir, "no such directory")
		return "", "", nil, false
	case err != nil:
		c.errorf(dir, "%v", unwrapPathError(err))
		return "", "", nil, false
	case !fi.IsDir():
		c.errorf(dir, "not a directory")
		return "", "", nil, false
	}
	// The module root: the nearest directory with a cue.mod, else dir
	// itself with a module file overlaid.
	overlay = map[string][]byte{}
	root = findModuleRoot(abs)
	if root == "" {
		root = abs
		overlay[filepath.Join(root, "cue.mod", "module.cue")] = []byte(syntheticModule)
	}
	c.schemaDir = filepath.Join(root, filepath.FromSlash(SchemaVendorDir))
	// Blank out vendored files the embedded schema does not have (their
	// names are listed here; they are read by VendoredSchemaDiffers only).
	if entries, err := os.ReadDir(c.schemaDir); err == nil {
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".cue") {
				overlay[filepath.Join(c.schemaDir, e.Name())] = []byte("package celos\n")
			}
		}
	}
	for _, f := range SchemaFiles() {
		overlay[filepath.Join(c.schemaDir, f.Name)] = f.Data
	}
	return abs, root, overlay, true
}

// readProject reads every file of the project through c.fsys (regular
// files inside the module only, bounded) with overlay laid over them,
// checks the module's shape, warns when the vendored schema differs from
// the embedded one, and overlays the file that applies #Project to the
// package. It reports whether compiling can go on.
func (c *compiler) readProject(dir, abs, root string, overlay map[string][]byte) bool {
	// Apply the schema inside the package itself, with a file overlaid
	// into it: when the project already writes `workflows:
	// celos.#Workflows`, CUE shares the two identical conjuncts, so the
	// schema is evaluated once, as plain `cue export` would. The name is
	// chosen before the file system is made; the package name is filled in
	// once the files have been read through it.
	checkFile := ""
	for i := 0; ; i++ {
		name := fmt.Sprintf("zz_celos_schema%d.cue", i)
		if _, err := os.Lstat(filepath.Join(abs, name)); os.IsNotExist(err) {
			checkFile = filepath.Join(abs, name)
			break
		}
	}
	// Every file is read through c.fsys: regular files inside the module
	// only, bounded.
	fsys, err := newInputFS(root, overlay)
	if err != nil {
		c.errorf(dir, "%v", unwrapPathError(err))
		return false
	}
	c.fsys = fsys
	if !c.checkFiles(abs) {
		return false
	}
	if fi, err := os.Stat(filepath.Join(abs, "cue.mod")); err == nil && !fi.IsDir() {
		c.errorf(c.rel(filepath.Join(abs, "cue.mod")), "not a directory (a CUE module's cue.mod is a directory with a module.cue file; celos init creates one)")
		return false
	}
	if differs, why := VendoredSchemaDiffers(c.schemaDir); differs {
		rootName := c.rel(root)
		if rootName == "" {
			rootName = "."
		}
		c.warnf(c.rel(c.schemaDir),
			"the vendored schema differs from the one built into celos (%s); celos checks with its own. Update the copy with: celos init --update-schema %s", why, rootName)
	}
	if pkg := c.packageName(abs); pkg != "" {
		fsys.overlay[checkFile] = []byte("package " + pkg + "\n\nimport celos_ \"" + SchemaImportPath + "\"\n\nproject?: celos_.#ID\nworkflows: celos_.#Workflows\ntests?: celos_.#Tests\n")
		fsys.dirs[abs] = append(fsys.dirs[abs], filepath.Base(checkFile))
		c.checkFile = checkFile
	}
	// cue/load parses what was read and checked here, and never opens a
	// file of the project itself.
	c.gatherInputs(abs, root)
	if c.reportRefused() || c.failed() {
		return false
	}
	return true
}

// loadInstance has cue/load parse the files readProject read (it never
// opens a file of the project itself), offline. It returns nil when the
// package could not be loaded, with the diagnostics reported.
func (c *compiler) loadInstance(dir, abs, root string) *build.Instance {
	env := []string{"CUE_REGISTRY=none"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUE_REGISTRY=") {
			env = append(env, kv)
		}
	}
	overlay := map[string][]byte{}
	for p, data := range c.fsys.overlay {
		overlay[p] = data
	}
	for p, data := range c.fsys.loaded() {
		overlay[p] = data
	}
	sources := make(map[string]load.Source, len(overlay))
	for p, data := range overlay {
		sources[p] = load.FromBytes(data)
	}
	cfg := &load.Config{
		Dir:                 abs,
		ModuleRoot:          root,
		Overlay:             sources,
		AcceptLegacyModules: true,
		Env:                 env,
	}
	insts := load.Instances([]string{"."}, cfg)
	if len(insts) != 1 {
		c.errorf(dir, "expected one CUE package, found %d", len(insts))
		return nil
	}
	inst := insts[0]
	if c.reportRefused() {
		return nil
	}
	if inst.Err != nil {
		if m := badModulePath.FindString(inst.Err.Error()); m != "" {
			// CUE reports it without a position, wrapped in what its
			// legacy-module fixer tried.
			c.errorf(c.rel(filepath.Join(root, "cue.mod", "module.cue")), "%s", m)
			return nil
		}
		c.addCUEError(inst.Err, dir)
		return nil
	}
	return inst
}

// badModulePath is CUE's reason for refusing cue.mod/module.cue's module
// path.
var badModulePath = regexp.MustCompile(`module path "[^"\n]*" is not valid: [^\n]*`)

// evaluate builds the package, requires it to be concrete and closed as
// #Project, and reports every error it can find in one run. The caller
// checks c.failed() before using the value.
func (c *compiler) evaluate(inst *build.Instance, dir string) cue.Value {
	ctx := cuecontext.New()
	pv := ctx.BuildInstance(inst)
	c.root = &pv
	if err := pv.Validate(cue.Concrete(true)); err != nil {
		c.addCUEError(err, dir)
	} else if err := pv.Err(); err != nil {
		c.addCUEError(err, dir)
	}
	if c.failed() {
		// CUE leaves out missing fields when it has other errors to
		// report (as `cue vet` does): validate each workflow that has no
		// diagnostic yet on its own, so that one run names them too.
		c.validateQuiet(pv.LookupPath(cue.ParsePath("workflows")), dir)
	}
	if len(c.deferred) > 0 {
		if !c.scanMissing(pv.LookupPath(cue.ParsePath("workflows"))) {
			// Nothing found missing: report CUE's own words.
			for _, e := range c.deferred {
				format, args := e.Msg()
				p, _ := c.userPos(append([]token.Pos{e.Position()}, e.InputPositions()...))
				msg := fmt.Sprintf(format, args...)
				if path := cuePath(e.Path()); path != "" {
					msg = path + ": " + msg
				}
				c.errorf(c.pos(p), "%s", msg)
			}
		}
	}
	// As #Project, the package is closed: only project, workflows and tests.
	if it, err := pv.Fields(); err == nil {
		for it.Next() {
			switch it.Selector().String() {
			case "project", "workflows", "tests":
			default:
				hint := "a project declares only project, workflows and tests; helpers belong in definitions, #name, or hidden fields, _name"
				if best := closest(it.Selector().Unquoted(), []string{"project", "workflows", "tests"}); best != "" {
					hint = "did you mean " + best + "? " + hint
				}
				c.errorf(c.valuePos(it.Value()), "%s: field not allowed (%s)", it.Selector(), hint)
			}
		}
	}
	if c.failed() {
		// Check the cron expressions CUE has let through all the same,
		// so that one run reports them with CUE's errors.
		c.cronsOf(pv.LookupPath(cue.ParsePath("workflows")))
		c.windowsOf(pv.LookupPath(cue.ParsePath("workflows")))
		return pv
	}
	return pv
}

// extractProject converts the evaluated package into a Project, one
// workflow at a time, validates it and checks its references. pkgName
// names the project when it does not set project.
func (c *compiler) extractProject(pv cue.Value, pkgName, dir string) *workflow.Project {
	p := &workflow.Project{Format: workflow.FormatVersion, Workflows: []workflow.Workflow{}}
	if pn := pv.LookupPath(cue.ParsePath("project")); pn.Exists() {
		p.Project, _ = pn.String()
	} else {
		p.Project = pkgName
	}
	wfs := pv.LookupPath(cue.ParsePath("workflows"))
	it, err := wfs.Fields()
	if err != nil {
		c.addCUEError(err, dir)
		return nil
	}
	for it.Next() {
		w, ok := c.workflow(it.Selector().Unquoted(), it.Value())
		if ok {
			p.Workflows = append(p.Workflows, w)
		}
	}
	if c.failed() {
		return nil
	}
	sort.Slice(p.Workflows, func(i, j int) bool { return p.Workflows[i].ID < p.Workflows[j].ID })
	if err := p.Validate(); err != nil {
		// What the checks above have not caught (they are the same rules,
		// so this is a backstop): report it at the package.
		for _, e := range splitJoined(err) {
			c.errorf(c.pos(pv.Pos()), "%v", e)
		}
		return nil
	}
	c.references(p, wfs)
	return p
}

// workflow converts one concrete workflow value (by walking its fields,
// walk.go, or where the walker leaves it, through JSON) and makes the
// checks the schema cannot make, at the positions of the values concerned.
func (c *compiler) workflow(id string, v cue.Value) (workflow.Workflow, bool) {
	w, ok := c.walk(id, v)
	if !ok {
		if w, ok = c.decodeWorkflow(id, v); !ok {
			return w, false
		}
	}
	return c.checkWorkflow(id, v, w)
}

// decodeWorkflow converts one concrete workflow value through CUE's JSON
// export, reporting what it cannot convert at its position.
func (c *compiler) decodeWorkflow(id string, v cue.Value) (workflow.Workflow, bool) {
	var w workflow.Workflow
	data, err := v.MarshalJSON()
	if err != nil {
		c.addCUEError(err, c.dir)
		return w, false
	}
	data, probs := explicitTriggers(id, data)
	for _, p := range probs {
		c.errorf(c.valuePos(v.LookupPath(cue.MakePath(p.path...))), "workflows.%s.%s: %s", cuePathLabel(id), dotted(p.path), p.msg)
	}
	if len(probs) > 0 {
		return w, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && strings.HasPrefix(ute.Value, "number") && ute.Field != "" {
			// An integer CUE accepts (it has no size limit) that Go's
			// cannot hold.
			c.errorf(c.valuePos(v.LookupPath(cue.ParsePath(ute.Field))), "workflows.%s.%s: %s is out of range", cuePathLabel(id), ute.Field, strings.TrimPrefix(ute.Value, "number "))
			return w, false
		}
		c.errorf(c.valuePos(v), "workflows.%s: internal error: the schema and the compiled form disagree: %v", cuePathLabel(id), err)
		return w, false
	}
	return w, true
}

// checkWorkflow makes the checks of workflow w, converted from v, that the
// schema cannot make, at the positions of the values concerned.
func (c *compiler) checkWorkflow(id string, v cue.Value, w workflow.Workflow) (workflow.Workflow, bool) {
	ok := true
	at := func(path ...cue.Selector) string { return c.valuePos(v.LookupPath(cue.MakePath(path...))) }
	label := "workflows." + cuePathLabel(id)
	if w.Schedule.Type == workflow.ScheduleCron {
		loc, err := w.Schedule.Location()
		if err != nil {
			c.errorf(at(cue.Str("schedule"), cue.Str("timeZone")), "%s.schedule.timeZone: %s", label, zoneProblem(w.Schedule.TimeZone, err))
			ok = false
		} else if _, err := cron.Parse(w.Schedule.Cron, loc); err != nil {
			c.errorf(at(cue.Str("schedule"), cue.Str("cron")), "%s.schedule.cron: invalid cron expression %q: %v", label, w.Schedule.Cron, err)
			ok = false
		}
	}
	if _, off := w.StartTime.Zone(); off != 0 {
		c.errorf(at(cue.Str("startTime")), "%s.startTime: %s is not in UTC (write it with a Z)", label, w.StartTime.Format(time.RFC3339))
		ok = false
	} else {
		w.StartTime = w.StartTime.UTC()
	}
	ok = c.runChecks(label, &w, at) && ok
	if ok {
		if err := w.Validate(); err != nil {
			for _, e := range splitJoined(err) {
				c.errorf(c.valuePos(v), "%s: %v", label, e)
			}
			ok = false
		}
	}
	return w, ok
}

// validateQuiet validates, one by one, the workflows of an invalid
// project about which nothing has been reported.
func (c *compiler) validateQuiet(wfs cue.Value, dir string) {
	it, err := wfs.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		label := "workflows." + it.Selector().String()
		reported := false
		for _, d := range c.diags {
			if !d.Warning && (strings.HasPrefix(d.Msg, label+".") || strings.HasPrefix(d.Msg, label+":")) {
				reported = true
				break
			}
		}
		if reported {
			continue
		}
		if err := it.Value().Validate(cue.Concrete(true)); err != nil {
			c.addCUEError(err, dir)
		}
	}
}

// cronsOf checks the cron schedules of a project that has other errors:
// each one whose expression and time zone are concrete strings, with the
// messages of workflow.
func (c *compiler) cronsOf(wfs cue.Value) {
	it, err := wfs.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		label := "workflows." + cuePathLabel(it.Selector().Unquoted())
		sched := it.Value().LookupPath(cue.ParsePath("schedule"))
		if typ, err := sched.LookupPath(cue.ParsePath("type")).String(); err != nil || typ != workflow.ScheduleCron {
			continue
		}
		exprV := sched.LookupPath(cue.ParsePath("cron"))
		expr, err := exprV.String()
		if err != nil {
			continue
		}
		zoneV := sched.LookupPath(cue.ParsePath("timeZone"))
		zone, err := zoneV.String()
		if err != nil {
			continue
		}
		loc, err := (&workflow.Schedule{Type: workflow.ScheduleCron, Cron: expr, TimeZone: zone}).Location()
		if err != nil {
			c.errorf(c.valuePos(zoneV), "%s.schedule.timeZone: %s", label, zoneProblem(zone, err))
		} else if _, err := cron.Parse(expr, loc); err != nil {
			c.errorf(c.valuePos(exprV), "%s.schedule.cron: invalid cron expression %q: %v", label, expr, err)
		}
	}
}

// zoneProblem says what is wrong with a schedule's time zone.
func zoneProblem(zone string, err error) string {
	if zone == "Local" {
		return err.Error()
	}
	return fmt.Sprintf("unknown time zone %q", zone)
}

// valuePos is the position of a value in the project's files (falling back
// to the schema's).
func (c *compiler) valuePos(v cue.Value) string {
	p, _ := c.userPos(valuePositions(v))
	return c.pos(p)
}

// valuePositions lists the positions of a value and of the conjuncts it
// was unified from.
func valuePositions(v cue.Value) []token.Pos {
	ps := []token.Pos{v.Pos()}
	if op, args := v.Expr(); op == cue.AndOp {
		for _, a := range args {
			ps = append(ps, a.Pos())
		}
	}
	return ps
}

// cuePathLabel quotes a field label as CUE prints it in a path.
func cuePathLabel(s string) string {
	return cue.MakePath(cue.Str(s)).String()
}

// Bounds on the walk of cue.mod's package directories.
const (
	maxModDepth = 32
	maxModFiles = 100000
)

// gatherInputs reads through c.fsys every file cue/load may read: the .cue
// files of the package directory (read by checkFiles already) and of its
// parents up to the module root, cue.mod/module.cue, the .cue files under
// cue.mod/pkg, cue.mod/usr and cue.mod/gen, and the files that the @embed
// attributes of all of these name. Refusals are recorded in c.fsys.
func (c *compiler) gatherInputs(abs, root string) {
	readCUE := func(dir string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".cue") {
				c.fsys.read(filepath.Join(dir, e.Name()))
			}
		}
	}
	for d := abs; d != root && strings.HasPrefix(d, root+string(filepath.Separator)); {
		d = filepath.Dir(d)
		readCUE(d)
	}
	mod := filepath.Join(root, "cue.mod")
	c.fsys.read(filepath.Join(mod, "module.cue")) // a missing one is no refusal
	// cue/load reads any file not read here from the disk itself, so the
	// walk does not stop short: past its bounds the project is refused.
	files, tooBig, tooBigAt := 0, "", ""
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if tooBig != "" {
			return
		}
		if depth > maxModDepth {
			tooBig, tooBigAt = fmt.Sprintf("directories nested deeper than %d (a symbolic link loop?)", maxModDepth), c.rel(dir)
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if files++; files > maxModFiles {
				tooBig, tooBigAt = fmt.Sprintf("more than %d files and directories (a symbolic link loop?)", maxModFiles), c.rel(mod)
				return
			}
			p := filepath.Join(dir, e.Name())
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				// CUE ignores directories whose names start with a dot
				// (.git of a vendored module); embedded files in them
				// are gathered below all the same.
				if p != c.schemaDir && !strings.HasPrefix(e.Name(), ".") {
					walk(p, depth+1)
				}
				continue
			}
			if strings.HasSuffix(e.Name(), ".cue") {
				c.fsys.read(p)
			}
		}
	}
	for _, sub := range []string{"pkg", "usr", "gen"} {
		walk(filepath.Join(mod, sub), 1)
	}
	if tooBig != "" {
		c.errorf(tooBigAt, "%s", tooBig)
		return
	}
	// The files @embed names, in every CUE file read.
	for p, data := range c.fsys.loaded() {
		if !strings.HasSuffix(p, ".cue") || !bytes.Contains(data, []byte("@embed")) {
			continue
		}
		f, err := parser.ParseFile(p, data)
		if err != nil {
			continue // CUE reports it
		}
		embeds, _ := cueembed.EmbeddedPaths(strings.TrimPrefix(filepath.ToSlash(p), "/"), f)
		for _, e := range embeds {
			found, err := e.FindAll(c.fsys)
			if err != nil {
				continue // CUE reports it
			}
			for _, name := range found {
				hp := hostPath(name)
				if _, ok := c.embedPos[hp]; !ok {
					c.embedPos[hp] = e.Attribute.Pos
				}
				c.fsys.read(hp)
			}
		}
	}
}

// checkFiles reports .cue files of the package directory that are not
// UTF-8, with the position of the first bad byte (CUE's own message
// does not say where).
func (c *compiler) checkFiles(abs string) bool {
	entries, err := os.ReadDir(abs)
	if err != nil {
		c.errorf(c.rel(abs), "%v", unwrapPathError(err))
		return false
	}
	ok := true
	if !hasProjectFiles(entries) {
		// cue's own words would be `"." matched no packages`.
		name := c.rel(abs)
		if name == "" {
			name = "."
		}
		c.errorf(name, "%s", "no celos project here (no .cue files); start one with: celos init "+name)
		return false
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		path := filepath.Join(abs, e.Name())
		data, _, err := c.fsys.read(path)
		if err != nil {
			c.errorf(c.rel(path), "%v", unwrapPathError(err))
			ok = false
			continue
		}
		if utf8.Valid(data) {
			if f, err := parser.ParseFile(path, data, parser.PackageClauseOnly); err == nil && f.PackageName() == "" && !strings.HasPrefix(e.Name(), "_") && !strings.HasPrefix(e.Name(), ".") {
				c.errorf(c.rel(path)+":1:1", "no package clause: every file of a project starts with `package NAME`")
				ok = false
			}
			continue
		}
		line, col := 1, 1
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col += n
			}
			i += n
		}
		c.errorf(fmt.Sprintf("%s:%d:%d", c.rel(path), line, col), "invalid UTF-8: CUE files must be UTF-8 encoded")
		ok = false
	}
	return ok
}

// hasProjectFiles reports whether a directory listing has a .cue file that
// CUE would load (not hidden with . or _).
func hasProjectFiles(entries []os.DirEntry) bool {
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".cue") && !strings.HasPrefix(n, ".") && !strings.HasPrefix(n, "_") {
			return true
		}
	}
	return false
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// packageName reads the package clause of the first .cue file in dir that
// has one.
func (c *compiler) packageName(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, _, err := c.fsys.read(path)
		if err != nil {
			continue
		}
		f, err := parser.ParseFile(path, data, parser.PackageClauseOnly)
		if err != nil {
			continue
		}
		if name := f.PackageName(); name != "" && name != "_" {
			return name
		}
	}
	return ""
}

func findModuleRoot(dir string) string {
	for d := dir; ; {
		if fi, err := os.Stat(filepath.Join(d, "cue.mod")); err == nil && fi.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}
