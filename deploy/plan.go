package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets"
)

// Plan is what a deploy would change on the target.
type Plan struct {
	Project       string `json:"project"`
	Target        string `json:"target"`
	WorkflowsFile string `json:"workflowsFile"`
	HDFSDir       string `json:"hdfsDir,omitempty"`
	// HDFSDirRemoved is the Oozie directory of the previous deploy when
	// this one would remove it (the project has no hdfs/ any more).
	HDFSDirRemoved string `json:"hdfsDirRemoved,omitempty"`
	// FirstDeploy is true when the target has no workflows file of the
	// project yet.
	FirstDeploy bool `json:"firstDeploy"`
	// Document lists changes of the workflows file outside its workflows
	// (format, project), or why the deployed file could not be compared.
	Document         []FieldChange    `json:"document,omitempty"`
	WorkflowsAdded   []string         `json:"workflowsAdded,omitempty"`
	WorkflowsRemoved []string         `json:"workflowsRemoved,omitempty"`
	WorkflowsChanged []WorkflowChange `json:"workflowsChanged,omitempty"`
	FilesAdded       []FileChange     `json:"filesAdded,omitempty"`
	FilesRemoved     []FileChange     `json:"filesRemoved,omitempty"`
	FilesChanged     []FileChange     `json:"filesChanged,omitempty"`
	// Warnings about the target, also passed to Options.Warn: application
	// paths deploy would refuse, a manifest not followed, directories
	// --create-dirs would create (compile warnings are not repeated here).
	Warnings []string `json:"warnings,omitempty"`
}

// WorkflowChange lists the changed fields of one workflow.
type WorkflowChange struct {
	ID     string        `json:"id"`
	Fields []FieldChange `json:"fields"`
}

// FieldChange is one changed value: Path is a dotted path
// (schedule.cron, externalService.properties.queue); Old and New are
// compact JSON, "" when absent.
type FieldChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// FileChange is one file of the Oozie directory (sizes in bytes; -1 when
// absent on that side).
type FileChange struct {
	Path    string `json:"path"`
	OldSize int64  `json:"oldSize"`
	NewSize int64  `json:"newSize"`
	// Diff is the unified diff of a changed text file (plandiff.go);
	// NoDiff says why there is none ("binary", "larger than 512.0 kB").
	Diff   string `json:"diff,omitempty"`
	NoDiff string `json:"noDiff,omitempty"`
	// Kind says what a removed entry is when it is not a regular file
	// ("directory", "symbolic link", "named pipe", ...): the deploy
	// rebuilds the Oozie directory without it.
	Kind string `json:"kind,omitempty"`
}

// HasChanges reports whether deploying would change anything.
func (p *Plan) HasChanges() bool {
	return p.FirstDeploy || p.HDFSDirRemoved != "" || len(p.Document)+len(p.WorkflowsAdded)+len(p.WorkflowsRemoved)+len(p.WorkflowsChanged)+
		len(p.FilesAdded)+len(p.FilesRemoved)+len(p.FilesChanged) > 0
}

// MakePlan compiles the project and compares it with what the target
// holds: the workflows file field by field, and the Oozie directory file
// by file (sizes, then content: the manifest's checksums while a file's
// size and time are unchanged, else the file is read). It changes nothing
// and takes no lock.
func MakePlan(ctx context.Context, o Options) (*Plan, error) {
	if o.Step != nil {
		o.Step("compile")
	}
	c, err := compile(&o)
	if err != nil {
		return nil, err
	}
	s, err := openSession(ctx, o)
	if err != nil {
		return nil, err
	}
	p := &Plan{Project: o.Project, Target: s.target.Source, WorkflowsFile: s.wfURL()}
	warn := s.o.Warn
	s.o.Warn = func(msg string) {
		p.Warnings = append(p.Warnings, msg)
		if warn != nil {
			warn(msg)
		}
	}

	s.begin("check target")
	if err := s.checkDirs(ctx, o.CreateDirs, true); err != nil {
		return nil, err
	}
	if err := s.checkOverlap(ctx, s.hdfsDir()); err != nil {
		return nil, err
	}
	problems, err := s.checkAppPaths(ctx, c.project)
	if err != nil {
		return nil, err
	}
	for _, msg := range problems {
		if o.AllowForeignAppPath {
			s.warn("%s (--allow-foreign-app-path)", msg)
		} else {
			s.warn("%s: deploy refuses this without --allow-foreign-app-path", msg)
		}
	}
	if err := s.checkIDClash(c.project); err != nil {
		return nil, err
	}

	s.begin("read workflows file")
	old, err := targets.ReadFile(s.wf, s.wfFile, 64<<20)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.FirstDeploy = true
		for _, w := range c.project.Workflows {
			p.WorkflowsAdded = append(p.WorkflowsAdded, w.ID)
		}
	case err != nil:
		return nil, fmt.Errorf("%s: %w", s.wfURL(), err)
	default:
		diffDocuments(p, old, c.json)
	}

	s.begin("read manifest")
	m, err := s.readManifest()
	if err != nil {
		return nil, err
	}
	if c.tree == nil && (m == nil || m.HDFS == nil) {
		return p, nil
	}
	s.begin("list HDFS directory")
	hfs, err := s.openHDFS(ctx)
	if err != nil {
		return nil, err
	}
	if stale := s.staleHDFSDir(m, c.tree != nil); stale != "" && s.staleOwned(hfs, stale, m) {
		p.HDFSDirRemoved = s.hdfsURL(stale)
	}
	if c.tree == nil {
		return p, nil
	}
	live := s.hdfsDir()
	p.HDFSDir = s.hdfsURL(live)
	if err := s.checkOwner(hfs, live, m); err != nil {
		return nil, err
	}
	listed, err := diffHDFSDir(p, hfs, live, c.tree, m)
	if err != nil {
		return nil, err
	}
	if err := addTextDiffs(p, hfs, live, c.tree, listed); err != nil {
		return nil, err
	}
	return p, nil
}

