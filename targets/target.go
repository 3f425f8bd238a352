// Package targets reads Celos target files and opens the file systems
// their URLs name: file: (local), sftp: (pkg/sftp over x/crypto/ssh, with
// known_hosts verification) and HDFS (colinmarc/hdfs/v2, configured from
// the target's Hadoop XML files, see targets/hadoopconf).
package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// The keys of a Celos target file, and celos's extensions.
const (
	KeyHDFSSite     = "hadoop.hdfs-site.xml"
	KeyCoreSite     = "hadoop.core-site.xml"
	KeyWorkflowsDir = "workflows.dir.uri"
	KeyDefaultsDir  = "defaults.dir.uri"
	// KeyHDFSRoot (celos extension) is the installation's HDFS root, the
	// default of `celos deploy --hdfs-root`.
	KeyHDFSRoot = "hdfs.root"
)

// MaxTargetFileSize bounds a target file (each Hadoop XML file is bounded
// by hadoopconf.MaxFileSize).
const MaxTargetFileSize = 1 << 20

// Target is a parsed target file: where one Celos installation keeps its
// workflows and which Hadoop cluster it uses.
type Target struct {
	// Source is where the target file was read from (for messages).
	Source string
	// CoreSite and HDFSSite locate the installation's Hadoop XML files.
	CoreSite, HDFSSite Location
	// WorkflowsDir is the server's workflows directory.
	WorkflowsDir Location
	// DefaultsDir is Celos's defaults directory. celos compiles defaults
	// into the workflows file, so nothing is deployed there; it is
	// optional and kept for compatibility.
	DefaultsDir *Location
	// HDFSRoot is the hdfs.root extension ("" when absent).
	HDFSRoot string
	// Extra holds the keys celos does not use (e.g. hive.jdbc.url).
	Extra []string
}

// ParseOptions tune Parse.
type ParseOptions struct {
	// BaseDir resolves relative file: URLs (the directory of a local
	// target file); "" forbids them.
	BaseDir string
	// User, when set, replaces the user of every sftp: URL
	// (CELOS_CI_USERNAME).
	User string
}

// Parse reads a target file. Errors name the source, the key and the URL
// at fault. A trailing comma before } (as in the Celos manual's example)
// is accepted.
func Parse(data []byte, source string, o ParseOptions) (*Target, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("target file %s: %s", source, fmt.Sprintf(format, args...))
	}
	if len(data) > MaxTargetFileSize {
		return nil, fail("larger than %d bytes", MaxTargetFileSize)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		return nil, fail("not UTF-8 text")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(stripTrailingCommas(data)))
	if err := dec.Decode(&raw); err != nil {
		return nil, fail("not a JSON object: %v", jsonError(err))
	}
	if raw == nil {
		return nil, fail("not a JSON object")
	}
	if dec.More() {
		return nil, fail("trailing data after the JSON object")
	}
	t := &Target{Source: source}
	str := func(key string, required bool) (string, bool, error) {
		v, ok := raw[key]
		if !ok {
			if required {
				return "", false, fail("%s was not specified in the target file", key)
			}
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, fail("%s: want a string, got %s", key, abbreviate(string(v)))
		}
		if strings.TrimSpace(s) == "" {
			return "", false, fail("%s is empty", key)
		}
		return strings.TrimSpace(s), true, nil
	}
	loc := func(key string, required bool) (*Location, error) {
		s, ok, err := str(key, required)
		if err != nil || !ok {
			return nil, err
		}
		l, err := ParseURL(s, o.BaseDir)
		if err != nil {
			return nil, fail("%s: %v", key, err)
		}
		if l.Scheme != "file" && l.Scheme != "sftp" {
			return nil, fail("%s: %q is not a file: or sftp: URL", key, s)
		}
		if l.Scheme == "sftp" && o.User != "" {
			l.User = o.User
		}
		return &l, nil
	}
	var err error
	var l *Location
	if l, err = loc(KeyHDFSSite, true); err != nil {
		return nil, err
	}
	t.HDFSSite = *l
	if l, err = loc(KeyCoreSite, true); err != nil {
		return nil, err
	}
	t.CoreSite = *l
	if l, err = loc(KeyWorkflowsDir, true); err != nil {
		return nil, err
	}
	t.WorkflowsDir = *l
	if t.DefaultsDir, err = loc(KeyDefaultsDir, false); err != nil {
		return nil, err
	}
	if root, ok, err := str(KeyHDFSRoot, false); err != nil {
		return nil, err
	} else if ok {
		if err := ValidateHDFSRoot(root); err != nil {
			return nil, fail("%s: %v", KeyHDFSRoot, err)
		}
		t.HDFSRoot = root
	}
	known := map[string]bool{KeyHDFSSite: true, KeyCoreSite: true, KeyWorkflowsDir: true, KeyDefaultsDir: true, KeyHDFSRoot: true}
	for k := range raw {
		if !known[k] {
			t.Extra = append(t.Extra, k)
		}
	}
	sort.Strings(t.Extra)
	return t, nil
}

