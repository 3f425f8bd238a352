package celosjs

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cuelang.org/go/cue/format"

	"github.com/celos-go/celos/schema"
)

// GenOptions parameterise Generate.
type GenOptions struct {
	// Package is the CUE package name of the generated files.
	Package string
	// Project is the project name written in project.cue ("" = none: the
	// package name is the project name).
	Project string
	// Rel shortens a JavaScript path for comments (nil: the base name).
	Rel func(path string) string
}

// ProjectFile is the name of the generated file that declares the
// package, the project and `workflows: celos.#Workflows`.
const ProjectFile = "project.cue"

// Generate writes the CUE package for the evaluated files: project.cue,
// and one NAME.cue per JavaScript file NAME.js that defined workflows. It
// returns file name → content, every file gofmt'ed by CUE's formatter.
func Generate(res *Result, opt GenOptions) (map[string][]byte, error) {
	if opt.Rel == nil {
		opt.Rel = filepath.Base
	}
	out := map[string][]byte{}
	var b strings.Builder
	fmt.Fprintf(&b, "// Package %s holds workflows converted from Celos JavaScript by\n", opt.Package)
	b.WriteString("// `celos import-js`: each NAME.cue comes from the file NAME.js, and\n")
	b.WriteString("// `celos import-js --check` proves that they define the same workflows.\n")
	fmt.Fprintf(&b, "package %s\n\nimport \"celos.dev/celos\"\n\n", opt.Package)
	if opt.Project != "" {
		fmt.Fprintf(&b, "// project is where `celos deploy` puts the project.\nproject: %s\n\n", quote(opt.Project))
	}
	b.WriteString("// Every field under workflows is a workflow, named by its key.\nworkflows: celos.#Workflows\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("format %s: %v", ProjectFile, err)
	}
	out[ProjectFile] = src
	for _, f := range res.Files {
		if f.Err != nil || len(f.Workflows) == 0 {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path)) + ".cue"
		for i := 2; out[name] != nil || name == ProjectFile; i++ {
			name = fmt.Sprintf("%s_%d.cue", strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path)), i)
		}
		text := genFile(f, opt)
		src, err := format.Source([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("format the CUE converted from %s: %v\n%s", f.Path, err, text)
		}
		out[name] = src
	}
	return out, nil
}

// TODOs lists what Generate left as TODO: each property of a property
// function that does not map onto slot-time tokens, as an *Error at the
// function.
func (r *Result) TODOs() []error {
	var out []error
	for _, w := range r.Workflows() {
		if w.Props == nil || w.Props.Err != nil {
			continue
		}
		for _, k := range sortedKeys(w.Props.TODO) {
			out = append(out, &Error{w.Props.Pos, fmt.Sprintf("TODO: workflow %q: property %q of the property function is not converted: %s", w.ID, k, w.Props.TODO[k])})
		}
	}
	return out
}

func genFile(f *File, opt GenOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Converted by `celos import-js` from the Celos JavaScript file %s", opt.Rel(f.Path))
	if len(f.Defaults) > 0 {
		var ds []string
		for _, d := range f.Defaults {
			ds = append(ds, opt.Rel(d))
		}
		fmt.Fprintf(&b, ",\n// with the defaults file %s", strings.Join(ds, ", "))
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "package %s\n\nimport \"celos.dev/celos\"\n", opt.Package)
	done := map[*Workflow]bool{}
	for _, w := range f.Workflows {
		if done[w] {
			continue
		}
		var group []*Workflow
		for _, o := range f.Workflows {
			if !done[o] && o.Pos == w.Pos && o.Props == nil {
				group = append(group, o)
			}
		}
		if len(group) > 1 {
			if text, ok := genGroup(group, opt); ok {
				b.WriteString("\n" + text)
				for _, g := range group {
					done[g] = true
				}
				continue
			}
		}
		done[w] = true
		b.WriteString("\n")
		b.WriteString(origin([]*Workflow{w}, opt))
		fmt.Fprintf(&b, "workflows: %s: %s\n", label(w.ID), body(w, opt, quote))
	}
	return b.String()
}

