// CUE error translation: what cue/load and the evaluator report, said in
// terms of the user's project (file:line:col, the field, the fix).

package schema

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/celos-go/celos/schema/workflow"
)

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
		if strings.TrimSpace(msg) == "" || strings.Contains(msg, "%!") {
			// Some errors of cue/load (an invalid module file) carry
			// their text only in Error(), not in Msg().
			msg = e.Error()
		}
		if format == "@%s" {
			// An attribute's error (@embed) carries its reason wrapped.
			msg += attributeReason(e)
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
		if format == "field not allowed" {
			msg += c.suggestField(e.Path())
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

// maxReason bounds the reason quoted from a wrapped error.
const maxReason = 300

// attributeReason is ": " and the reason CUE wraps inside an attribute's
// error ("@embed": open data.json: no such file or directory), or "".
func attributeReason(e cueerrors.Error) string {
	u := errors.Unwrap(e)
	if u == nil {
		return ""
	}
	reason := strings.TrimSpace(u.Error())
	if m := leadingPos.FindString(reason); m != "" {
		reason = reason[len(m):]
	}
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "") + "…"
	}
	if reason == "" {
		return ""
	}
	return ": " + reason
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
		case workflow.TriggerAnd, workflow.TriggerOr:
			list := v.LookupPath(cue.ParsePath("triggers"))
			if it, err := list.List(); err == nil {
				for i := 0; it.Next(); i++ {
					node(v, it.Value(), fmt.Sprintf("%s.triggers.%d", path, i), kind)
				}
			}
		case workflow.TriggerNot, workflow.TriggerOffset:
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
