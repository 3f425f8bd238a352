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
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	cueembed "cuelang.org/go/cue/inject/embed"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/celos-go/celos/schema/cron"
)

// Diagnostic is one problem found in a project, at a position.
type Diagnostic struct {
	// Pos is "file:line:col" with file relative to the working directory
	// (absolute when the directory was named by an absolute path and lies
	// outside the working directory), or just a file or directory name when
	// there is no line.
	Pos string
	// Msg says what is wrong; it starts with the CUE path of the value
	// concerned when there is one (workflows.wordcount.schedule.cron: ...).
	Msg string
	// Warning marks a diagnostic that does not make the project invalid.
	Warning bool
}

// String is "pos: msg", or "pos: warning: msg" for a warning.
func (d Diagnostic) String() string {
	msg := d.Msg
	if d.Warning {
		msg = "warning: " + msg
	}
	if d.Pos == "" {
		return msg
	}
	return d.Pos + ": " + msg
}

// Diagnostics is the error Compile returns for an invalid project: every
// error-level diagnostic, in order.
type Diagnostics []Diagnostic

// Error lists the diagnostics, one "file:line:col: message" per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

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
func Compile(dir string) (p *Project, diags []Diagnostic, err error) {
	c := &compiler{embedPos: map[string]token.Pos{}}
	c.cwd, _ = os.Getwd()
	defer func() {
		if r := recover(); r != nil {
			// A bug in CUE or here: report it as a diagnostic, not a crash.
			c.errorf("", "internal error compiling %s: %v", dir, r)
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
			p, err = nil, errs
		}
	}()
	p = c.compile(dir)
	return p, nil, nil
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
}

// reportRefused reports the files the compiler's file system refused to
// read, by name and reason, and says whether there were any.
func (c *compiler) reportRefused() bool {
	refused := c.fsys.refusals()
	for _, r := range refused {
		if pos, ok := c.embedPos[r.path]; ok {
			c.errorf(c.pos(pos), "@embed of %s: %v", c.rel(r.path), r.err)
			continue
		}
		c.errorf(c.rel(r.path), "%v", r.err)
	}
	return len(refused) > 0
}

func (c *compiler) errorf(pos, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: pos, Msg: oneLine(fmt.Sprintf(format, args...))})
}

// oneLine keeps a message on one line (CUE's may span several).
func oneLine(s string) string {
	s = strings.TrimRight(s, "\n:")
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}

func (c *compiler) warnf(pos, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...), Warning: true})
}

func (c *compiler) failed() bool {
	for _, d := range c.diags {
		if !d.Warning {
			return true
		}
	}
	return false
}

