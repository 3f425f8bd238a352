package celosjs

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/scanner"
	"cuelang.org/go/cue/token"

	"github.com/celos-go/celos/schema/workflow"
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
	// Paths are quoted in comments: a newline in one would end the
	// comment, and the rest of the name would be CUE.
	rel := opt.Rel
	opt.Rel = func(p string) string { return commentSafe(rel(p)) }
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
	g := &generator{opt: opt, vars: sharedVars(res)}
	taken := map[string]bool{ProjectFile: true, DefaultsFile: true} // in lower case
	for _, f := range res.Files {
		if f.Err != nil || len(f.Workflows) == 0 {
			continue
		}
		name := cueFileName(f.Path, taken)
		text := g.file(f)
		src, err := format.Source([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("format the CUE converted from %s: %v\n%s", f.Path, err, text)
		}
		out[name] = src
		taken[strings.ToLower(name)] = true
	}
	if text := g.defaultsFile(); text != "" {
		src, err := format.Source([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("format %s: %v\n%s", DefaultsFile, err, text)
		}
		out[DefaultsFile] = src
	}
	return out, nil
}

// DefaultsFile is the name of the generated file that holds Celos's
// defaults-file variables as CUE values, when the workflows use them.
const DefaultsFile = "defaults.cue"

// The hidden fields of the defaults-file variables.
const (
	hdfsVar  = "_CELOS_DEFAULT_HDFS"
	oozieVar = "_CELOS_DEFAULT_OOZIE"
	propsVar = "_CELOS_DEFAULT_OOZIE_PROPERTIES"
)

// generator writes the files of one package.
type generator struct {
	opt GenOptions
	// explicit names the fields with defaults that body writes even at
	// their default value (for the members of a group).
	explicit map[string]bool
	vars     DefaultVars
	// used records which variables the workflows refer to.
	used map[string]bool
	// from lists the defaults files that set the variables.
	from []string
}

// sharedVars are the defaults-file variables that every converted file
// that defines them gives the same value (a variable that differs between
// files is not shared, and its values are written out in full).
func sharedVars(res *Result) DefaultVars {
	var v DefaultVars
	hdfsOK, oozieOK, propsOK := true, true, true
	for _, f := range res.Files {
		if f.Err != nil || len(f.Workflows) == 0 {
			continue
		}
		if f.Vars.HDFS != nil {
			if v.HDFS != nil && *v.HDFS != *f.Vars.HDFS {
				hdfsOK = false
			}
			v.HDFS = f.Vars.HDFS
		}
		if f.Vars.Oozie != nil {
			if v.Oozie != nil && *v.Oozie != *f.Vars.Oozie {
				oozieOK = false
			}
			v.Oozie = f.Vars.Oozie
		}
		if f.Vars.OozieProperties != nil {
			if v.OozieProperties != nil && !sameMap(v.OozieProperties, f.Vars.OozieProperties) {
				propsOK = false
			}
			v.OozieProperties = f.Vars.OozieProperties
		}
	}
	if !hdfsOK {
		v.HDFS = nil
	}
	if !oozieOK {
		v.Oozie = nil
	}
	if !propsOK || len(v.OozieProperties) == 0 {
		v.OozieProperties = nil
	}
	return v
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// defaultsFile writes defaults.cue with the variables the workflows use.
func (g *generator) defaultsFile() string {
	if len(g.used) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("// Celos's defaults-file variables as the converted workflow files saw them")
	if len(g.from) > 0 {
		fmt.Fprintf(&b, "\n// (after importing %s)", strings.Join(g.from, ", "))
	}
	b.WriteString(".\n// The workflows refer to them where they have their values.\n\n")
	fmt.Fprintf(&b, "package %s\n\n", g.opt.Package)
	if g.used[hdfsVar] {
		fmt.Fprintf(&b, "// %s is the file system of HDFS checks that name none.\n%s: %s\n\n", hdfsVar[1:], hdfsVar, quote(*g.vars.HDFS))
	}
	if g.used[oozieVar] {
		fmt.Fprintf(&b, "// %s is the Oozie URL of services that name none.\n%s: %s\n\n", oozieVar[1:], oozieVar, quote(*g.vars.Oozie))
	}
	if g.used[propsVar] {
		fmt.Fprintf(&b, "// %s are added to every workflow's Oozie properties.\n%s: {\n", propsVar[1:], propsVar)
		for _, k := range sortedKeys(g.vars.OozieProperties) {
			fmt.Fprintf(&b, "%s: %s\n", label(k), quote(g.vars.OozieProperties[k]))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func (g *generator) use(name string) string {
	if g.used == nil {
		g.used = map[string]bool{}
	}
	g.used[name] = true
	return name
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

func (g *generator) file(f *File) string {
	opt := g.opt
	for _, d := range f.Defaults {
		if f.Vars.HDFS == nil && f.Vars.Oozie == nil && f.Vars.OozieProperties == nil {
			break
		}
		name := opt.Rel(d)
		found := false
		for _, x := range g.from {
			found = found || x == name
		}
		if !found {
			g.from = append(g.from, name)
		}
	}
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
	// A call site whose workflows are not one comprehension is tried once:
	// trying again for each member over the members left made 2,000
	// workflows of one loop take 20 s, 20,000 hours.
	tried := map[Pos]bool{}
	for _, w := range f.Workflows {
		if done[w] {
			continue
		}
		var group []*Workflow
		if !tried[w.Pos] {
			tried[w.Pos] = true
			for _, o := range f.Workflows {
				if !done[o] && o.Pos == w.Pos && o.Props == nil {
					group = append(group, o)
				}
			}
		}
		if len(group) > 1 {
			if text, ok := g.group(group); ok {
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
		fmt.Fprintf(&b, "workflows: %s: %s\n", label(w.ID), g.body(w, quote))
	}
	return b.String()
}

// origin is the comment saying where workflows came from.
func origin(ws []*Workflow, opt GenOptions) string {
	w := ws[0]
	rel := func(p Pos) string { return fmt.Sprintf("%s:%d", opt.Rel(p.File), p.Line) }
	if len(ws) == 1 {
		if w.Helper != "" {
			return fmt.Sprintf("// From %s(...) at %s, called at %s.\n", commentSafe(w.Helper), rel(w.Pos), rel(w.CalledAt))
		}
		return fmt.Sprintf("// From %s.\n", rel(w.Pos))
	}
	if w.Helper != "" {
		var calls []string
		for _, o := range ws {
			if l := strconv.Itoa(o.CalledAt.Line); len(calls) == 0 || calls[len(calls)-1] != l {
				calls = append(calls, l)
			}
		}
		return fmt.Sprintf("// From %s(%s) at %s, called at %s:%s.\n", commentSafe(w.Helper), commentSafe(strings.Join(w.HelperParams, ", ")), rel(w.Pos), opt.Rel(ws[0].CalledAt.File), strings.Join(calls, ", "))
	}
	return fmt.Sprintf("// From %s, run %d times.\n", rel(w.Pos), len(ws))
}

var identRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

var keywords = map[string]bool{"package": true, "import": true, "for": true, "in": true, "if": true, "let": true, "true": true, "false": true, "null": true, "func": true}

// genGroup writes workflows defined by one call site as a comprehension
// over the part of their ids that differs, when every other difference
// between them is that part too.
func (g *generator) group(ws []*Workflow) (string, bool) {
	opt := g.opt
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	// Each id is the same prefix, its own part, the same suffix.
	pre, suf, params, ok := idSplit(ids)
	if !ok {
		return "", false
	}
	name := "name"
	if len(ws[0].HelperParams) == 1 && identRE.MatchString(ws[0].HelperParams[0]) && !keywords[ws[0].HelperParams[0]] && ws[0].HelperParams[0] != "celos" && ws[0].HelperParams[0] != "workflows" {
		name = ws[0].HelperParams[0]
	}
	// render writes member i with the id part written as ref.
	render := func(i int, ref string) string {
		p := params[i]
		q := func(s string) string {
			if s == p {
				return ref
			}
			parts := strings.Split(s, p)
			for j := range parts {
				parts[j] = escape(parts[j])
			}
			return `"` + strings.Join(parts, `\(`+ref+`)`) + `"`
		}
		id := `"` + escape(pre) + `\(` + ref + `)` + escape(suf) + `"`
		return fmt.Sprintf("workflows: %s: %s\n", id, g.body(ws[i], q))
	}
	var list []string
	for _, p := range params {
		list = append(list, quote(p))
	}

	// The members differ only in the id part: a comprehension over it.
	same := true
	text := render(0, name)
	for i := 1; i < len(ws) && same; i++ {
		same = render(i, name) == text
	}
	if same {
		return origin(ws, opt) + fmt.Sprintf("for %s in [%s] {\n%s}\n", name, strings.Join(list, ", "), text), true
	}

	// They differ in a few other literals too (a concurrency, a cron
	// string, seconds): a comprehension over a list of structs, when each
	// differing line differs in one literal only.
	g.explicit = differingDefaults(ws)
	defer func() { g.explicit = nil }()
	const elem = "wf"
	texts := make([][]string, len(ws))
	for i := range ws {
		texts[i] = strings.Split(render(i, elem+"."+name), "\n")
		if len(texts[i]) != len(texts[0]) {
			return "", false
		}
	}
	type field struct {
		label  string
		values []string
	}
	var fields []field
	labels := map[string]bool{name: true}
	out := make([]string, len(texts[0]))
	for l := range texts[0] {
		differs := false
		for i := 1; i < len(ws); i++ {
			differs = differs || texts[i][l] != texts[0][l]
		}
		if !differs {
			out[l] = texts[0][l]
			continue
		}
		line, label, values, ok := oneLiteral(texts, l, `\(`+elem+"."+name+`)`)
		if !ok || len(fields) == 3 {
			return "", false
		}
		for n, base := 2, label; labels[label]; n++ {
			label = fmt.Sprintf("%s%d", base, n)
		}
		labels[label] = true
		fields = append(fields, field{label, values})
		out[l] = fmt.Sprintf(line, elem+"."+label)
	}
	var b strings.Builder
	b.WriteString(origin(ws, opt))
	fmt.Fprintf(&b, "for %s in [\n", elem)
	for i, p := range params {
		fmt.Fprintf(&b, "{%s: %s", name, quote(p))
		for _, f := range fields {
			fmt.Fprintf(&b, ", %s: %s", f.label, f.values[i])
		}
		b.WriteString("},\n")
	}
	fmt.Fprintf(&b, "] {\n%s}\n", strings.Join(out, "\n"))
	return b.String(), true
}

// differingDefaults names the fields with defaults that the members of a
// group do not all have the same value of, to be written for each.
func differingDefaults(ws []*Workflow) map[string]bool {
	out := map[string]bool{}
	for _, w := range ws[1:] {
		out["schedulingStrategy"] = out["schedulingStrategy"] || w.SchedulingStrategy != ws[0].SchedulingStrategy
		out["maxRetryCount"] = out["maxRetryCount"] || w.MaxRetryCount != ws[0].MaxRetryCount
		out["waitTimeoutSeconds"] = out["waitTimeoutSeconds"] || w.WaitTimeoutSeconds != ws[0].WaitTimeoutSeconds
		out["startTime"] = out["startTime"] || !w.StartTime.Equal(ws[0].StartTime)
	}
	return out
}

// oneLiteral checks that line l of the members' texts differs in exactly
// one token, a number or a string without interpolation, labelled by a
// field name on the line. It returns the line with that token as %s, the
// label (an identifier) and each member's literal. interp is the one
// interpolation the lines may hold (CUE's scanner cannot scan one alone).
func oneLiteral(texts [][]string, l int, interp string) (string, string, []string, bool) {
	type tok struct {
		off  int
		kind token.Token
		lit  string
	}
	scan := func(line string) []tok {
		line = strings.ReplaceAll(line, interp, strings.Repeat("_", len(interp)))
		var sc scanner.Scanner
		f := token.NewFile("", -1, len(line))
		bad := false
		sc.Init(f, []byte(line), func(token.Pos, string, []interface{}) { bad = true }, scanner.DontInsertCommas)
		var out []tok
		for {
			pos, t, lit := sc.Scan()
			if t == token.EOF {
				break
			}
			out = append(out, tok{pos.Offset(), t, lit})
		}
		if bad {
			return nil
		}
		return out
	}
	toks := make([][]tok, len(texts))
	for i := range texts {
		toks[i] = scan(texts[i][l])
		if toks[i] == nil || len(toks[i]) != len(toks[0]) {
			return "", "", nil, false
		}
	}
	at := -1
	for k := range toks[0] {
		for i := 1; i < len(toks); i++ {
			if toks[i][k].kind != toks[0][k].kind || toks[i][k].lit != toks[0][k].lit {
				if at >= 0 && at != k {
					return "", "", nil, false
				}
				at = k
			}
		}
	}
	if at < 1 {
		return "", "", nil, false
	}
	values := make([]string, len(toks))
	for i := range toks {
		t := toks[i][at]
		lit := texts[i][l][t.off : t.off+len(t.lit)]
		if (t.kind != token.INT && t.kind != token.FLOAT && t.kind != token.STRING) || strings.Contains(lit, `\(`) {
			return "", "", nil, false
		}
		values[i] = lit
	}
	// The label: the identifier or string right before the nearest ':'
	// before the literal.
	label := ""
	for k := at - 1; k >= 1; k-- {
		if toks[0][k].kind == token.COLON {
			switch p := toks[0][k-1]; p.kind {
			case token.IDENT:
				label = p.lit
			case token.STRING:
				if u, err := strconv.Unquote(p.lit); err == nil {
					label = nonWord.ReplaceAllString(u, "_")
				}
			}
			break
		}
	}
	label = strings.Trim(label, "_")
	if label == "" || !identRE.MatchString(label) || keywords[label] {
		return "", "", nil, false
	}
	line := texts[0][l]
	t := toks[0][at]
	return strings.ReplaceAll(line[:t.off], "%", "%%") + "%s" + strings.ReplaceAll(line[t.off+len(t.lit):], "%", "%%"), label, values, true
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// idSplit is idParams with the common prefix and suffix.
func idSplit(ids []string) (pre, suf string, params []string, ok bool) {
	pre, suf = ids[0], ids[0]
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
			return "", "", nil, false
		}
		p := id[len(pre) : len(id)-len(suf)]
		if seen[p] {
			return "", "", nil, false
		}
		seen[p] = true
		out[i] = p
	}
	return pre, suf, out, true
}

// body writes a workflow's struct, its strings written by q.
func (g *generator) body(w *Workflow, q func(string) string) string {
	opt := g.opt
	var b strings.Builder
	b.WriteString("{\n")
	fmt.Fprintf(&b, "schedule: %s\n", genSchedule(w.Schedule, q))
	fmt.Fprintf(&b, "trigger: %s\n", g.trigger(w.Trigger, q))
	if w.SchedulingStrategy.Concurrency != 1 || g.explicit["schedulingStrategy"] {
		fmt.Fprintf(&b, "schedulingStrategy: celos.#Serial & {concurrency: %d}\n", w.SchedulingStrategy.Concurrency)
	}
	b.WriteString("externalService: celos.#Oozie & {\n")
	switch u := w.ExternalService.URL; {
	case u != "" && g.vars.Oozie != nil && u == *g.vars.Oozie:
		fmt.Fprintf(&b, "url: %s\n", g.use(oozieVar))
	case u != "":
		fmt.Fprintf(&b, "url: %s\n", q(u))
	}
	props := w.ExternalService.Properties
	if dp := g.vars.OozieProperties; dp != nil && includes(props, dp) {
		// Only the properties the defaults do not already give.
		own := map[string]string{}
		for k, v := range props {
			if _, ok := dp[k]; !ok {
				own[k] = v
			}
		}
		props = own
		fmt.Fprintf(&b, "properties: %s & {\n", g.use(propsVar))
	} else {
		b.WriteString("properties: {\n")
	}
	for _, k := range sortedKeys(props) {
		fmt.Fprintf(&b, "%s: %s\n", label(k), q(props[k]))
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
	if !w.StartTime.Equal(workflow.DefaultStartTime) || g.explicit["startTime"] {
		fmt.Fprintf(&b, "startTime: %s\n", q(w.StartTime.UTC().Format(time.RFC3339Nano)))
	}
	if w.MaxRetryCount != 0 || g.explicit["maxRetryCount"] {
		fmt.Fprintf(&b, "maxRetryCount: %d\n", w.MaxRetryCount)
	}
	if w.WaitTimeoutSeconds != workflow.NeverTimeout || g.explicit["waitTimeoutSeconds"] {
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

func genSchedule(s workflow.Schedule, q func(string) string) string {
	if s.Type == workflow.ScheduleDependent {
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

// includes reports whether props has every property of defaults, with
// the same value.
func includes(props, defaults map[string]string) bool {
	for k, v := range defaults {
		if w, ok := props[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (g *generator) trigger(t workflow.Trigger, q func(string) string) string {
	switch t.Type {
	case workflow.TriggerAlways:
		return "celos.#Always"
	case workflow.TriggerHDFSCheck:
		if t.FS != "" && g.vars.HDFS != nil && t.FS == *g.vars.HDFS {
			return fmt.Sprintf("celos.#HdfsCheck & {path: %s, fs: %s}", q(t.Path), g.use(hdfsVar))
		}
		if t.FS != "" {
			return fmt.Sprintf("celos.#HdfsCheck & {path: %s, fs: %s}", q(t.Path), q(t.FS))
		}
		return fmt.Sprintf("celos.#HdfsCheck & {path: %s}", q(t.Path))
	case workflow.TriggerSuccess:
		return fmt.Sprintf("celos.#Success & {workflow: %s}", q(t.Workflow))
	case workflow.TriggerAnd, workflow.TriggerOr:
		name := "#And"
		if t.Type == workflow.TriggerOr {
			name = "#Or"
		}
		if len(t.Triggers) == 0 {
			return fmt.Sprintf("celos.%s & {triggers: []}", name)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "celos.%s & {triggers: [\n", name)
		for _, c := range t.Triggers {
			fmt.Fprintf(&b, "%s,\n", g.trigger(c, q))
		}
		b.WriteString("]}")
		return b.String()
	case workflow.TriggerNot:
		return fmt.Sprintf("celos.#Not & {trigger: %s}", g.trigger(*t.Trigger, q))
	case workflow.TriggerOffset:
		return fmt.Sprintf("celos.#Offset & {seconds: %d, trigger: %s}", t.Seconds, g.trigger(*t.Trigger, q))
	case workflow.TriggerDelay:
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

// cueFileName is the name of the CUE file for the JavaScript file path:
// NAME.cue for NAME.js, made a name CUE loads (not starting with '.' or
// '_', which CUE ignores; control characters, bytes that are not UTF-8,
// and ':' and '\\', which CUE's loader refuses in a file name, replaced by
// '_'), and numbered (NAME_2.cue) when it is taken,
// ignoring case (macOS's file system does).
func cueFileName(path string, taken map[string]bool) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	base = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || r == ':' || r == '\\' {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(base, "_"))
	if base == "" || base[0] == '.' || base[0] == '_' {
		base = "js" + base
	}
	name := base + ".cue"
	for i := 2; taken[strings.ToLower(name)]; i++ {
		name = fmt.Sprintf("%s_%d.cue", base, i)
	}
	return name
}

// commentSafe is s for a line comment: quoted, with its control
// characters escaped, when it has one (a newline would end the comment,
// and what follows it would be CUE).
func commentSafe(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) {
		return strconv.Quote(s)
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
