package celosjs

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/schema/workflow"
)

//go:embed prelude.js
var prelude string

const preludeName = "celos-import-js-prelude.js"

// DefaultTimeout bounds the evaluation of one file (with the defaults files
// it imports), and separately each call of a property function.
const DefaultTimeout = 5 * time.Second

// Options parameterise Evaluate.
type Options struct {
	// DefaultsDir is Celos's defaults directory: celos.importDefaults("x")
	// evaluates DefaultsDir/x.js. Empty: importDefaults is an error.
	DefaultsDir string
	// Timeout bounds the evaluation of one file; 0 means DefaultTimeout.
	Timeout time.Duration
	// MemoryLimit stops an evaluation when the process's heap grows past
	// it (bytes); 0 means DefaultMemoryLimit.
	MemoryLimit uint64
	// Abandon is called (from another goroutine) with the file's error
	// when an evaluation past its time or memory limit does not stop
	// within StopGrace of being interrupted: it is in a built-in function
	// that cannot be interrupted (Array.prototype.fill over 500 million
	// elements, String.prototype.repeat, a generic indexOf over an object
	// of length 1e15), which would run on, and grow, without end.
	// Evaluate cannot return then; Abandon should end the process. Nil:
	// Evaluate waits for the built-in function to return.
	Abandon func(err error)
}

// DefaultMemoryLimit is the heap size at which an evaluation is stopped.
const DefaultMemoryLimit = 1 << 30

// Pos is a position in a JavaScript file.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is a problem with a JavaScript file, at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// File is one evaluated JavaScript workflow file.
type File struct {
	// Path is the file as it was named.
	Path string
	// Workflows are the workflows the file defined, in definition order.
	Workflows []*Workflow
	// Defaults are the defaults files it imported, in order (paths).
	Defaults []string
	// Err is why the file could not be evaluated (an *Error); its
	// workflows are then not converted.
	Err error
	// Vars are the defaults-file variables CELOS_DEFAULT_HDFS,
	// CELOS_DEFAULT_OOZIE and CELOS_DEFAULT_OOZIE_PROPERTIES as the file
	// left them (nil: undefined, or not of the type Celos used).
	Vars DefaultVars

	defined int
}

// DefinesNothing reports whether the file evaluated without defining a
// workflow (it may hold only helpers, or be a mistake).
func (f *File) DefinesNothing() bool { return f.Err == nil && f.defined == 0 }

// Workflow is one workflow as the JavaScript defined it: the compiled
// form celos would run, plus where it came from.
type Workflow struct {
	// Workflow is the definition, every default explicit. When Props is
	// not nil (a property function), ExternalService.Properties holds
	// what could be converted to slot-time tokens.
	workflow.Workflow
	// Pos is where celos.defineWorkflow was called.
	Pos Pos
	// Helper is the JavaScript function that called celos.defineWorkflow
	// ("" at the top level), and HelperParams its parameter names.
	Helper       string
	HelperParams []string
	// CalledAt is where Helper was called from (zero without a helper).
	CalledAt Pos
	// Props is the property function of the Oozie service, if it has one.
	Props *PropsFunc
}

// PropsFunc is a property function: function(slotID) → properties.
type PropsFunc struct {
	// Pos is where the function was passed to celos.oozieExternalService.
	Pos Pos
	// TODO maps each property that does not map onto slot-time tokens to
	// why, with sample values; those properties are absent from the
	// converted Properties.
	TODO map[string]string
	// Err is why the function could not be sampled at all.
	Err error

	call func(t time.Time) (map[string]string, error)
}

// At evaluates the property function for a slot time as Celos did at
// submit time (defaults merged, time tokens not yet substituted).
func (p *PropsFunc) At(t time.Time) (map[string]string, error) { return p.call(t) }

// Result is the outcome of evaluating a set of files.
type Result struct {
	Files []*File
	// Problems are the errors found across files: a file that failed, a
	// workflow that could not be converted, a duplicate id.
	Problems []error
}

