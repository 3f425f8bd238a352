// Package defaults reads the installation defaults file of `celos server
// --defaults`: the Celos manual's CELOS_DEFAULT_HDFS, CELOS_DEFAULT_OOZIE
// and CELOS_DEFAULT_OOZIE_PROPERTIES, in a small JSON document validated at
// start-up. See docs/oozie.md for the format.
package defaults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/schema/workflow"
)

// FileName is the file read when --defaults names a directory (Celos's
// --defaults is a directory of JavaScript files; ours holds this one file).
const FileName = "defaults.json"

// Defaults are the installation-wide values a workflow falls back on.
type Defaults struct {
	// HDFS is the file system of an hdfsCheck trigger that names none
	// (hdfs://nn:8020, hdfs://nameservice, file:///). Empty means the
	// Hadoop configuration's fs.defaultFS.
	HDFS string `json:"CELOS_DEFAULT_HDFS,omitempty"`
	// Oozie is the Oozie URL (http://host:11000/oozie) of an oozie
	// service that names none.
	Oozie string `json:"CELOS_DEFAULT_OOZIE,omitempty"`
	// OozieProperties are added before a workflow's own Oozie properties,
	// which override them.
	OozieProperties map[string]string `json:"CELOS_DEFAULT_OOZIE_PROPERTIES,omitempty"`
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid defaults file")

var keys = []string{"CELOS_DEFAULT_HDFS", "CELOS_DEFAULT_OOZIE", "CELOS_DEFAULT_OOZIE_PROPERTIES"}

// MaxSize bounds the bytes read from a defaults file (1 MiB).
const MaxSize = 1 << 20

// Load reads the defaults file at path; a directory means path/defaults.json.
// A missing file is an error: the caller passes no path when there are no
// defaults. The file must be a regular file or a symbolic link to one: a
// FIFO, device or socket is refused without being read (see
// internal/regfile), and at most MaxSize bytes are read.
func Load(path string) (*Defaults, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName)
	}
	data, err := regfile.ReadFile(path, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("read defaults: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a defaults document; name is used in errors. Errors never
// repeat what a document that is not a defaults file holds (a secret put
// in its place): syntax errors give the position, type errors the kind of
// JSON found, and an unknown key is quoted only if it starts with CELOS_.
func Parse(name string, data []byte) (*Defaults, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: %s", name, ErrInvalid, fmt.Sprintf(format, a...))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %w: JSON syntax error: %s", name, line, col, ErrInvalid, quotedChar.ReplaceAllString(se.Error(), "invalid character"))
		}
		return nil, fail("want a JSON object with the keys %s, not %s", strings.Join(keys, ", "), workflow.JSONKind(data))
	}
	if raw == nil {
		return nil, fail("want a JSON object, got null")
	}
	var unknown []string
	for k := range raw {
		if !slices.Contains(keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if !keyLike.MatchString(unknown[0]) {
			return nil, fail("an unknown key that is not CELOS_... (known: %s)", strings.Join(keys, ", "))
		}
		return nil, fail("unknown key %q (known: %s)", unknown[0], strings.Join(keys, ", "))
	}
	d := &Defaults{}
	str := func(key string, dst *string) error {
		v, ok := raw[key]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fail("%s must be a string, not %s", key, workflow.JSONKind(v))
		}
		return nil
	}
	if err := str("CELOS_DEFAULT_HDFS", &d.HDFS); err != nil {
		return nil, err
	}
	if err := str("CELOS_DEFAULT_OOZIE", &d.Oozie); err != nil {
		return nil, err
	}
	if v, ok := raw["CELOS_DEFAULT_OOZIE_PROPERTIES"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(v, &props); err != nil || props == nil {
			return nil, fail("CELOS_DEFAULT_OOZIE_PROPERTIES must be an object of strings, not %s", workflow.JSONKind(v))
		}
		d.OozieProperties = make(map[string]string, len(props))
		for k, pv := range props {
			var s string
			if err := json.Unmarshal(pv, &s); err != nil {
				return nil, fail("CELOS_DEFAULT_OOZIE_PROPERTIES[%q] must be a string (Oozie properties are text), not %s", k, workflow.JSONKind(pv))
			}
			if k == "" {
				return nil, fail("CELOS_DEFAULT_OOZIE_PROPERTIES has an empty property name")
			}
			d.OozieProperties[k] = s
		}
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// Validate checks the URLs: CELOS_DEFAULT_HDFS is empty or an hdfs: or
// file: URI; CELOS_DEFAULT_OOZIE is empty or an http(s) URL with a host.
func (d *Defaults) Validate() error {
	if d.HDFS != "" {
		if err := CheckFS(d.HDFS); err != nil {
			return fmt.Errorf("%w: CELOS_DEFAULT_HDFS: %v", ErrInvalid, err)
		}
	}
	if d.Oozie != "" {
		if err := CheckOozieURL(d.Oozie); err != nil {
			return fmt.Errorf("%w: CELOS_DEFAULT_OOZIE: %v", ErrInvalid, err)
		}
	}
	return nil
}

// CheckFS reports whether s is a file-system URI hdfsCheck can use:
// hdfs://host[:port] or hdfs://nameservice, or file:///.
func CheckFS(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("bad URI %q: %v", s, err)
	}
	switch u.Scheme {
	case "hdfs":
		if u.Host == "" {
			return fmt.Errorf("%q names no NameNode or name service (want hdfs://host:8020 or hdfs://nameservice)", s)
		}
	case "file":
	default:
		return fmt.Errorf("%q: want an hdfs:// or file:// URI", s)
	}
	return nil
}

// CheckOozieURL reports whether s is an Oozie base URL.
func CheckOozieURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("bad URL %q: %v", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http(s) URL such as http://oozie-host:11000/oozie", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: the Oozie URL takes no query or fragment", s)
	}
	return nil
}

var (
	// keyLike is what an unknown key must look like to be quoted.
	keyLike = regexp.MustCompile(`^CELOS_[A-Z0-9_]{0,60}$`)
	// quotedChar is the character encoding/json's syntax errors quote.
	quotedChar = regexp.MustCompile(`invalid character '(?:[^'\\]|\\.)*'`)
)

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}
