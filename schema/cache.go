package schema

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"sort"
	"strings"

	"cuelang.org/go/cue/token"

	"github.com/celos-go/celos/internal/cache"
	"github.com/celos-go/celos/schema/workflow"
)

// Cache turns on the compile cache of CompileCached.
type Cache struct {
	Store *cache.Store
	// Build identifies the compiler (celos's version and its executable):
	// a rebuilt celos never answers from another build's entries.
	Build string
}

// Compiled is the result of CompileCached.
type Compiled struct {
	// Project is the compiled project (nil when invalid). On a cache hit
	// it is nil until Load parses JSON.
	Project *workflow.Project
	// JSON is the exported document (Project.Marshal), nil when invalid.
	JSON  []byte
	Diags []Diagnostic
	// Err is a Diagnostics of the errors, nil for a valid project.
	Err error
	// Hit: the result came from the cache.
	Hit bool
}

// Load returns the project, parsing JSON after a cache hit.
func (r *Compiled) Load() (*workflow.Project, error) {
	if r.Project != nil || r.JSON == nil {
		return r.Project, r.Err
	}
	p, err := workflow.Load(strings.NewReader(string(r.JSON)))
	if err != nil {
		return nil, err
	}
	r.Project = p
	return p, nil
}

// A compile cache entry is the diagnostics as one line of JSON, exactly
// as the compile that made them printed them, then the exported document
// byte for byte (none for an invalid project).

const cacheKind = "compile"

// CompileCached is Compile answered from cc (when not nil) for a project
// whose inputs have not changed. The key is the SHA-256 of cc.Build, the
// directory as named and the working directory (diagnostics show paths
// relative to it), the CUE_* environment, and the name and content of
// every file the compile reads: the project's .cue files, those of its
// parent directories up to the module root, cue.mod's module file and
// packages, the files its @embed attributes name, the embedded schema, and
// the diagnostics of reading them (the vendored schema's comparison). The
// files are read once, as Compile reads them, before the key is made: a
// file that changes after that is what the compile checks, and it is
// keyed by what it had then. Projects with files refused (outside the
// module, too large, not regular) and compiles that panicked are not
// cached. A damaged entry is a miss, and is replaced.
func CompileCached(dir string, cc *Cache) *Compiled {
	c := &compiler{embedPos: map[string]token.Pos{}, cache: cc}
	p, _, diags, err := c.run(dir)
	if c.hit != nil {
		return c.hit
	}
	r := &Compiled{Project: p, Diags: diags, Err: err}
	if p != nil {
		data, merr := p.Marshal()
		if merr != nil {
			return &Compiled{Diags: diags, Err: merr}
		}
		r.JSON = data
	}
	if cc != nil && c.key != "" && !c.panicked {
		line, err1 := json.Marshal(diags)
		paths, err2 := json.Marshal(c.paths)
		if err1 == nil && err2 == nil {
			data := append(append(append(append(line, '\n'), paths...), '\n'), r.JSON...)
			_ = cc.Store.Put(cacheKind, c.key, data) // a hint: without it the next run compiles
		}
	}
	return r
}

// pathCheck is one answer of localPath: the test cases' fixtures and
// expected outputs live outside the compile's inputs (a directory of
// files), so a cached answer records what each path was and is used only
// while each still is.
type pathCheck struct {
	Rel     string `json:"rel"`
	DirOnly bool   `json:"dirOnly,omitempty"`
	Abs     string `json:"abs,omitempty"`
	Err     string `json:"err,omitempty"`
}

func (c *compiler) recordPath(rel string, dirOnly bool, abs string, err error) {
	pc := pathCheck{Rel: rel, DirOnly: dirOnly, Abs: abs}
	if err != nil {
		pc.Err = err.Error()
	}
	c.paths = append(c.paths, pc)
}

// pathsUnchanged reports whether every recorded path check answers as it
// did.
func (c *compiler) pathsUnchanged(checks []pathCheck) bool {
	for _, pc := range checks {
		abs, err := c.localPath(pc.Rel, pc.DirOnly)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if abs != pc.Abs || msg != pc.Err {
			return false
		}
	}
	return true
}

// lookupCache computes the key once the project's files are read and
// answers from the cache when it has the entry; it reports a hit.
func (c *compiler) lookupCache(dirArg string) bool {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	str := func(s string) { field([]byte(s)) }
	str("celos compile cache v2")
	str(c.cache.Build)
	str(dirArg)
	str(c.cwd)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUE_") {
			str(kv)
		}
	}
	c.fsys.fingerprint(field)
	for _, d := range c.diags {
		str(d.String())
		str(boolString(d.Warning))
	}
	c.key = hex.EncodeToString(h.Sum(nil))
	data, ok := c.cache.Store.Get(cacheKind, c.key)
	if !ok {
		return false
	}
	line, rest, found := strings.Cut(string(data), "\n")
	var diags []Diagnostic
	if !found || json.Unmarshal([]byte(line), &diags) != nil {
		return false
	}
	pathsLine, doc, found := strings.Cut(rest, "\n")
	var checks []pathCheck
	unchanged := found && json.Unmarshal([]byte(pathsLine), &checks) == nil && c.pathsUnchanged(checks)
	c.paths = nil // the checks are not this compile's record
	if !unchanged {
		return false // a fixture appeared, went or changed kind: compile
	}
	r := &Compiled{Diags: diags, Hit: true}
	if doc != "" {
		r.JSON = []byte(doc)
	}
	var errs Diagnostics
	for _, d := range diags {
		if !d.Warning {
			errs = append(errs, d)
		}
	}
	if len(errs) > 0 {
		r.JSON, r.Err = nil, errs
	} else if r.JSON == nil {
		return false // neither a project nor an error: not an entry of ours
	}
	c.hit = r
	return true
}

func boolString(b bool) string {
	if b {
		return "warning"
	}
	return "error"
}

// fingerprint writes every file read so far and the overlay, sorted by
// path: name, then content (or the error reading it gave).
func (f *inputFS) fingerprint(field func([]byte)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	paths := make([]string, 0, len(f.cache)+len(f.overlay))
	for p := range f.cache {
		paths = append(paths, "read "+p)
	}
	for p := range f.overlay {
		paths = append(paths, "overlay "+p)
	}
	sort.Strings(paths)
	for _, k := range paths {
		field([]byte(k))
		if p, ok := strings.CutPrefix(k, "read "); ok {
			if cf := f.cache[p]; cf.err != nil {
				field([]byte("error " + cf.err.Error()))
			} else {
				field(cf.data)
			}
			continue
		}
		field(f.overlay[strings.TrimPrefix(k, "overlay ")])
	}
}