// origin is the comment saying where workflows came from.
func origin(ws []*Workflow, opt GenOptions) string {
	w := ws[0]
	rel := func(p Pos) string { return fmt.Sprintf("%s:%d", opt.Rel(p.File), p.Line) }
	if len(ws) == 1 {
		if w.Helper != "" {
			return fmt.Sprintf("// From %s(...) at %s, called at %s.\n", w.Helper, rel(w.Pos), rel(w.CalledAt))
		}
		return fmt.Sprintf("// From %s.\n", rel(w.Pos))
	}
	if w.Helper != "" {
		var calls []string
		for _, o := range ws {
			calls = append(calls, strconv.Itoa(o.CalledAt.Line))
		}
		return fmt.Sprintf("// From %s(%s) at %s, called at %s:%s.\n", w.Helper, strings.Join(w.HelperParams, ", "), rel(w.Pos), opt.Rel(ws[0].CalledAt.File), strings.Join(calls, ", "))
	}
	return fmt.Sprintf("// From %s, run %d times.\n", rel(w.Pos), len(ws))
}

var identRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

var keywords = map[string]bool{"package": true, "import": true, "for": true, "in": true, "if": true, "let": true, "true": true, "false": true, "null": true, "func": true}

// genGroup writes workflows defined by one call site as a comprehension
// over the part of their ids that differs, when every other difference
// between them is that part too.
func genGroup(ws []*Workflow, opt GenOptions) (string, bool) {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	params, ok := idParams(ids)
	if !ok {
		return "", false
	}
	v := "name"
	if len(ws[0].HelperParams) == 1 && identRE.MatchString(ws[0].HelperParams[0]) && !keywords[ws[0].HelperParams[0]] && ws[0].HelperParams[0] != "celos" && ws[0].HelperParams[0] != "workflows" {
		v = ws[0].HelperParams[0]
	}
	var text string
	for i, w := range ws {
		p := params[i]
		q := func(s string) string {
			parts := strings.Split(s, p)
			for j := range parts {
				parts[j] = escape(parts[j])
			}
			return `"` + strings.Join(parts, `\(`+v+`)`) + `"`
		}
		t := fmt.Sprintf("workflows: %s: %s\n", q(w.ID), body(w, opt, q))
		if i == 0 {
			text = t
		} else if t != text {
			return "", false
		}
	}
	var list []string
	for _, p := range params {
		list = append(list, quote(p))
	}
	return origin(ws, opt) + fmt.Sprintf("for %s in [%s] {\n%s}\n", v, strings.Join(list, ", "), text), true
}

// idParams finds the part of each id that differs: what is left between
// the ids' common prefix and suffix, both cut back to a separator so that
// a word is not split. The parts must be distinct and not empty.
func idParams(ids []string) ([]string, bool) {
	pre, suf := ids[0], ids[0]
	for _, id := range ids[1:] {
		for !strings.HasPrefix(id, pre) {
			pre = pre[:len(pre)-1]
		}
		for !strings.HasSuffix(id, suf) {
			suf = suf[1:]
		}
	}
	isSep := func(c byte) bool { return c == '-' || c == '_' || c == '.' }
	for len(pre) > 0 && !isSep(pre[len(pre)-1]) {
		pre = pre[:len(pre)-1]
	}
	for len(suf) > 0 && !isSep(suf[0]) {
		suf = suf[1:]
	}
	seen := map[string]bool{}
	out := make([]string, len(ids))
	for i, id := range ids {
		if len(pre)+len(suf) >= len(id) {
			return nil, false
		}
		p := id[len(pre) : len(id)-len(suf)]
		if seen[p] {
			return nil, false
		}
		seen[p] = true
		out[i] = p
	}
	return out, true
}