// sorted returns the diagnostics without duplicates, ordered by file, line
// and column (diagnostics without a line first, in the order found).
func (c *compiler) sorted() []Diagnostic {
	type key struct {
		file      string
		line, col int
	}
	parse := func(pos string) key {
		var k key
		f := pos
		// file:line:col, where file may itself contain colons.
		if i := strings.LastIndexByte(f, ':'); i > 0 {
			if j := strings.LastIndexByte(f[:i], ':'); j > 0 {
				var line, col int
				if _, err := fmt.Sscanf(f[j+1:], "%d:%d", &line, &col); err == nil {
					return key{f[:j], line, col}
				}
			}
		}
		k.file = f
		return k
	}
	seen := map[Diagnostic]bool{}
	var out []Diagnostic
	for _, d := range c.diags {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := parse(out[i].Pos), parse(out[j].Pos)
		if (a.line == 0) != (b.line == 0) {
			return a.line == 0
		}
		if a.file != b.file {
			return a.file < b.file
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
	return out
}

// rel makes an absolute file name relative to the working directory when
// it lies below it.
func (c *compiler) rel(path string) string {
	if c.schemaDir != "" && strings.HasPrefix(path, c.schemaDir+string(filepath.Separator)) {
		// The embedded schema (possibly overlaid on a vendored copy).
		return SchemaImportPath + "/" + filepath.Base(path)
	}
	if c.cwd != "" && filepath.IsAbs(path) {
		if r, err := filepath.Rel(c.cwd, path); err == nil {
			below := r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
			// Above the working directory, relative only when the
			// directory was named relatively.
			if below || !c.absArg {
				return r
			}
		}
	}
	return path
}

func (c *compiler) pos(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	if p.Line() == 0 {
		return c.rel(p.Filename())
	}
	return fmt.Sprintf("%s:%d:%d", c.rel(p.Filename()), p.Line(), p.Column())
}

func (c *compiler) inSchema(p token.Pos) bool {
	if c.checkFile != "" && p.Filename() == c.checkFile {
		return true
	}
	return c.schemaDir != "" && strings.HasPrefix(p.Filename(), c.schemaDir+string(filepath.Separator))
}

// userPos picks the position to report: the first one in the project's own
// files, else the first one at all.
func (c *compiler) userPos(ps []token.Pos) (token.Pos, bool) {
	for _, p := range ps {
		if p.IsValid() && !c.inSchema(p) {
			return p, true
		}
	}
	for _, p := range ps {
		if p.IsValid() {
			return p, false
		}
	}
	return token.NoPos, false
}

// syntheticModule is the module file overlaid when the project has no
// cue.mod of its own, so that it can import the schema all the same.
const syntheticModule = "module: \"celos.local/project\"\nlanguage: version: \"v0.17.0\"\n"

func (c *compiler) compile(dir string) *Project {
	if dir == "" {
		dir = "."
	}
	c.absArg = filepath.IsAbs(dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		c.errorf(dir, "%v", err)
		return nil
	}
	c.dir = abs
	fi, err := os.Stat(abs)
	switch {
	case os.IsNotExist(err):
		c.errorf(dir, "no such directory")
		return nil
	case err != nil:
		c.errorf(dir, "%v", unwrapPathError(err))
		return nil
	case !fi.IsDir():
		c.errorf(dir, "not a directory")
		return nil
	}
	// The module root: the nearest directory with a cue.mod, else dir
	// itself with a module file overlaid.
	overlay := map[string][]byte{}
	root := findModuleRoot(abs)
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
		return nil
	}
	c.fsys = fsys
	if !c.checkFiles(abs) {
		return nil
	}
	if fi, err := os.Stat(filepath.Join(abs, "cue.mod")); err == nil && !fi.IsDir() {
		c.errorf(c.rel(filepath.Join(abs, "cue.mod")), "not a directory (a CUE module's cue.mod is a directory with a module.cue file; celos init creates one)")
		return nil
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
		fsys.overlay[checkFile] = []byte("package " + pkg + "\n\nimport celos_ \"" + SchemaImportPath + "\"\n\nproject?: celos_.#ID\nworkflows: celos_.#Workflows\n")
		fsys.dirs[abs] = append(fsys.dirs[abs], filepath.Base(checkFile))
		c.checkFile = checkFile
	}
	env := []string{"CUE_REGISTRY=none"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUE_REGISTRY=") {
			env = append(env, kv)
		}
	}
	// cue/load parses what was read and checked here, and never opens a
	// file of the project itself.
	c.gatherInputs(abs, root)
	if c.reportRefused() || c.failed() {
		return nil
	}
	overlay = map[string][]byte{}
	for p, data := range fsys.overlay {
		overlay[p] = data
	}
	for p, data := range fsys.loaded() {
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
		c.addCUEError(inst.Err, dir)
		return nil
	}

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
	// As #Project, the package is closed: only project and workflows.
	if it, err := pv.Fields(); err == nil {
		for it.Next() {
			switch it.Selector().String() {
			case "project", "workflows":
			default:
				c.errorf(c.valuePos(it.Value()), "%s: field not allowed (a project declares only project and workflows; helpers belong in definitions, #name, or hidden fields, _name)", it.Selector())
			}
		}
	}
	if c.failed() {
		// Check the cron expressions CUE has let through all the same,
		// so that one run reports them with CUE's errors.
		c.cronsOf(pv.LookupPath(cue.ParsePath("workflows")))
		return nil
	}

	p := &Project{Format: FormatVersion, Workflows: []Workflow{}}
	if pn := pv.LookupPath(cue.ParsePath("project")); pn.Exists() {
		p.Project, _ = pn.String()
	} else {
		p.Project = inst.PkgName
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

// workflow converts one concrete workflow value and makes the checks the
// schema cannot make, at the positions of the values concerned.
func (c *compiler) workflow(id string, v cue.Value) (Workflow, bool) {
	var w Workflow
	data, err := v.MarshalJSON()
	if err != nil {
		c.addCUEError(err, c.dir)
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
	ok := true
	at := func(path ...cue.Selector) string { return c.valuePos(v.LookupPath(cue.MakePath(path...))) }
	label := "workflows." + cuePathLabel(id)
	if w.Schedule.Type == ScheduleCron {
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
		if typ, err := sched.LookupPath(cue.ParsePath("type")).String(); err != nil || typ != ScheduleCron {
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
		loc, err := (&Schedule{Type: ScheduleCron, Cron: expr, TimeZone: zone}).Location()
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

// references warns about dependent schedules and success triggers naming
// workflows that are not in the project (they may be in another project of
// the same installation).
func (c *compiler) references(p *Project, wfs cue.Value) {
	ids := make(map[string]bool, len(p.Workflows))
	for _, w := range p.Workflows {
		ids[w.ID] = true
	}
	for _, w := range p.Workflows {
		wv := wfs.LookupPath(cue.MakePath(cue.Str(w.ID)))
		label := "workflows." + cuePathLabel(w.ID)
		if w.Schedule.Type == ScheduleDependent && !ids[w.Schedule.Workflow] {
			path := cue.MakePath(cue.Str("schedule"), cue.Str("workflow"))
			c.warnf(c.valuePos(wv.LookupPath(path)), "%s.schedule.workflow: workflow %q is not in this project (fine if another project of the installation defines it)", label, w.Schedule.Workflow)
		}
		var walk func(t *Trigger, path []cue.Selector, name string)
		walk = func(t *Trigger, path []cue.Selector, name string) {
			sub := func(n ...cue.Selector) []cue.Selector { return append(path[:len(path):len(path)], n...) }
			switch t.Type {
			case TriggerSuccess:
				if !ids[t.Workflow] {
					c.warnf(c.valuePos(wv.LookupPath(cue.MakePath(sub(cue.Str("workflow"))...))), "%s.%s.workflow: workflow %q is not in this project (fine if another project of the installation defines it)", label, name, t.Workflow)
				}
			case TriggerAnd, TriggerOr:
				for i := range t.Triggers {
					walk(&t.Triggers[i], sub(cue.Str("triggers"), cue.Index(i)), fmt.Sprintf("%s.triggers.%d", name, i))
				}
			case TriggerNot, TriggerOffset:
				if t.Trigger != nil {
					walk(t.Trigger, sub(cue.Str("trigger")), name+".trigger")
				}
			}
		}
		walk(&w.Trigger, []cue.Selector{cue.Str("trigger")}, "trigger")
	}
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

// splitJoined undoes errors.Join.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []error{err}
}

// addCUEError turns a CUE error (possibly a list) into diagnostics, one
// per problem: the alternatives of a failed disjunction (a tag such as
// trigger.type, a field with a default) are summarised in one message.
func (c *compiler) addCUEError(err error, dir string) {
	errs := cueerrors.Errors(err)
	if len(errs) == 0 {
		c.errorf(dir, "%v", err)
		return
	}
	for i := 0; i < len(errs); i++ {
		e := errs[i]
		format, args := e.Msg()
		if strings.HasPrefix(format, "non-concrete value %v in operand to") || len(e.Path()) > 0 && strings.HasPrefix(e.Path()[0], "#") {
			// A shape chosen by a `type` the project left out: CUE
			// reports it inside the schema; scanMissing says which.
			c.deferred = append(c.deferred, e)
			continue
		}
		ps := append([]token.Pos{e.Position()}, e.InputPositions()...)
		if format == "import failed" {
			// CUE's message names the project's module, not the import;
			// the reason is in the wrapped error.
			c.importFailed(e, ps, dir)
			continue
		}
		var msg string
		if n, ok := disjunctionCount(format, args); ok && i+n < len(errs) {
			children := errs[i+1 : i+1+n]
			i += n
			msg = summariseDisjunction(children)
			for _, ch := range children {
				ps = append(ps, ch.Position())
				ps = append(ps, ch.InputPositions()...)
			}
		} else {
			msg = fmt.Sprintf(format, args...)
		}
		p, user := c.userPos(ps)
		pathOverride := ""
		if !user {
			if fp, ok := c.fieldUserPos(e.Path()); ok {
				// The project wrote the field, but the error does not
				// point there (an ambiguous default, say).
				p = fp
			} else {
				if strings.HasPrefix(msg, "incomplete value ") {
					// Name the outermost field that is missing: the
					// list, not its first element.
					missing := e.Path()
					for len(missing) > 1 {
						if _, ok := c.fieldUserPos(missing[:len(missing)-1]); ok {
							break
						}
						missing = missing[:len(missing)-1]
					}
					if len(missing) == len(e.Path()) {
						msg = "missing required field (" + strings.TrimPrefix(msg, "incomplete value ") + ")"
					} else {
						msg = "missing required field"
						pathOverride = cuePath(missing)
					}
				}
				// Report it at the nearest enclosing value the project wrote.
				if up, ok := c.enclosingUserPos(e.Path()); ok {
					p = up
				}
			}
		}
		path := cuePath(e.Path())
		if pathOverride != "" {
			path = pathOverride
		}
		if path != "" {
			msg = path + ": " + msg
		}
		pos := c.pos(p)
		if pos == "" {
			pos = dir
		}
		if ep := e.Path(); len(ep) == 3 && ep[0] == "workflows" && ep[2] == "id" && strings.HasPrefix(format, "conflicting values") {
			key := ep[1]
			if unq, err := strconv.Unquote(key); err == nil {
				key = unq
			}
			msg = fmt.Sprintf("workflows.%s.id: a workflow's id is its key under workflows (%q), so it cannot be set to another (ids are unique by construction)", cuePathLabel(key), key)
			format = ""
		}
		if strings.HasPrefix(format, "conflicting values") {
			// Say where the other side of the conflict is, too.
			var also []string
			seen := map[string]bool{pos: true}
			for _, q := range ps {
				if q.IsValid() && !c.inSchema(q) {
					if s := c.pos(q); !seen[s] {
						seen[s] = true
						also = append(also, s)
					}
				}
			}
			if len(also) > 0 {
				msg += " (also at " + strings.Join(also, ", ") + ")"
			}
		}
		c.errorf(pos, "%s", msg)
	}
}

// leadingPos matches the "file.cue:line:col: " a wrapped CUE message may
// start with.
var leadingPos = regexp.MustCompile(`^\S+\.cue:\d+:\d+: `)

// importFailed reports an import that cannot be resolved, with CUE's
// reason (which names the package) and what celos can import offline.
func (c *compiler) importFailed(e cueerrors.Error, ps []token.Pos, dir string) {
	reason := ""
	if u := errors.Unwrap(e); u != nil {
		if ce, ok := u.(cueerrors.Error); ok {
			f, a := ce.Msg()
			reason = fmt.Sprintf(f, a...)
			ps = append(ps, ce.Position())
			ps = append(ps, ce.InputPositions()...)
		} else {
			reason = u.Error()
		}
	}
	if reason == "" {
		// Some causes are wrapped without a message of their own.
		reason = strings.TrimPrefix(e.Error(), "import failed")
		reason = strings.TrimPrefix(reason, ": ")
		reason = strings.TrimPrefix(reason, "local: ")
		if m := leadingPos.FindString(reason); m != "" {
			reason = reason[len(m):]
		}
	}
	msg := "import failed"
	if reason != "" {
		msg += ": " + reason
	}
	if reason == "" || strings.Contains(reason, "cannot find") {
		msg += " (celos loads a project offline: it may import the CUE standard library, " + SchemaImportPath + " and packages vendored under cue.mod/pkg)"
	}
	p, _ := c.userPos(ps)
	pos := c.pos(p)
	if pos == "" {
		pos = dir
	}
	c.errorf(pos, "%s", msg)
}

// enclosingUserPos is set while validating: it finds the position of the
// nearest enclosing value of path that the project wrote.
func (c *compiler) enclosingUserPos(path []string) (token.Pos, bool) {
	if c.root == nil {
		return token.NoPos, false
	}
	sels := path
	if len(sels) > 0 && sels[0] == "#Project" {
		sels = sels[1:]
	}
	for n := len(sels) - 1; n >= 0; n-- {
		v := c.root.LookupPath(errorPath(sels[:n]))
		if n == 0 {
			v = *c.root
		}
		if p, ok := c.userPos(valuePositions(v)); ok {
			return p, true
		}
	}
	return token.NoPos, false
}

// scanMissing looks for required fields that the project left out and that
// CUE reports only inside the schema: a workflow's schedule, trigger or
// externalService, a nested trigger, a `type`. It reports each at the
// nearest value the project wrote and says whether it found any.
func (c *compiler) scanMissing(wfs cue.Value) bool {
	found := false
	missing := func(parent cue.Value, path string) {
		found = true
		c.errorf(c.valuePos(parent), "%s: missing required field", path)
	}
	written := func(v cue.Value) bool {
		_, ok := c.userPos(valuePositions(v))
		return v.Exists() && ok
	}
	var node func(parent, v cue.Value, path string, kind string)
	node = func(parent, v cue.Value, path string, kind string) {
		if !written(v) {
			missing(parent, path)
			return
		}
		t := v.LookupPath(cue.ParsePath("type"))
		typ, err := t.String()
		if err != nil {
			if t.Err() == nil || !written(t) {
				// Absent, or left open; an invalid type the project
				// wrote is CUE's to report.
				missing(v, path+".type")
			}
			return
		}
		if kind != "trigger" {
			return
		}
		switch typ {
		case TriggerAnd, TriggerOr:
			list := v.LookupPath(cue.ParsePath("triggers"))
			if it, err := list.List(); err == nil {
				for i := 0; it.Next(); i++ {
					node(v, it.Value(), fmt.Sprintf("%s.triggers.%d", path, i), kind)
				}
			}
		case TriggerNot, TriggerOffset:
			node(v, v.LookupPath(cue.ParsePath("trigger")), path+".trigger", kind)
		}
	}
	it, err := wfs.Fields()
	if err != nil {
		return false
	}
	for it.Next() {
		w := it.Value()
		label := "workflows." + it.Selector().String()
		for _, f := range []string{"schedule", "trigger", "externalService"} {
			node(w, w.LookupPath(cue.MakePath(cue.Str(f))), label+"."+f, f)
		}
	}
	return found
}

// fieldUserPos is the position of the value at path itself, if the
// project wrote it.
func (c *compiler) fieldUserPos(path []string) (token.Pos, bool) {
	if c.root == nil || len(path) == 0 {
		return token.NoPos, false
	}
	v := c.root.LookupPath(errorPath(path))
	if !v.Exists() {
		return token.NoPos, false
	}
	return c.userPos(valuePositions(v))
}

// errorPath turns the path of a CUE error back into a cue.Path: list
// indices are elements such as "1", which cue.ParsePath would read as a
// field name.
func errorPath(elems []string) cue.Path {
	var sels []cue.Selector
	for _, e := range elems {
		if n, err := strconv.Atoi(e); err == nil && n >= 0 && strconv.Itoa(n) == e {
			sels = append(sels, cue.Index(n))
			continue
		}
		p := cue.ParsePath(e)
		if p.Err() != nil {
			return p
		}
		sels = append(sels, p.Selectors()...)
	}
	return cue.MakePath(sels...)
}

// cuePath renders an error path without the #Project it was checked against.
func cuePath(path []string) string {
	if len(path) > 0 && path[0] == "#Project" {
		path = path[1:]
	}
	return strings.Join(path, ".")
}

func disjunctionCount(format string, args []any) (int, bool) {
	if format != "%d errors in empty disjunction:" || len(args) != 1 {
		return 0, false
	}
	n, ok := args[0].(int)
	return n, ok && n > 0
}

// summariseDisjunction turns the errors of the alternatives of a failed
// disjunction into one message. When every alternative is a literal the
// value conflicts with (a tag), it lists them; otherwise it keeps the
// errors that say more than "conflicting values 1 and 0" (the conflict with
// a default), such as a bound or a type.
func summariseDisjunction(children []cueerrors.Error) string {
	type conflict struct{ a, b string }
	var conflicts []conflict
	var others []string
	for _, ch := range children {
		format, args := ch.Msg()
		if strings.HasPrefix(format, "conflicting values %s and %s") && len(args) >= 2 {
			a, b := fmt.Sprint(args[0]), fmt.Sprint(args[1])
			if isLiteral(a) && isLiteral(b) {
				conflicts = append(conflicts, conflict{a, b})
				continue
			}
		}
		others = append(others, fmt.Sprintf(format, args...))
	}
	if len(others) > 0 {
		return strings.Join(others, "; ")
	}
	// Every alternative is a literal: find the value they all conflict with.
	if len(conflicts) > 0 {
		for _, v := range []string{conflicts[0].a, conflicts[0].b} {
			var alts []string
			for _, cf := range conflicts {
				switch v {
				case cf.a:
					alts = append(alts, cf.b)
				case cf.b:
					alts = append(alts, cf.a)
				}
			}
			if len(alts) == len(conflicts) {
				if len(alts) == 1 {
					return fmt.Sprintf("%s is not allowed (want %s)", v, alts[0])
				}
				return fmt.Sprintf("%s is not one of %s", v, strings.Join(alts, ", "))
			}
		}
	}
	var all []string
	for _, ch := range children {
		format, args := ch.Msg()
		all = append(all, fmt.Sprintf(format, args...))
	}
	return strings.Join(all, "; ")
}

// isLiteral reports whether a formatted CUE value is a concrete scalar.
func isLiteral(s string) bool {
	if s == "" {
		return false
	}
	switch s {
	case "true", "false", "null":
		return true
	}
	if s[0] == '"' || s[0] == '\'' {
		return true
	}
	if s[0] == '-' {
		s = s[1:]
	}
	return s != "" && s[0] >= '0' && s[0] <= '9'
}