// diffHDFSDir compares the project's hdfs/ tree with the Oozie directory
// live on the target, file by file, into p's Files* fields: sizes first,
// then content (the manifest m's checksums while a file's size and time
// are unchanged, else the remote file is read). It returns the regular
// files listed, by relative path.
func diffHDFSDir(p *Plan, hfs targets.FS, live string, tree *localTree, m *Manifest) (map[string]fs.FileInfo, error) {
	remote := map[string]targets.File{}
	files, others, err := walkLive(hfs, live, tree)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list %s: %w", p.HDFSDir, err)
	}
	listed := make(map[string]fs.FileInfo, len(files))
	for _, f := range files {
		remote[f.Path] = f
		listed[f.Path] = f.Info
	}
	delete(remote, OwnerFile) // written by deploy, not part of hdfs/
	known := map[string]ManifestFile{}
	if m != nil && m.HDFS != nil && m.HDFS.Dir == live {
		for _, f := range m.HDFS.Files {
			known[f.Path] = f
		}
	}
	for _, f := range tree.files {
		r, ok := remote[f.rel]
		if !ok {
			p.FilesAdded = append(p.FilesAdded, FileChange{Path: f.rel, OldSize: -1, NewSize: f.size})
			continue
		}
		delete(remote, f.rel)
		if r.Size != f.size {
			p.FilesChanged = append(p.FilesChanged, FileChange{Path: f.rel, OldSize: r.Size, NewSize: f.size})
			continue
		}
		same, err := sameContent(hfs, path.Join(live, f.rel), r, m, known[f.rel], f.path)
		if err != nil {
			return nil, err
		}
		if !same {
			p.FilesChanged = append(p.FilesChanged, FileChange{Path: f.rel, OldSize: r.Size, NewSize: f.size})
		}
	}
	for _, r := range remote {
		p.FilesRemoved = append(p.FilesRemoved, FileChange{Path: r.Path, OldSize: r.Size, NewSize: -1})
	}
	p.FilesRemoved = append(p.FilesRemoved, others...)
	sort.Slice(p.FilesRemoved, func(i, j int) bool { return p.FilesRemoved[i].Path < p.FilesRemoved[j].Path })
	return listed, nil
}

// walkLive lists the live Oozie directory: its regular files, and what
// else a deploy of tree would not keep: entries that are neither regular
// files nor directories, and directories tree does not have that hold
// nothing (one holding something shows by what it holds).
func walkLive(hfs targets.FS, live string, tree *localTree) (files []targets.File, others []FileChange, err error) {
	dirs := map[string]bool{}
	for _, d := range tree.dirs {
		dirs[d] = true
	}
	var walk func(rel string) (empty bool, err error)
	walk = func(rel string) (bool, error) {
		entries, err := hfs.ReadDir(path.Join(live, rel))
		if err != nil {
			return false, err
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				empty, err := walk(p)
				if err != nil {
					return false, err
				}
				if empty && !dirs[p] {
					others = append(others, FileChange{Path: p + "/", NewSize: -1, Kind: regfile.Kind(e.Mode())})
				}
			case e.Mode().IsRegular():
				files = append(files, targets.File{Path: p, Size: e.Size(), Info: e})
			default:
				others = append(others, FileChange{Path: p, NewSize: -1, Kind: regfile.Kind(e.Mode())})
			}
		}
		return len(entries) == 0, nil
	}
	if _, err := walk(""); err != nil {
		return nil, nil, err
	}
	return files, others, nil
}