// Workflows returns every converted workflow of every file, in file order.
func (r *Result) Workflows() []*Workflow {
	var out []*Workflow
	for _, f := range r.Files {
		out = append(out, f.Workflows...)
	}
	return out
}

// Evaluate evaluates each file in a fresh JavaScript scope (as Celos did),
// in the order given. A file that fails (syntax error, thrown error, time
// limit) is reported in its File.Err and in Problems; the others still
// convert. Two files defining one id: the later definition is an error.
func Evaluate(paths []string, opt Options) *Result {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.MemoryLimit == 0 {
		opt.MemoryLimit = DefaultMemoryLimit
	}
	res := &Result{}
	seen := map[string]Pos{}
	for _, p := range paths {
		f := evalFile(p, opt)
		if f.Err != nil {
			res.Problems = append(res.Problems, f.Err)
			f.Workflows = nil
		}
		f.defined = len(f.Workflows)
		kept := f.Workflows[:0]
		for _, w := range f.Workflows {
			if first, dup := seen[w.ID]; dup {
				res.Problems = append(res.Problems, &Error{w.Pos, fmt.Sprintf("workflow %q is defined again (first at %s); this definition is not converted", w.ID, first)})
				continue
			}
			seen[w.ID] = w.Pos
			kept = append(kept, w)
		}
		f.Workflows = kept
		for _, w := range f.Workflows {
			if w.Props != nil && w.Props.Err != nil {
				res.Problems = append(res.Problems, w.Props.Err)
			}
		}
		res.Files = append(res.Files, f)
	}
	return res
}

// evaluator holds the state of one file's evaluation.
type evaluator struct {
	vm   *goja.Runtime
	file *File
	opt  Options
	// pending services are resolved once the file has run, because Celos
	// read CELOS_DEFAULT_OOZIE_PROPERTIES and the property object at
	// submit time.
	defs []*pendingWorkflow
	// byID are defs by workflow id (a second definition is an error,
	// found without a pass over defs for every definition).
	byID map[string]*pendingWorkflow
	// importing are the defaults files being imported, outermost first.
	importing []string
}

// DefaultVars are the values of Celos's defaults-file variables.
type DefaultVars struct {
	HDFS, Oozie     *string
	OozieProperties map[string]string
}

type pendingWorkflow struct {
	wf  *Workflow
	svc *service
}

type schedule struct{ s workflow.Schedule }
type trigger struct {
	t workflow.Trigger
	// depth and nodes measure the tree t: its levels, its triggers.
	depth, nodes int
}
type strategy struct{ s workflow.Strategy }
type service struct {
	url   string
	props goja.Value
	pos   Pos
}