// body writes a workflow's struct, its strings written by q.
func body(w *Workflow, opt GenOptions, q func(string) string) string {
	var b strings.Builder
	b.WriteString("{\n")
	fmt.Fprintf(&b, "schedule: %s\n", genSchedule(w.Schedule, q))
	fmt.Fprintf(&b, "trigger: %s\n", genTrigger(w.Trigger, q))
	if w.SchedulingStrategy.Concurrency != 1 {
		fmt.Fprintf(&b, "schedulingStrategy: celos.#Serial & {concurrency: %d}\n", w.SchedulingStrategy.Concurrency)
	}
	b.WriteString("externalService: celos.#Oozie & {\n")
	if w.ExternalService.URL != "" {
		fmt.Fprintf(&b, "url: %s\n", q(w.ExternalService.URL))
	}
	b.WriteString("properties: {\n")
	for _, k := range sortedKeys(w.ExternalService.Properties) {
		fmt.Fprintf(&b, "%s: %s\n", label(k), q(w.ExternalService.Properties[k]))
	}
	if p := w.Props; p != nil {
		rel := fmt.Sprintf("%s:%d", opt.Rel(p.Pos.File), p.Pos.Line)
		switch {
		case p.Err != nil:
			fmt.Fprintf(&b, "// TODO(celos import-js): the property function at %s could not be evaluated,\n// so no property is converted: %s\n", rel, oneLine(p.Err.Error()))
		default:
			if len(w.ExternalService.Properties) > 0 {
				fmt.Fprintf(&b, "// The properties above are computed by the property function at %s;\n// they were converted by evaluating it at several slot times.\n", rel)
			}
			for _, k := range sortedKeys(p.TODO) {
				fmt.Fprintf(&b, "// TODO(celos import-js): %s, computed by the property function at %s,\n// is not converted: %s\n", quote(k), rel, oneLine(p.TODO[k]))
			}
		}
	}
	b.WriteString("}\n}\n")
	if !w.StartTime.Equal(schema.DefaultStartTime) {
		fmt.Fprintf(&b, "startTime: %s\n", q(w.StartTime.UTC().Format(time.RFC3339Nano)))
	}
	if w.MaxRetryCount != 0 {
		fmt.Fprintf(&b, "maxRetryCount: %d\n", w.MaxRetryCount)
	}
	if w.WaitTimeoutSeconds != schema.NeverTimeout {
		fmt.Fprintf(&b, "waitTimeoutSeconds: %d\n", w.WaitTimeoutSeconds)
	}
	if w.URL != "" {
		fmt.Fprintf(&b, "url: %s\n", q(w.URL))
	}
	if len(w.Contacts) > 0 {
		b.WriteString("contacts: [\n")
		for _, c := range w.Contacts {
			var fs []string
			if c.Name != "" {
				fs = append(fs, "name: "+q(c.Name))
			}
			if c.Email != "" {
				fs = append(fs, "email: "+q(c.Email))
			}
			fmt.Fprintf(&b, "{%s},\n", strings.Join(fs, ", "))
		}
		b.WriteString("]\n")
	}
	b.WriteString("}")
	return b.String()
}

func genSchedule(s schema.Schedule, q func(string) string) string {
	if s.Type == schema.ScheduleDependent {
		return fmt.Sprintf("celos.#Dependent & {workflow: %s}", q(s.Workflow))
	}
	if s.TimeZone == "" || s.TimeZone == "UTC" {
		switch s.Cron {
		case "0 0 * * * ?":
			return "celos.#Hourly"
		case "0 * * * * ?":
			return "celos.#Minutely"
		}
		return fmt.Sprintf("celos.#Cron & {cron: %s}", q(s.Cron))
	}
	return fmt.Sprintf("celos.#Cron & {cron: %s, timeZone: %s}", q(s.Cron), q(s.TimeZone))
}

func genTrigger(t schema.Trigger, q func(string) string) string {
	switch t.Type {
	case schema.TriggerAlways:
		return "celos.#Always"
	case schema.TriggerHDFSCheck:
		if t.FS != "" {
			return fmt.Sprintf("celos.#HdfsCheck & {path: %s, fs: %s}", q(t.Path), q(t.FS))
		}
		return fmt.Sprintf("celos.#HdfsCheck & {path: %s}", q(t.Path))
	case schema.TriggerSuccess:
		return fmt.Sprintf("celos.#Success & {workflow: %s}", q(t.Workflow))
	case schema.TriggerAnd, schema.TriggerOr:
		name := "#And"
		if t.Type == schema.TriggerOr {
			name = "#Or"
		}
		if len(t.Triggers) == 0 {
			return fmt.Sprintf("celos.%s & {triggers: []}", name)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "celos.%s & {triggers: [\n", name)
		for _, c := range t.Triggers {
			fmt.Fprintf(&b, "%s,\n", genTrigger(c, q))
		}
		b.WriteString("]}")
		return b.String()
	case schema.TriggerNot:
		return fmt.Sprintf("celos.#Not & {trigger: %s}", genTrigger(*t.Trigger, q))
	case schema.TriggerOffset:
		return fmt.Sprintf("celos.#Offset & {seconds: %d, trigger: %s}", t.Seconds, genTrigger(*t.Trigger, q))
	case schema.TriggerDelay:
		return fmt.Sprintf("celos.#Delay & {seconds: %d}", t.Seconds)
	}
	panic("celosjs: unknown trigger type " + t.Type)
}

// label writes a field label: an identifier when it can be one.
func label(s string) string {
	if identRE.MatchString(s) && !keywords[s] {
		return s
	}
	return quote(s)
}

// quote writes a CUE string literal.
func quote(s string) string { return `"` + escape(s) + `"` }

// escape escapes s for a CUE double-quoted string (a backslash, so
// that "\(" is never an interpolation, a quote, control characters).
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