// sameContent compares a local file with a remote one of the same size:
// by the checksum manifest m recorded (rec) while m trusts it, else by
// reading the remote file.
func sameContent(hfs targets.FS, remotePath string, r targets.File, m *Manifest, rec ManifestFile, local string) (bool, error) {
	want, err := hashLocal(local)
	if err != nil {
		return false, err
	}
	if m != nil && m.trusts(rec, r.Size, r.Info.ModTime()) {
		return rec.SHA256 == want, nil
	}
	f, err := openListed(hfs, remotePath, r.Info)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("read %s: %w", shown(remotePath), err)
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}

// openListed opens the remote file listed as info, and refuses it when
// the file opened is not the one listed (its handle's size and time):
// SFTP's open follows a symbolic link put in its place since the listing,
// to a file of the server the plan would print. (HDFS has no links.)
func openListed(hfs targets.FS, name string, info fs.FileInfo) (io.ReadCloser, error) {
	f, err := hfs.Open(name)
	if err != nil {
		return nil, err
	}
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok && info != nil {
		fi, err := st.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s%s: %w", hfs, shown(name), err)
		}
		if !fi.Mode().IsRegular() || fi.Size() != info.Size() || !fi.ModTime().Equal(info.ModTime()) {
			f.Close()
			return nil, fmt.Errorf("%s%s changed since it was listed (rewritten, or replaced by a symbolic link); run the plan again", hfs, shown(name))
		}
	}
	return f, nil
}

// diffDocuments compares the deployed workflows file with the new one.
func diffDocuments(p *Plan, oldData, newData []byte) {
	if bytes.Equal(oldData, newData) {
		return
	}
	var oldDoc, newDoc map[string]any
	if err := json.Unmarshal(oldData, &oldDoc); err != nil || oldDoc == nil {
		p.Document = append(p.Document, FieldChange{Path: "(file)", Old: "unreadable: not a JSON object", New: "a valid workflows document"})
		_ = json.Unmarshal(newData, &newDoc)
		for _, w := range workflowsByID(newDoc["workflows"]) {
			p.WorkflowsAdded = append(p.WorkflowsAdded, w.id)
		}
		return
	}
	if err := json.Unmarshal(newData, &newDoc); err != nil {
		p.Document = append(p.Document, FieldChange{Path: "(file)", Old: "?", New: err.Error()})
		return
	}
	for _, k := range unionKeys(oldDoc, newDoc) {
		if k == "workflows" {
			continue
		}
		diffValue(k, oldDoc[k], newDoc[k], &p.Document)
	}
	oldWF, newWF := workflowsByID(oldDoc["workflows"]), workflowsByID(newDoc["workflows"])
	oldIdx := map[string]any{}
	for _, w := range oldWF {
		oldIdx[w.id] = w.v
	}
	for _, w := range newWF {
		ov, ok := oldIdx[w.id]
		if !ok {
			p.WorkflowsAdded = append(p.WorkflowsAdded, w.id)
			continue
		}
		delete(oldIdx, w.id)
		var fields []FieldChange
		diffValue("", ov, w.v, &fields)
		if len(fields) > 0 {
			p.WorkflowsChanged = append(p.WorkflowsChanged, WorkflowChange{ID: w.id, Fields: fields})
		}
	}
	for _, w := range oldWF {
		if _, ok := oldIdx[w.id]; ok {
			p.WorkflowsRemoved = append(p.WorkflowsRemoved, w.id)
		}
	}
}

type idValue struct {
	id string
	v  any
}

// workflowsByID returns the elements of a workflows array with their ids
// (the index for an element without one).
func workflowsByID(v any) []idValue {
	arr, _ := v.([]any)
	out := make([]idValue, 0, len(arr))
	for i, e := range arr {
		id := fmt.Sprintf("#%d", i)
		if m, ok := e.(map[string]any); ok {
			if s, ok := m["id"].(string); ok {
				id = s
			}
		}
		out = append(out, idValue{id, e})
	}
	return out
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// diffValue appends the differences between a and b under path: objects
// key by key, everything else (arrays included) as a whole.
func diffValue(p string, a, b any, out *[]FieldChange) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for _, k := range unionKeys(am, bm) {
			sub := pathLabel(k)
			if p != "" {
				sub = p + "." + sub
			}
			diffValue(sub, am[k], bm[k], out)
		}
		return
	}
	if reflect.DeepEqual(a, b) {
		return
	}
	*out = append(*out, FieldChange{Path: p, Old: compact(a), New: compact(b)})
}