func evalFile(path string, opt Options) (f *File) {
	f = &File{Path: path}
	src, err := readSource(path)
	if err != nil {
		f.Err = &Error{Pos{File: path}, "read workflow file: " + strings.TrimPrefix(err.Error(), path+": ")}
		return f
	}
	vm := goja.New()
	// An endless recursion is a clear error at once, not a stack that
	// grows until the time or memory limit.
	vm.SetMaxCallStackSize(maxCallDepth)
	e := &evaluator{vm: vm, file: f, opt: opt, byID: map[string]*pendingWorkflow{}}
	if err := vm.Set("__celos", e.api()); err != nil {
		f.Err = &Error{Pos{File: path}, fmt.Sprintf("set up the Celos API: %v", err)}
		return f
	}
	if _, err := vm.RunScript(preludeName, prelude); err != nil {
		f.Err = &Error{Pos{File: path}, fmt.Sprintf("set up the Celos API: %v", err)}
		return f
	}
	if err := e.boundAllocations(); err != nil {
		f.Err = &Error{Pos{File: path}, fmt.Sprintf("set up the Celos API: %v", err)}
		return f
	}
	if err := e.run(path, string(src)); err != nil {
		f.Err = err
		return f
	}
	// Reading what the file left runs JavaScript too (getters, Proxy
	// traps): under the time limit, its errors reported as the file's.
	err = e.guard(path, func() error {
		return e.inVM(func() error {
			if v, ok := exportString(e.global("CELOS_DEFAULT_HDFS")); ok {
				f.Vars.HDFS = &v
			}
			if v, ok := exportString(e.global("CELOS_DEFAULT_OOZIE")); ok {
				f.Vars.Oozie = &v
			}
			if d := e.global("CELOS_DEFAULT_OOZIE_PROPERTIES"); d != nil {
				f.Vars.OozieProperties, _ = e.properties(d, "")
			}
			for _, d := range e.defs {
				if _, fn := goja.AssertFunction(d.svc.props); !fn {
					if err := e.resolve(d); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		f.Err = err
		return f
	}
	// Property functions are called each under its own time limit.
	for _, d := range e.defs {
		if _, fn := goja.AssertFunction(d.svc.props); fn {
			if err := e.resolve(d); err != nil {
				f.Err = err
				return f
			}
		}
		f.Workflows = append(f.Workflows, d.wf)
	}
	return f
}

// inVM runs fn, Go code that reads JavaScript values, as a call into the
// VM: a getter or Proxy trap that throws, or is interrupted by the time
// or memory limit, makes it return that error instead of panicking.
func (e *evaluator) inVM(fn func() error) error {
	var ferr error
	call, _ := goja.AssertFunction(e.vm.ToValue(func(goja.FunctionCall) goja.Value {
		ferr = fn()
		return goja.Undefined()
	}))
	if _, err := call(goja.Undefined()); err != nil {
		return err
	}
	return ferr
}

// run compiles and runs src under the limits (the parser recurses as
// deeply as the source nests: the stack's bound applies to it too).
func (e *evaluator) run(name, src string) error {
	return e.guard(name, func() error {
		prg, err := compileJS(name, src)
		if err != nil {
			return err
		}
		_, err = e.vm.RunProgram(prg)
		return err
	})
}

// maxCallDepth bounds how deeply JavaScript calls nest.
const maxCallDepth = 10000

var (
	errTimeout = errors.New("time limit")
	errMemory  = errors.New("memory limit")
	errStack   = errors.New("stack limit")
)

// compileJS parses and compiles a file; a syntax error is an *Error at
// its first problem.
func compileJS(name, src string) (*goja.Program, error) {
	ast, err := parser.ParseFile(nil, name, src, 0)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	prg, err := goja.CompileAST(ast, false)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	return prg, nil
}

// syntaxError converts goja's compile errors.
func syntaxError(name string, err error) error {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		p := list[0].Position
		return &Error{Pos{name, p.Line, p.Column}, "syntax error: " + list[0].Message}
	}
	var cse *goja.CompilerSyntaxError
	if errors.As(err, &cse) {
		pos := Pos{File: name}
		if cse.File != nil {
			p := cse.File.Position(cse.Offset)
			pos.Line, pos.Col = p.Line, p.Column
		}
		return &Error{pos, "syntax error: " + cse.Message}
	}
	return &Error{Pos{File: name}, "syntax error: " + err.Error()}
}

// jsError converts an error of running JavaScript into an *Error at the
// innermost position in a user file.
func jsError(name string, err error, opt Options) error {
	if err == nil {
		return nil
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		reason, _ := ie.Value().(error)
		return &Error{userPos(ie.Stack(), name), limitMessage(reason, opt) + " (an endless loop?)"}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{userPos(so.Stack(), name), fmt.Sprintf("RangeError: Maximum call stack size exceeded (calls nested deeper than %d: an endless recursion?)", maxCallDepth)}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := ex.Value().String()
		if o, ok := ex.Value().(*goja.Object); ok {
			if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
				n := o.Get("name")
				msg = m.String()
				if n != nil && !goja.IsUndefined(n) && n.String() != "Error" && n.String() != "GoError" {
					msg = n.String() + ": " + msg
				}
			}
		} else {
			msg = "thrown: " + msg
		}
		return &Error{userPos(ex.Stack(), name), msg}
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	return &Error{Pos{File: name}, err.Error()}
}

// userPos is the innermost stack frame in a user file (not the prelude).
func userPos(stack []goja.StackFrame, fallback string) Pos {
	for _, fr := range stack {
		if fr.SrcName() == "" || fr.SrcName() == preludeName || fr.SrcName() == "<native>" {
			continue
		}
		p := fr.Position()
		if p.Line == 0 {
			continue
		}
		return Pos{fr.SrcName(), p.Line, p.Column}
	}
	return Pos{File: fallback}
}

// callSite is the innermost user position of the running call, the name
// of the function containing it ("" at top level) and that function's
// value.
func (e *evaluator) callSite() (Pos, string) {
	sites := e.userFrames()
	if len(sites) == 0 {
		return Pos{File: e.file.Path}, ""
	}
	return sites[0].pos, sites[0].fn
}

type frame struct {
	pos Pos
	fn  string
}

// userFrames are the frames of the running call in user files, innermost
// first; fn is "" for top-level code.
func (e *evaluator) userFrames() []frame {
	var out []frame
	for _, fr := range e.vm.CaptureCallStack(0, nil) {
		if fr.SrcName() == "" || fr.SrcName() == preludeName || fr.SrcName() == "<native>" {
			continue
		}
		p := fr.Position()
		if p.Line == 0 {
			continue
		}
		fn := fr.FuncName()
		if fn == "<anonymous>" || fn == "<eval>" {
			fn = ""
		}
		out = append(out, frame{Pos{fr.SrcName(), p.Line, p.Column}, fn})
	}
	return out
}

func (e *evaluator) importDefaults(c goja.FunctionCall) goja.Value {
	name := e.str(c.Argument(0), "celos.importDefaults", "the defaults name")
	if e.opt.DefaultsDir == "" {
		e.throw("celos.importDefaults(%q): no defaults directory given (celos import-js --defaults DIR)", name)
	}
	if name == "" || filepath.IsAbs(name) || !filepath.IsLocal(name) {
		e.throw("celos.importDefaults(%q): not a file of the defaults directory (a name such as \"common\", without \"..\" or a leading /)", name)
	}
	path := filepath.Join(e.opt.DefaultsDir, name+".js")
	for i, p := range e.importing {
		if p == path {
			e.throw("celos.importDefaults(%q): an import cycle: %s imports %s", name, strings.Join(e.importing[i:], " imports "), path)
		}
	}
	e.importing = append(e.importing, path)
	defer func() { e.importing = e.importing[:len(e.importing)-1] }()
	src, err := readSource(path)
	if err != nil {
		e.throw("celos.importDefaults(%q): %v", name, err)
	}
	prg, err := compileJS(path, string(src))
	if err != nil {
		// Report it where it is: in the defaults file.
		panic(e.vm.NewGoError(err))
	}
	e.file.Defaults = append(e.file.Defaults, path)
	if _, err := e.vm.RunProgram(prg); err != nil {
		panic(err)
	}
	return goja.Undefined()
}

func (e *evaluator) defineWorkflow(c goja.FunctionCall) goja.Value {
	frames := e.userFrames()
	pos, helper, calledAt := Pos{File: e.file.Path}, "", Pos{}
	if len(frames) > 0 {
		pos, helper = frames[0].pos, frames[0].fn
	}
	if helper != "" && len(frames) > 1 {
		calledAt = frames[1].pos
	}
	obj, ok := c.Argument(0).(*goja.Object)
	if !ok || obj == nil {
		e.throw("celos.defineWorkflow: the argument must be an object, not %s", describe(c.Argument(0)))
	}
	idv := obj.Get("id")
	id, ok := exportString(idv)
	if !ok {
		e.throw("Workflow ID must be a string: %s", describe(idv))
	}
	if !validID(id) {
		e.throw("workflow id %q is not a celos id (letters, digits, '.', '_' and '-', at most 255 bytes)", id)
	}
	field := func(name string) goja.Value {
		v := obj.Get(name)
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			e.throw("celos.defineWorkflow(%q): %s is missing", id, name)
		}
		return v
	}
	w := &Workflow{Pos: pos, Helper: helper, CalledAt: calledAt}
	w.ID = id
	sch, ok := field("schedule").Export().(*schedule)
	if !ok {
		e.throw("celos.defineWorkflow(%q): schedule must be a schedule (celos.*Schedule(...)), not %s", id, describe(obj.Get("schedule")))
	}
	w.Schedule = sch.s
	w.Trigger = e.trigger(field("trigger"), fmt.Sprintf("celos.defineWorkflow(%q)", id), "trigger").t
	st, ok := field("schedulingStrategy").Export().(*strategy)
	if !ok {
		e.throw("celos.defineWorkflow(%q): schedulingStrategy must be celos.serialSchedulingStrategy(...), not %s", id, describe(obj.Get("schedulingStrategy")))
	}
	w.SchedulingStrategy = st.s
	svc, ok := field("externalService").Export().(*service)
	if !ok {
		e.throw("celos.defineWorkflow(%q): externalService must be celos.oozieExternalService(...), not %s", id, describe(obj.Get("externalService")))
	}
	w.StartTime = workflow.DefaultStartTime
	if v := obj.Get("startTime"); v != nil && v.ToBoolean() {
		s := e.str(v, fmt.Sprintf("celos.defineWorkflow(%q)", id), "startTime")
		t, err := parseISO(s)
		if err != nil {
			e.throw("celos.defineWorkflow(%q): startTime %q is not an ISO 8601 time: %v", id, s, err)
		}
		w.StartTime = t
	}
	if v := obj.Get("maxRetryCount"); v != nil && v.ToBoolean() {
		n := e.integer(v, fmt.Sprintf("celos.defineWorkflow(%q)", id), "maxRetryCount")
		if n < 0 || n > math.MaxInt32 {
			e.throw("celos.defineWorkflow(%q): maxRetryCount must be from 0 to %d, not %d", id, math.MaxInt32, n)
		}
		w.MaxRetryCount = int(n)
	}
	w.WaitTimeoutSeconds = workflow.NeverTimeout
	if v := obj.Get("waitTimeoutSeconds"); v != nil && !goja.IsUndefined(v) {
		n := e.integer(v, fmt.Sprintf("celos.defineWorkflow(%q)", id), "waitTimeoutSeconds")
		if n < 0 || n > workflow.NeverTimeout {
			e.throw("celos.defineWorkflow(%q): waitTimeoutSeconds must be from 0 to %d, not %d", id, workflow.NeverTimeout, n)
		}
		w.WaitTimeoutSeconds = n
	}
	if v := obj.Get("url"); v != nil && v.ToBoolean() {
		w.URL = e.str(v, fmt.Sprintf("celos.defineWorkflow(%q)", id), "url")
	}
	if v := obj.Get("contacts"); v != nil && v.ToBoolean() {
		arr := v.ToObject(e.vm)
		n := int(arr.Get("length").ToInteger())
		for i := 0; i < n; i++ {
			co := arr.Get(fmt.Sprint(i)).ToObject(e.vm)
			var ct workflow.Contact
			if nv := co.Get("name"); nv != nil && nv.ToBoolean() {
				ct.Name = nv.String()
			}
			if ev := co.Get("email"); ev != nil && ev.ToBoolean() {
				ct.Email = ev.String()
			}
			w.Contacts = append(w.Contacts, ct)
		}
	}
	if helper != "" {
		if fn, ok := goja.AssertFunction(e.vm.GlobalObject().Get(helper)); ok && fn != nil {
			w.HelperParams = paramNames(e.vm.GlobalObject().Get(helper).String())
		}
	}
	if d, dup := e.byID[id]; dup {
		first := d.wf.Pos.String()
		if d.wf.CalledAt.Line > 0 {
			first += ", called at " + d.wf.CalledAt.String()
		}
		e.throw("workflow %q is defined twice in this file (first at %s)", id, first)
	}
	d := &pendingWorkflow{wf: w, svc: svc}
	e.defs = append(e.defs, d)
	e.byID[id] = d
	return goja.Undefined()
}

// paramNames reads the parameter names of a function's source text.
func paramNames(src string) []string {
	open := strings.IndexByte(src, '(')
	end := strings.IndexByte(src, ')')
	if open < 0 || end < open {
		return nil
	}
	var out []string
	for _, p := range strings.Split(src[open+1:end], ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func exportString(v goja.Value) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.Export().(string)
	return s, ok
}

// parseISO reads the ISO 8601 forms Celos accepted ("2015-09-01T00:00Z",
// with seconds, milliseconds, an offset).
func parseISO(s string) (time.Time, error) {
	var first error
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15Z07:00", "2006-01-02Z07:00"} {
		t, err := time.Parse(layout, s)
		if err == nil {
			return t.UTC(), nil
		}
		if first == nil {
			first = err
		}
	}
	return time.Time{}, first
}

// resolve turns a workflow's service into its compiled form once the file
// has run: the properties object and CELOS_DEFAULT_OOZIE_PROPERTIES as
// they are at the end (Celos read them at submit time).
func (e *evaluator) resolve(d *pendingWorkflow) error {
	w, s := d.wf, d.svc
	w.ExternalService = workflow.ExternalService{Type: workflow.ServiceOozie, URL: s.url}
	if fn, ok := goja.AssertFunction(s.props); ok {
		id := w.ID
		w.Props = &PropsFunc{Pos: s.pos}
		w.Props.call = func(t time.Time) (map[string]string, error) {
			var props map[string]string
			err := e.guard(s.pos.File, func() error {
				return e.inVM(func() error {
					mk, _ := goja.AssertFunction(e.vm.GlobalObject().Get("__celosSlot"))
					sv, err := mk(goja.Undefined(), e.vm.ToValue(id), e.vm.ToValue(t.UnixMilli()))
					if err != nil {
						return err
					}
					out, err := fn(goja.Undefined(), sv)
					if err != nil {
						return err
					}
					if props, err = e.properties(out, fmt.Sprintf("the property function of %q", id)); err != nil {
						return &Error{s.pos, err.Error()}
					}
					return nil
				})
			})
			return props, err
		}
		return convertPropsFunc(w)
	}
	props, err := e.properties(s.props, fmt.Sprintf("the properties of %q", w.ID))
	if err != nil {
		return &Error{s.pos, err.Error()}
	}
	w.ExternalService.Properties = props
	return nil
}

// properties merges CELOS_DEFAULT_OOZIE_PROPERTIES and the user's
// properties as Celos did; every value must be a string.
func (e *evaluator) properties(user goja.Value, what string) (map[string]string, error) {
	out := map[string]string{}
	add := func(v goja.Value, whose string) error {
		o, ok := v.(*goja.Object)
		if !ok || o == nil {
			return fmt.Errorf("%s must be an object, not %s", whose, describe(v))
		}
		for _, k := range o.Keys() {
			pv := o.Get(k)
			if goja.IsUndefined(pv) {
				continue // JSON.stringify drops it, as Celos did
			}
			s, ok := exportString(pv)
			if !ok {
				return fmt.Errorf("%s: property %q must be a string, not %s (Celos would fail at submit time)", whose, k, describe(pv))
			}
			out[k] = s
		}
		return nil
	}
	if d := e.global("CELOS_DEFAULT_OOZIE_PROPERTIES"); d != nil {
		if err := add(d, "CELOS_DEFAULT_OOZIE_PROPERTIES"); err != nil {
			return nil, err
		}
	}
	if what == "" {
		return out, nil
	}
	if err := add(user, what); err != nil {
		return nil, err
	}
	return out, nil
}

// readSource reads a workflow or defaults file: a regular file (or a
// symbolic link to one) of at most MaxFileSize bytes. A named pipe or
// device is refused before it is opened, never waited on or read without
// end. Errors name the path.
func readSource(path string) ([]byte, error) {
	src, err := regfile.ReadFile(path, MaxFileSize)
	if err != nil {
		return nil, unwrapPath(err)
	}
	return src, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MaxFileSize bounds a workflow or defaults file (Celos's largest are a
// few hundred kilobytes).
const MaxFileSize = 16 << 20
