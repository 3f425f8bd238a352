package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

// ErrNotRewritable is wrapped by the errors of a path that cannot be put
// under a prefix (relative, another scheme).
var ErrNotRewritable = errors.New("cannot be put under the test's prefix")

// PrefixEnv is the variable a command gets with its case's prefix (an
// absolute path on the file system the test runs on); FSEnv names that
// file system ("file:///" or "hdfs://host:port").
const (
	PrefixEnv = "CELOS_HDFS_PREFIX"
	FSEnv     = "CELOS_TEST_FS"
)

// leadingVar matches a value that starts with an Oozie EL variable
// standing for the file system, such as "${nameNode}/input".
var leadingVar = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_.]*\}/`)

// RewritePath puts an HDFS path of a workflow under prefix (an absolute,
// clean path):
//
//	/in/${year}              → <prefix>/in/${year}
//	hdfs://ns:2345/x         → hdfs://ns:2345<prefix>/x
//	hdfs:///x                → hdfs://<prefix>/x  (that is, hdfs:///p/q/x)
//	${nameNode}/x            → ${nameNode}<prefix>/x
//	in/x (relative)          → <prefix>/in/x
//
// A prefix of "/" changes nothing. With local set (a test on the local
// file system), the scheme and authority are dropped (hdfs://ns/x →
// <prefix>/x), since every path then lives on the local disk; file: URIs
// are kept as paths the same way. An empty path, a URI of another scheme
// or a leading variable not followed by / is an error wrapping
// ErrNotRewritable.
func RewritePath(prefix, p string, local bool) (string, error) {
	if prefix == "/" && !local {
		return p, nil
	}
	under := func(abs string) string {
		switch {
		case prefix == "/":
			return abs
		case abs == "/":
			return prefix
		}
		return prefix + abs
	}
	switch {
	case p == "":
		return "", fmt.Errorf("an empty path %w", ErrNotRewritable)
	case strings.HasPrefix(p, "/"):
		return under(p), nil
	case leadingVar.MatchString(p):
		i := strings.IndexByte(p, '}') + 1
		if local {
			return under(p[i:]), nil
		}
		return p[:i] + under(p[i:]), nil
	case strings.HasPrefix(p, "${"):
		return "", fmt.Errorf("%q starts with a variable that is not followed by /: it %w", p, ErrNotRewritable)
	}
	scheme, rest, ok := strings.Cut(p, "://")
	if !ok {
		// Relative: to the sandbox, as it was to the server's working
		// directory (or the HDFS user's home).
		return under("/" + p), nil
	}
	switch strings.ToLower(scheme) {
	case "hdfs", "file":
	default:
		return "", fmt.Errorf("%q: a %s: URI %w (only hdfs: and file: ones)", p, scheme, ErrNotRewritable)
	}
	authority, abs := rest, "/"
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, abs = rest[:i], rest[i:]
	}
	if local {
		return under(abs), nil
	}
	return scheme + "://" + authority + under(abs), nil
}

// Rewrite is how a case's workflows are changed for its sandbox.
type Rewrite struct {
	// Prefix is the case's prefix (absolute, clean).
	Prefix string
	// FS is the URI of the file system the sandbox is on ("file:///"
	// for the local disk).
	FS string
	// Local is set when the sandbox is on the local disk.
	Local bool
	// Have are the external service types the run has; a case's
	// stand-in replaces a workflow's service only when its type is not
	// among them (nil: always).
	Have map[string]bool
	// WorkDir is the local directory commands run in when they name no
	// dir (a relative dir is taken from it): the sandbox stands for the
	// server's working directory ("": as written).
	WorkDir string
}

// Workflows returns the project's workflows as the case runs them: every
// HDFS path the schema knows to be one under the prefix (hdfsCheck
// paths, the Oozie properties of testcase.DefaultPathProperties and of
// c.PathProperties), the case's stand-in services in place of the services
// the run does not have, commands
// given PrefixEnv and FSEnv and run in WorkDir, and start times no earlier than the case's
// start (so that no slot before the range runs). The project is not
// changed.
func (r Rewrite) Workflows(p *workflow.Project, c *testcase.Case) (*workflow.Project, error) {
	out := &workflow.Project{Format: p.Format, Project: p.Project, Workflows: make([]workflow.Workflow, len(p.Workflows))}
	props := map[string]bool{}
	for _, k := range testcase.DefaultPathProperties {
		props[k] = true
	}
	for _, k := range c.PathProperties {
		props[k] = true
	}
	var errs []error
	for i, w := range p.Workflows {
		if s, ok := c.Services[w.ID]; ok && (r.Have == nil || !r.Have[w.ExternalService.Type]) {
			w.ExternalService = s
		}
		t, err := r.trigger(w.Trigger)
		if err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: trigger: %w", w.ID, err))
		}
		w.Trigger = t
		es, err := r.service(w.ExternalService, props)
		if err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: %w", w.ID, err))
		}
		w.ExternalService = es
		if w.StartTime.Before(c.Start) {
			w.StartTime = c.Start.Truncate(time.Second)
		}
		out.Workflows[i] = w
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// trigger rewrites the paths of a trigger tree (a copy).
func (r Rewrite) trigger(t workflow.Trigger) (workflow.Trigger, error) {
	var err error
	if t.Type == workflow.TriggerHDFSCheck {
		if t.Path, err = RewritePath(r.Prefix, t.Path, r.Local); err != nil {
			return t, err
		}
		if r.Local {
			t.FS = "" // the engine's default: the local disk
		}
	}
	if t.Triggers != nil {
		kids := make([]workflow.Trigger, len(t.Triggers))
		for i := range t.Triggers {
			if kids[i], err = r.trigger(t.Triggers[i]); err != nil {
				return t, err
			}
		}
		t.Triggers = kids
	}
	if t.Trigger != nil {
		kid, err := r.trigger(*t.Trigger)
		if err != nil {
			return t, err
		}
		t.Trigger = &kid
	}
	return t, nil
}

// service rewrites an external service (a copy): the path properties of
// Oozie, the environment of a command.
func (r Rewrite) service(s workflow.ExternalService, props map[string]bool) (workflow.ExternalService, error) {
	switch s.Type {
	case workflow.ServiceOozie:
		np := make(map[string]string, len(s.Properties))
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			v := s.Properties[k]
			if props[k] {
				nv, err := RewritePath(r.Prefix, v, r.Local)
				if err != nil {
					return s, fmt.Errorf("property %s: %w", k, err)
				}
				v = nv
			}
			np[k] = v
		}
		s.Properties = np
	case workflow.ServiceCommand:
		env := make(map[string]string, len(s.Env)+2)
		for k, v := range s.Env {
			env[k] = v
		}
		env[PrefixEnv] = r.Prefix
		env[FSEnv] = r.FS
		s.Env = env
		if r.WorkDir != "" && !filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Join(r.WorkDir, s.Dir)
		}
	}
	return s, nil
}

// Join puts an absolute path of a test case (an input or output) under
// prefix.
func Join(prefix, p string) string {
	if prefix == "/" {
		return p
	}
	return path.Join(prefix, p)
}
