// Package pool is the installation's pools of `celos server --pools FILE`:
// the pools file (its format, Parse, and File, which re-reads it like the
// workflows directory) and Admit, the pure decision of which of a step's
// chosen READY slots a pool lets run: never more running than its limit
// across all its workflows, higher priority first, then older slots.
package pool

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/schema/workflow"
)

// MaxLimit bounds a pool's limit; MaxFileSize the pools file.
const (
	MaxLimit    = 1000000
	MaxFileSize = 1 << 20
)

// ErrInvalid is wrapped by the errors of a pools file that does not parse
// or says something impossible.
var ErrInvalid = errors.New("invalid pools file")

// Pools maps a pool's name to its limit: how many slots of all its
// workflows may be RUNNING at once.
type Pools map[string]int

// document is the pools file:
//
//	{"pools": {"etl": {"limit": 4}, "reports": {"limit": 1}}}
type document struct {
	Pools map[string]struct {
		Limit *int `json:"limit"`
	} `json:"pools"`
}

// Parse reads a pools file. Its errors say what is wrong and where (line,
// column, pool name) without quoting the file's bytes.
func Parse(data []byte) (Pools, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: the file must be a JSON object such as {\"pools\": {\"etl\": {\"limit\": 4}}} (it is %s)", ErrInvalid, workflow.JSONKind(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describe(data, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	if doc.Pools == nil {
		return nil, fmt.Errorf("%w: no \"pools\" object", ErrInvalid)
	}
	if err := noDuplicateKeys(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	p := make(Pools, len(doc.Pools))
	var errs []error
	names := make([]string, 0, len(doc.Pools))
	for name := range doc.Pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := doc.Pools[name]
		switch {
		case !workflow.IDPattern.MatchString(name) || len(name) > 255:
			errs = append(errs, fmt.Errorf("%w: a pool name must match %s (a name of %d bytes does not)", ErrInvalid, workflow.IDPattern, len(name)))
		case v.Limit == nil:
			errs = append(errs, fmt.Errorf("%w: pool %q has no limit", ErrInvalid, name))
		case *v.Limit < 1 || *v.Limit > MaxLimit:
			errs = append(errs, fmt.Errorf("%w: pool %q: limit %d must be between 1 and %d", ErrInvalid, name, *v.Limit, MaxLimit))
		default:
			p[name] = *v.Limit
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// noDuplicateKeys refuses a name given twice in one object of the
// (valid) pools document: encoding/json keeps the last silently, so a
// pool named twice (two edits merged) would get one of its limits
// without a word. Names are quoted only when they are identifiers.
func noDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type object struct {
		seen map[string]bool
		name string // the key this object is the value of
	}
	var stack []*object
	expectKey := false
	var lastKey string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // (the decode reported it)
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &object{seen: make(map[string]bool), name: lastKey})
				expectKey = true
				continue
			case '}':
				stack = stack[:len(stack)-1]
			case '[':
				stack = append(stack, nil) // arrays hold no keys
			case ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if o := top(stack); expectKey && o != nil {
				if o.seen[v] {
					line, _ := position(data, dec.InputOffset())
					return duplicateKey(len(stack), o.name, v, line)
				}
				o.seen[v] = true
				lastKey = v
				expectKey = false
				continue
			}
		}
		// A value ended: the next string of an object is a key.
		expectKey = top(stack) != nil
	}
}

func top[T any](stack []*T) *T {
	if len(stack) == 0 {
		return nil
	}
	return stack[len(stack)-1]
}

// duplicateKey says which name is given twice, at depth (1: the
// document, 2: the pools, 3: a pool) of the object named parent.
func duplicateKey(depth int, parent, key string, line int) error {
	name := func(s string) string {
		if fieldName.MatchString(`"`+s+`"`) || (workflow.IDPattern.MatchString(s) && len(s) <= 64) {
			return strconv.Quote(s)
		}
		return "a name"
	}
	switch depth {
	case 2:
		return fmt.Errorf("pool %s is defined twice (again at line %d)", name(key), line)
	case 3:
		return fmt.Errorf("pool %s: %s is given twice (again at line %d)", name(parent), name(key), line)
	}
	return fmt.Errorf("%s is given twice (again at line %d)", name(key), line)
}

var fieldName = regexp.MustCompile(`^"[A-Za-z][A-Za-z0-9_]{0,63}"$`)

// describe turns an encoding/json error into words without the values it
// quotes.
func describe(data []byte, err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Sprintf("JSON syntax error at line %d, column %d", line, col)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		return fmt.Sprintf("line %d, column %d: %s has the wrong type (a limit is an integer)", line, col, fieldOrDocument(te.Field))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if name := strings.TrimPrefix(err.Error(), "json: unknown field "); fieldName.MatchString(name) {
			return "unknown field " + name + " (a pool has only \"limit\")"
		}
		return "an unknown field"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the file ends too early"
	}
	return "not a pools document"
}

func fieldOrDocument(f string) string {
	if f == "" {
		return "the document"
	}
	if len(f) > 64 {
		return "a field"
	}
	return f
}

func position(data []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = max(1, int(off)-bytes.LastIndexByte(before, '\n')-1)
	return line, col
}

// File is the pools file of a server, re-read at every Load: a file whose
// content (SHA-256) did not change is not parsed again; a file that does
// not load is reported and the last version that loaded stays in effect.
type File struct {
	path string

	mu    sync.Mutex
	hash  [sha256.Size]byte
	read  bool
	pools Pools // the version in effect (nil: none ever loaded)
	err   error // why the current content does not load
}

// NewFile returns the pools file at path ("" means none: every workflow
// that names a pool has an undefined pool).
func NewFile(path string) *File { return &File{path: path} }

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Load re-reads the file. It returns the pools in effect, whether they
// changed, and the error of the current content (nil when it loaded).
func (f *File) Load() (p Pools, changed bool, err error) {
	if f == nil || f.path == "" {
		return nil, false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	data, rerr := regfile.ReadFile(f.path, MaxFileSize)
	if rerr != nil {
		err = readError{rerr, f.path}
		changed = f.err == nil || f.err.Error() != err.Error()
		f.err = err
		return f.pools, changed, err
	}
	h := sha256.Sum256(data)
	if f.read && h == f.hash {
		return f.pools, false, f.err
	}
	f.read, f.hash = true, h
	np, perr := Parse(data)
	if perr != nil {
		f.err = perr
		return f.pools, true, perr
	}
	f.pools, f.err = np, nil
	return np, true, nil
}

// readError is a failure to read the pools file, worded without its path:
// every caller names the file ("pools file X: read: no such file or
// directory"), and the file's reader puts it in each of its errors.
type readError struct {
	err  error
	path string
}

func (e readError) Error() string {
	var pe *fs.PathError
	if errors.As(e.err, &pe) && pe.Path == e.path {
		return "read: " + pe.Err.Error()
	}
	return "read: " + strings.TrimPrefix(e.err.Error(), e.path+": ")
}

func (e readError) Unwrap() error { return e.err }

// Candidate is a READY slot the serial strategy of its workflow chose, as
// far as pools are concerned.
type Candidate struct {
	Workflow string
	Slot     time.Time
	Pool     string // "" means no pool: always admitted
	Priority int
}

// Before reports whether candidate a goes before b in a pool: higher
// priority first, then the older slot, then the smaller workflow id.
func Before(a, b Candidate) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.Slot.Equal(b.Slot) {
		return a.Slot.Before(b.Slot)
	}
	return a.Workflow < b.Workflow
}

// Use is a pool's use after an admission.
type Use struct {
	Limit int
	// Running are the slots RUNNING at the step's start, Admitted those
	// admitted now, Waiting those that were chosen but not admitted.
	Running, Admitted, Waiting int
}

// Undefined is the reason Admit gives for a slot whose pool is not
// defined; Admit's other reasons start with "pool".
func Undefined(name string) string {
	return fmt.Sprintf("pool %q is not defined in the pools file", name)
}

// Admit decides which candidates run: for each pool, at most its limit
// minus running[pool] of its candidates, ordered by priority (higher
// first), then slot time (older first), then workflow id. Candidates of no
// pool are all admitted; those of an undefined pool none. It returns,
// for each candidate, "" when admitted or why not, and the use of every
// pool that has candidates or running slots. Admit is a pure function.
func Admit(pools Pools, running map[string]int, cands []Candidate) (why []string, use map[string]Use) {
	why = make([]string, len(cands))
	use = make(map[string]Use)
	for name, n := range running {
		if limit, ok := pools[name]; ok {
			use[name] = Use{Limit: limit, Running: n}
		}
	}
	byPool := make(map[string][]int)
	for i, c := range cands {
		if c.Pool == "" {
			continue
		}
		if _, ok := pools[c.Pool]; !ok {
			why[i] = Undefined(c.Pool)
			continue
		}
		byPool[c.Pool] = append(byPool[c.Pool], i)
	}
	for name, idx := range byPool {
		sort.SliceStable(idx, func(a, b int) bool { return Before(cands[idx[a]], cands[idx[b]]) })
		u := use[name]
		u.Limit = pools[name]
		u.Admitted = min(len(idx), max(0, u.Limit-u.Running))
		u.Waiting = len(idx) - u.Admitted
		for rank, i := range idx[u.Admitted:] {
			why[i] = fmt.Sprintf("pool %q is full: %d of %d running, %d waiting before this slot", name, u.Running+u.Admitted, u.Limit, rank)
		}
		use[name] = u
	}
	return why, use
}