// pathLabel writes a key of a field path: as it is, or quoted when it has
// a space, a quote, a control character or is not UTF-8, so that a key
// cannot forge a line of the plan or restyle the terminal.
func pathLabel(k string) string {
	if !utf8.ValidString(k) || strings.IndexFunc(k, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}

func compact(v any) string {
	if v == nil {
		return ""
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// WriteText renders the plan for people, with at most DefaultDiffLines
// lines of each changed file's diff.
func (p *Plan) WriteText(w io.Writer) { p.WriteTextDiff(w, DefaultDiffLines) }

// WriteTextDiff is WriteText with at most diffLines lines of each changed
// file's diff (all of it when diffLines < 0).
func (p *Plan) WriteTextDiff(w io.Writer, diffLines int) {
	if !p.HasChanges() {
		fmt.Fprintf(w, "No changes: %s is up to date on %s.\n", p.Project, p.Target)
		return
	}
	fmt.Fprintf(w, "Plan for %s on %s:\n", p.Project, p.Target)
	fmt.Fprintf(w, "workflows file %s", p.WorkflowsFile)
	if p.FirstDeploy {
		fmt.Fprint(w, " (new)")
	}
	fmt.Fprintln(w)
	for _, c := range p.Document {
		fmt.Fprintf(w, "  ~ %s: %s -> %s\n", c.Path, orNone(c.Old), orNone(c.New))
	}
	for _, id := range p.WorkflowsAdded {
		fmt.Fprintf(w, "  + workflow %s\n", pathLabel(id))
	}
	for _, id := range p.WorkflowsRemoved {
		fmt.Fprintf(w, "  - workflow %s\n", pathLabel(id))
	}
	for _, c := range p.WorkflowsChanged {
		fmt.Fprintf(w, "  ~ workflow %s\n", pathLabel(c.ID))
		for _, f := range c.Fields {
			fmt.Fprintf(w, "      %s: %s -> %s\n", f.Path, orNone(f.Old), orNone(f.New))
		}
	}
	if p.HDFSDirRemoved != "" {
		fmt.Fprintf(w, "HDFS directory %s\n  - removed (the previous deploy's Oozie directory)\n", p.HDFSDirRemoved)
	}
	if p.HDFSDir != "" {
		fmt.Fprintf(w, "HDFS directory %s\n", p.HDFSDir)
		for _, f := range p.FilesAdded {
			fmt.Fprintf(w, "  + %s (%s)\n", shown(f.Path), HumanBytes(f.NewSize))
		}
		for _, f := range p.FilesRemoved {
			what := HumanBytes(f.OldSize)
			if f.Kind != "" {
				what = f.Kind
			}
			fmt.Fprintf(w, "  - %s (%s)\n", shown(f.Path), what)
		}
		for _, f := range p.FilesChanged {
			size := HumanBytes(f.OldSize) + " -> " + HumanBytes(f.NewSize)
			if f.OldSize == f.NewSize {
				size = HumanBytes(f.NewSize) + ", content changed"
			}
			if f.NoDiff != "" {
				size += ", " + f.NoDiff
			}
			fmt.Fprintf(w, "  ~ %s (%s)\n", shown(f.Path), size)
			if f.Diff != "" {
				writeDiff(w, f.Diff, diffLines)
			}
		}
	}
	n := len(p.WorkflowsAdded) + len(p.WorkflowsRemoved) + len(p.WorkflowsChanged)
	m := len(p.FilesAdded) + len(p.FilesRemoved) + len(p.FilesChanged)
	fmt.Fprintf(w, "%d workflow(s) and %d file(s) would change.\n", n, m)
}

// Shown is shown, for the commands that print what deploy read from a
// target (celos deployments).
func Shown(s string) string { return shown(s) }

// shown writes a name or value read from the target (a file name of the
// live Oozie directory, an owner record's or a manifest's claim, a lock's
// owner) as it is, or quoted when it is not UTF-8 or holds a control or
// format character: a newline would forge lines of the plan or of an
// error, an escape sequence restyle the terminal or CI log, a bidi
// override reorder what reviewers read.
func shown(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// HumanBytes formats a byte count (1.5 MB, 312 B).
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %sB", float64(n)/float64(div), strings.Split("k,M,G,T,P,E", ",")[exp])
}