// ValidateHDFSRoot checks an HDFS root as Celos does (absolute, no trailing
// slash) and refuses "." and ".." components and NUL bytes.
func ValidateHDFSRoot(root string) error {
	if !strings.HasPrefix(root, "/") || len(root) < 2 || strings.HasSuffix(root, "/") {
		return fmt.Errorf("HDFS root %q must start with / and not end with /", root)
	}
	if strings.ContainsRune(root, 0) {
		return fmt.Errorf("HDFS root %q contains a NUL byte", root)
	}
	for _, part := range strings.Split(root[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("HDFS root %q has an empty, . or .. component", root)
		}
	}
	if path.Clean(root) != root {
		return fmt.Errorf("HDFS root %q is not a clean path", root)
	}
	return nil
}

// Load fetches and parses the target file at rawURL (a file: or sftp:
// URL, or a local path). Relative file: URLs inside a local target file
// are resolved against its directory; o.BaseDir is ignored.
func Load(ctx context.Context, c *Connector, rawURL string, o ParseOptions) (*Target, error) {
	l, err := TargetLocation(rawURL, o.User)
	if err != nil {
		return nil, err
	}
	data, err := readLocation(ctx, c, l, MaxTargetFileSize)
	if err != nil {
		return nil, fmt.Errorf("read target file: %w", err)
	}
	o.BaseDir = ""
	if l.Scheme == "file" {
		o.BaseDir = filepath.Dir(filepath.FromSlash(l.Path))
	}
	return Parse(data, l.String(), o)
}

// TargetLocation parses the --target argument: a file: or sftp: URL, or a
// local path. user, when set, replaces the user of an sftp URL.
func TargetLocation(rawURL, user string) (Location, error) {
	if rawURL == "" {
		return Location{}, fmt.Errorf("no target: pass --target URL (a file: or sftp: URL of a target file)")
	}
	if !strings.Contains(rawURL, ":") {
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return Location{}, err
		}
		rawURL = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	}
	l, err := ParseURL(rawURL, ".")
	if err != nil {
		return Location{}, fmt.Errorf("--target: %v", err)
	}
	if l.Scheme != "file" && l.Scheme != "sftp" {
		return Location{}, fmt.Errorf("--target %s: want a file: or sftp: URL", rawURL)
	}
	if l.Path == "/" {
		return Location{}, fmt.Errorf("--target %s names no target file (want %s://host/path/to/target.json)", l, l.Scheme)
	}
	if l.Scheme == "sftp" && user != "" {
		l.User = user
	}
	return l, nil
}

// HadoopConf fetches the target's core-site.xml and hdfs-site.xml and
// merges them (hdfs-site.xml wins), as Celos CI does.
func (t *Target) HadoopConf(ctx context.Context, c *Connector) (hadoopconf.Conf, error) {
	var confs []hadoopconf.Conf
	for _, x := range []struct {
		key string
		loc Location
	}{{KeyCoreSite, t.CoreSite}, {KeyHDFSSite, t.HDFSSite}} {
		data, err := readLocation(ctx, c, x.loc, hadoopconf.MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("target file %s: %s: %w", t.Source, x.key, err)
		}
		conf, err := hadoopconf.Parse(x.loc.String(), data)
		if err != nil {
			return nil, fmt.Errorf("target file %s: %s: %w", t.Source, x.key, err)
		}
		confs = append(confs, conf)
	}
	return hadoopconf.Merge(confs...), nil
}

// readLocation reads the regular file at l, at most limit bytes.
func readLocation(ctx context.Context, c *Connector, l Location, limit int64) ([]byte, error) {
	fsys, err := c.Open(ctx, l)
	if err != nil {
		return nil, err
	}
	return readRegular(fsys, l.Path, limit)
}

// readRegular reads name, which must be a regular file (or a symbolic link
// to one), at most limit bytes. It checks with Stat before it opens, so a
// FIFO or a device on an SFTP server is not opened there either (the local
// file system's Open checks again, without blocking, on the open file).
func readRegular(fsys FS, name string, limit int64) ([]byte, error) {
	named := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s%s: %w", fsys, name, err)
	}
	fi, err := fsys.Stat(name)
	if err == nil {
		err = regfile.Check(fi)
	}
	if err != nil {
		return nil, named(err)
	}
	data, err := ReadFile(fsys, name, limit)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, named(err)
	}
	return data, err // ReadFile's other errors name the file
}

// stripTrailingCommas removes a comma that is followed, after white space,
// by } or ], outside strings.
func stripTrailingCommas(data []byte) []byte {
	out := make([]byte, 0, len(data))
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		ch := data[i]
		if inString {
			out = append(out, ch)
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		if ch == '"' {
			inString = true
		}
		if ch == ',' {
			j := i + 1
			for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
				j++
			}
			if j < len(data) && (data[j] == '}' || data[j] == ']') {
				continue
			}
		}
		out = append(out, ch)
	}
	return out
}

func jsonError(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
