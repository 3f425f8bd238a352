package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
)

// Errors the safety checks of deploy, plan and undeploy wrap, so that
// callers (and tests) can tell them apart.
var (
	// ErrHDFSDirOverlaps: the Oozie directory HDFS_ROOT/NAME is, contains
	// or is inside the workflows or defaults directory.
	ErrHDFSDirOverlaps = errors.New("the Oozie directory overlaps the workflows or defaults directory, or the project")
	// ErrMissingDir: the target's workflows or defaults directory does
	// not exist (and --create-dirs was not given).
	ErrMissingDir = errors.New("directory of the target does not exist")
	// ErrOwnedElsewhere: the Oozie directory was deployed through
	// another workflows directory.
	ErrOwnedElsewhere = errors.New("the Oozie directory belongs to another workflows directory")
	// ErrIDClash: a workflow id is already deployed by another project
	// (or another project's workflows file cannot be read to tell).
	ErrIDClash = errors.New("workflow id already deployed by another project")
	// ErrForeignAppPath: a workflow's Oozie application path is not
	// under HDFS_ROOT/NAME.
	ErrForeignAppPath = errors.New("Oozie application path outside the deployed directory")
	// ErrUnsafeLocalFile: a file of hdfs/ is a symbolic link out of the
	// project, not a regular file, or has a name that is not UTF-8 or
	// holds a control character.
	ErrUnsafeLocalFile = errors.New("unsafe file in the project's hdfs/ directory")
)

// errUnrecorded marks an ErrOwnedElsewhere for a directory with no owner
// record that the manifest does not name either (rather than one whose
// record names another workflows directory).
var errUnrecorded = errors.New("no owner record")

// OwnerFile is the owner record deploy writes into the Oozie directory
// (HDFS_ROOT/NAME/.celos-deploy.json): which workflows directory deployed
// it. It moves with the directory (it is uploaded with it and swapped in
// with it), so no deploy or undeploy through another workflows directory
// swaps or removes the directory.
const OwnerFile = ".celos-deploy.json"

// OwnerFormat is the format field of an owner record.
const OwnerFormat = "celos.dev/deploy-owner/v1"

// ownerRecord is the content of OwnerFile.
type ownerRecord struct {
	Format       string    `json:"format"`
	Project      string    `json:"project"`
	WorkflowsDir string    `json:"workflowsDir"`
	DeployedAt   time.Time `json:"deployedAt"`
}

// wfKey identifies the workflows directory: scheme, host and port (the
// default port spelt out, never the user, which $CELOS_CI_USERNAME
// changes) and the path; a local directory by its real path.
func (s *session) wfKey() string {
	if s.wfKeyCache == "" {
		s.wfKeyCache = locationKey(s.target.WorkflowsDir)
	}
	return s.wfKeyCache
}

func locationKey(l targets.Location) string {
	if l.Scheme == "file" {
		return "file://" + filepath.ToSlash(realPath(filepath.FromSlash(l.Path)))
	}
	port := l.Port
	if port == "" {
		port = targets.DefaultSSHPort
	}
	return l.Scheme + "://" + net.JoinHostPort(strings.ToLower(l.Host), port) + l.Path
}

// serverKey is locationKey without the path: the machine (or file
// system) a location is on.
func serverKey(l targets.Location) string {
	l.Path = "/"
	return strings.TrimSuffix(locationKey(l), "/")
}

// realPath resolves the symbolic links of a local path whose last
// components may not exist yet: the longest existing prefix is resolved
// and the rest appended.
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether p is dir or inside it (both clean, slash-separated).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// checkDirs refuses a workflows or defaults directory that does not exist
// (a typo in the target file would otherwise deploy into a directory no
// server reads), unless create: then deploy creates them (plan only says
// it would).
func (s *session) checkDirs(ctx context.Context, create, dryRun bool) error {
	type dir struct {
		kind, key string
		loc       targets.Location
	}
	dirs := []dir{{"workflows", targets.KeyWorkflowsDir, s.target.WorkflowsDir}}
	if s.target.DefaultsDir != nil {
		dirs = append(dirs, dir{"defaults", targets.KeyDefaultsDir, *s.target.DefaultsDir})
	}
	for _, d := range dirs {
		fsys, err := s.o.Connector.Open(ctx, d.loc)
		if err != nil {
			return fmt.Errorf("%s directory %s: %w", d.kind, d.loc, err)
		}
		st, err := fsys.Stat(d.loc.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create && dryRun:
			s.warn("the %s directory %s does not exist; the deploy will create it (--create-dirs)", d.kind, d.loc)
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := fsys.MkdirAll(d.loc.Path); err != nil {
				return fmt.Errorf("create the %s directory %s: %w", d.kind, d.loc, err)
			}
			s.warn("created the %s directory %s (--create-dirs)", d.kind, d.loc)
		case errors.Is(err, fs.ErrNotExist):
			hint := "for a first install, rerun with --create-dirs"
			if s.undeploy {
				hint = "nothing was deployed through it"
			}
			return fmt.Errorf("the %s directory %s (%s in the target file %s) does not exist; is the target file right? (%s)%.0w",
				d.kind, d.loc, d.key, s.target.Source, hint, ErrMissingDir)
		case err != nil:
			return fmt.Errorf("%s directory %s: %w", d.kind, d.loc, err)
		case !st.IsDir():
			return fmt.Errorf("the %s directory %s (%s in the target file %s) is not a directory%.0w", d.kind, d.loc, d.key, s.target.Source, ErrMissingDir)
		}
	}
	return nil
}

// hdfsLocal reports whether the HDFS side is the installation's own disk
// (fs.defaultFS file:///): then the Oozie directory shares a file system
// with the workflows directory. It reads the target's Hadoop
// configuration, but connects to nothing.
func (s *session) hdfsLocal(ctx context.Context) (bool, error) {
	if s.conf == nil {
		conf, err := s.target.HadoopConf(ctx, s.o.Connector)
		if err != nil {
			return false, err
		}
		s.conf = conf
	}
	return s.conf.IsLocal(""), nil
}

// checkOverlap refuses an Oozie directory (HDFS_ROOT/NAME) that is,
// contains or is inside the workflows or defaults directory, when they
// share a file system: a deploy swaps the Oozie directory and an undeploy
// removes it, with everything in it. Paths are compared cleaned and
// also resolved through symbolic links: on the local disk, and over SFTP
// on the server (realpath).
func (s *session) checkOverlap(ctx context.Context, dir string) error {
	local, err := s.hdfsLocal(ctx)
	if err != nil || !local {
		return err
	}
	hdfsLoc := s.target.WorkflowsDir // the HDFS side is the workflows directory's disk
	hdfsLoc.Path = dir
	type other struct {
		kind string
		loc  targets.Location
	}
	others := []other{{"workflows", s.target.WorkflowsDir}}
	if s.target.DefaultsDir != nil {
		others = append(others, other{"defaults", *s.target.DefaultsDir})
	}
	for _, o := range others {
		if serverKey(o.loc) != serverKey(hdfsLoc) {
			continue
		}
		pairs := [][2]string{{path.Clean(dir), path.Clean(o.loc.Path)}}
		if o.loc.Scheme == "file" {
			pairs = append(pairs, [2]string{filepath.ToSlash(realPath(filepath.FromSlash(dir))), filepath.ToSlash(realPath(filepath.FromSlash(o.loc.Path)))})
		} else {
			real, err := s.serverRealPaths(ctx, o.loc, dir)
			if err != nil {
				return err
			}
			pairs = append(pairs, real)
		}
		for _, p := range pairs {
			rel := ""
			switch {
			case p[0] == p[1]:
				rel = "is"
			case within(p[0], p[1]):
				rel = "is inside"
			case within(p[1], p[0]):
				rel = "contains"
			default:
				continue
			}
			return fmt.Errorf("the Oozie directory %s %s the %s directory %s, which a deploy would replace and an undeploy delete; "+
				"choose another --hdfs-root (or hdfs.root in the target file)%.0w", s.hdfsURLOf(dir), rel, o.kind, o.loc, ErrHDFSDirOverlaps)
		}
	}
	if s.target.WorkflowsDir.Scheme == "file" {
		return s.checkProjectOverlap(dir)
	}
	return nil
}

// serverRealPaths resolves dir and loc's path through the symbolic links
// of loc's server (SFTP realpath): a workflows directory reached through a
// link (a home directory linking elsewhere) is the same directory as the
// link's target.
func (s *session) serverRealPaths(ctx context.Context, loc targets.Location, dir string) ([2]string, error) {
	fsys, err := s.o.Connector.Open(ctx, loc)
	if err != nil {
		return [2]string{}, fmt.Errorf("%s: %w", loc, err)
	}
	var real [2]string
	for i, p := range []string{dir, loc.Path} {
		key := serverKey(loc) + p
		if r, ok := s.realPaths[key]; ok {
			real[i] = r // each check runs more than once per command
			continue
		}
		r, err := targets.ResolvePath(fsys, p)
		if err != nil {
			return [2]string{}, fmt.Errorf("resolve %s%s: %w", loc.Server(), p, err)
		}
		if s.realPaths == nil {
			s.realPaths = map[string]string{}
		}
		s.realPaths[key], real[i] = r, r
	}
	return real, nil
}

// checkProjectOverlap refuses, on a local installation, an Oozie
// directory that is or contains the project directory (a checkout under
// the HDFS root): a deploy swaps it aside and removes it, an undeploy
// removes it, with the whole repository. A deploy or plan also refuses
// one inside the project's hdfs/ directory, which it uploads. Paths are
// compared resolved through symbolic links.
func (s *session) checkProjectOverlap(dir string) error {
	if s.o.DeployDir == "" {
		return nil
	}
	abs, err := filepath.Abs(s.o.DeployDir)
	if err != nil {
		return fmt.Errorf("project directory %s: %w", s.o.DeployDir, err)
	}
	project := filepath.ToSlash(realPath(abs))
	oozie := filepath.ToSlash(realPath(filepath.FromSlash(dir)))
	hdfs := path.Join(project, HDFSDirName)
	what, rel, why := "the project directory "+project, "", "which a deploy would replace and an undeploy delete"
	switch {
	case oozie == project:
		rel = "is"
	case within(project, oozie):
		rel = "contains"
	case !s.undeploy && within(oozie, hdfs):
		what, rel, why = "the project's hdfs/ directory "+hdfs, "is inside", "which the deploy uploads"
	default:
		return nil
	}
	return fmt.Errorf("the Oozie directory %s %s %s, %s; choose another --hdfs-root (or hdfs.root in the target file)%.0w",
		s.hdfsURLOf(dir), rel, what, why, ErrHDFSDirOverlaps)
}

// hdfsURLOf names dir on the HDFS side before it is connected.
func (s *session) hdfsURLOf(dir string) string {
	if s.hdfsName != "" {
		return s.hdfsName + dir
	}
	if s.conf != nil && s.conf.IsLocal("") {
		return s.target.WorkflowsDir.Server() + dir
	}
	if s.conf != nil {
		if def, err := s.conf.DefaultFS(); err == nil {
			return strings.TrimSuffix(def, "/") + dir
		}
	}
	return dir // a name for messages; connecting reports a bad fs.defaultFS
}

// readOwner reads the owner record of an Oozie directory: nil (and no
// error) when the directory has none.
func readOwner(hfs targets.FS, dir string) (*ownerRecord, error) {
	p := path.Join(dir, OwnerFile)
	st, err := hfs.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s%s is not a regular file", hfs, p)
	}
	data, err := targets.ReadFile(hfs, p, 1<<16)
	if err != nil {
		return nil, err
	}
	var rec ownerRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.Format != OwnerFormat || rec.WorkflowsDir == "" {
		return nil, fmt.Errorf("%s%s is not a celos owner record (format %s)", hfs, p, OwnerFormat)
	}
	return &rec, nil
}

// checkOwner refuses to swap or remove an Oozie directory that another
// workflows directory deployed (its owner record says so), or, without
// an owner record (deployed by an older celos or by Celos CI), one this
// workflows directory's manifest says it did not deploy. A missing
// directory is no one's.
func (s *session) checkOwner(hfs targets.FS, dir string, m *Manifest) error {
	ok, err := targets.Exists(hfs, dir)
	if err != nil || !ok {
		return err
	}
	rec, err := readOwner(hfs, dir)
	if err != nil {
		return fmt.Errorf("cannot tell which workflows directory deployed %s: %v; remove or fix the record by hand once you know%.0w",
			s.hdfsURL(dir), err, ErrOwnedElsewhere)
	}
	if rec != nil {
		if rec.WorkflowsDir == s.wfKey() {
			return nil
		}
		return fmt.Errorf("%s was deployed through the workflows directory %s, not %s (this target's %s); "+
			"a typo in the target file, or another installation sharing the HDFS root? Deploy or undeploy it with that installation's target%.0w",
			s.hdfsURL(dir), shown(rec.WorkflowsDir), s.wfKey(), targets.KeyWorkflowsDir, ErrOwnedElsewhere)
	}
	// Without a record it may be taken over below: never a directory that
	// holds another deployment's Oozie directory (an HDFS root named one
	// level too high: /user/celos for /user/celos/app and a project app).
	if inner, other, err := containedDeployment(hfs, dir); err != nil {
		return fmt.Errorf("cannot tell whether %s holds other Oozie directories: %w", s.hdfsURL(dir), err)
	} else if other != nil {
		return fmt.Errorf("%s has no celos owner record and holds the Oozie directory %s of project %s (deployed through %s): "+
			"it is an HDFS root, not an Oozie directory; is --hdfs-root (or hdfs.root in the target file) right?%.0w",
			s.hdfsURL(dir), shown(s.hdfsURL(inner)), shown(other.Project), shown(other.WorkflowsDir), ErrOwnedElsewhere)
	}
	if m != nil && (m.HDFS == nil || m.HDFS.Dir != dir) {
		return fmt.Errorf("%s exists, has no celos owner record, and this workflows directory's manifest of %s does not name it: "+
			"another installation or tool wrote it; remove it by hand if it is not in use%.0w%.0w", s.hdfsURL(dir), s.o.Project, ErrOwnedElsewhere, errUnrecorded)
	}
	if m == nil && s.manifestUnreadable {
		return fmt.Errorf("%s exists, has no celos owner record, and this workflows directory's manifest of %s is unreadable, so whether this project deployed it cannot be told: "+
			"remove it by hand if it is not in use (or restore the manifest)%.0w%.0w", s.hdfsURL(dir), s.o.Project, ErrOwnedElsewhere, errUnrecorded)
	}
	if m == nil {
		s.warn("%s has no celos owner record (deployed by Celos CI or an older celos); treating it as this workflows directory's (%s)", s.hdfsURL(dir), s.wfKey())
	}
	return nil
}

// containedDeployment returns a directory one or two levels below dir
// that has a celos owner record, and that record (nil if none is found
// within maxContainedChecks directories).
func containedDeployment(hfs targets.FS, dir string) (string, *ownerRecord, error) {
	const maxContainedChecks = 256
	checked := 0
	level := []string{dir}
	for depth := 0; depth < 2; depth++ {
		var next []string
		for _, d := range level {
			entries, err := hfs.ReadDir(d)
			if err != nil {
				return "", nil, err
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				if checked++; checked > maxContainedChecks {
					return "", nil, nil
				}
				child := path.Join(d, e.Name())
				if rec, err := readOwner(hfs, child); err == nil && rec != nil {
					return child, rec, nil
				}
				next = append(next, child)
			}
		}
		level = next
	}
	return "", nil, nil
}

// ownerData is the owner record this deploy writes.
func (s *session) ownerData() []byte {
	data, _ := json.MarshalIndent(ownerRecord{Format: OwnerFormat, Project: s.o.Project, WorkflowsDir: s.wfKey(), DeployedAt: time.Now().UTC()}, "", "  ")
	return append(data, '\n')
}

// checkIDClash refuses workflow ids that another project's workflows file
// in the workflows directory defines: the server would schedule only one
// of them. It reads the files the server loads (*.json, not hidden,
// regular files or symbolic links to them); a file it cannot read or
// parse is refused too, since it might define the same ids once fixed.
func (s *session) checkIDClash(p *workflow.Project) error {
	entries, err := s.wf.ReadDir(s.wfDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the workflows directory %s: %w", s.target.WorkflowsDir, err)
	}
	mine := map[string]bool{}
	for _, w := range p.Workflows {
		mine[w.ID] = true
	}
	own := s.o.Project + ".json"
	var problems []string
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") || name == own {
			continue
		}
		file := s.target.WorkflowsDir.Join(name).String()
		fp := path.Join(s.wfDir, name)
		info := e
		if info.Mode()&fs.ModeSymlink != 0 {
			if info, err = s.wf.Stat(fp); err != nil {
				continue // a broken link: the server loads nothing from it
			}
		}
		if !info.Mode().IsRegular() {
			continue // the server loads nothing from it either
		}
		data, err := targets.ReadFile(s.wf, fp, workflow.MaxDocumentSize)
		if err != nil {
			problems = append(problems, fmt.Sprintf("cannot read %s to check its workflow ids: %v", file, err))
			continue
		}
		var doc struct {
			Project   string `json:"project"`
			Workflows []struct {
				ID string `json:"id"`
			} `json:"workflows"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not a valid workflows file (JSON), so whether it defines the same workflow ids cannot be checked; fix or remove it", file))
			continue
		}
		owner := doc.Project
		if owner == "" {
			owner = strings.TrimSuffix(name, ".json")
		}
		for _, w := range doc.Workflows {
			if mine[w.ID] {
				problems = append(problems, fmt.Sprintf("workflow id %q is already deployed by project %q (%s)", w.ID, owner, file))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s\nRename the workflows (ids are global to the server), or undeploy the other project first", ErrIDClash, strings.Join(problems, "\n  "))
}

// appPathKeys are the Oozie properties that name an application path.
var appPathKeys = []string{"oozie.wf.application.path", "oozie.coord.application.path", "oozie.bundle.application.path"}

// checkAppPaths lists the Oozie workflows whose application path is not
// under HDFS_ROOT/NAME, where deploy puts hdfs/: every submission would
// run something else, or fail on a missing path. The target's Hadoop
// configuration is read only when a path names a file system.
func (s *session) checkAppPaths(ctx context.Context, p *workflow.Project) ([]string, error) {
	fsName := ""
	for _, w := range p.Workflows {
		for _, k := range appPathKeys {
			v := strings.ToLower(strings.TrimSpace(w.ExternalService.Properties[k]))
			if fsName == "" && (strings.Contains(v, "://") || strings.HasPrefix(v, "file:")) {
				local, err := s.hdfsLocal(ctx)
				if err != nil {
					return nil, err
				}
				fsName = "file://"
				if !local {
					def, err := s.conf.DefaultFS()
					if err != nil {
						return nil, err
					}
					fsName = strings.TrimSuffix(def, "/")
				}
			}
		}
	}
	return AppPathProblems(p, s.hdfsDir(), fsName), nil
}

// AppPathProblems lists, one message per path, the Oozie workflows of p
// whose application path (oozie.wf.application.path, and the coordinator
// and bundle ones) is not under dir, the HDFS_ROOT/NAME the project
// deploys to, on the file system fsName (hdfs://nn:8020, or file:// for a
// file:/// installation; "" when unknown: then a path naming a file
// system counts as elsewhere).
func AppPathProblems(p *workflow.Project, dir, fsName string) []string {
	var problems []string
	for _, w := range p.Workflows {
		if w.ExternalService.Type != workflow.ServiceOozie {
			continue
		}
		for _, k := range appPathKeys {
			v, ok := w.ExternalService.Properties[k]
			if !ok {
				continue
			}
			if why := appPathProblem(v, dir, fsName); why != "" {
				problems = append(problems, fmt.Sprintf("workflow %s: %s %q %s, not under %s where deploy puts hdfs/", w.ID, k, v, why, dir))
			}
		}
	}
	return problems
}

// appPathProblem says why the application path app is not under dir
// (HDFS_ROOT/NAME) on the file system fsName (hdfs://nn:8020, or
// file:// for a file:/// installation); "" when it is. ${...} tokens
// (substituted per slot) are allowed after dir/, and a single leading
// token (${nameNode}) as the file system; anywhere else they make the
// path uncheckable, which counts as not under.
func appPathProblem(app, dir, fsName string) string {
	v := strings.TrimSpace(app)
	if v == "" {
		return "is empty"
	}
	if strings.HasPrefix(v, "${") {
		end := strings.Index(v, "}")
		if end < 0 || !strings.HasPrefix(v[end+1:], "/") {
			return "starts with a ${...} token that cannot be checked"
		}
		v = v[end+1:] // ${nameNode}/path: the token names the file system
	} else if i := strings.Index(v, ":"); i > 0 && !strings.Contains(v[:i], "/") && !strings.Contains(v[:i], "$") {
		u, err := url.Parse(v)
		if err != nil {
			return "is not a valid URL"
		}
		want, err := url.Parse(fsName)
		if fsName == "" || err != nil || !strings.EqualFold(u.Scheme, want.Scheme) || !sameHost(u, want) {
			return fmt.Sprintf("names another file system than the target's (%s)", orNone(fsName))
		}
		v = u.Path
		if strings.Contains(u.Host, "$") {
			return "has a ${...} token in its host"
		}
	}
	if !strings.HasPrefix(v, "/") {
		return "is not an absolute path"
	}
	for _, part := range strings.Split(v, "/") {
		if part == ".." {
			return "has a .. component"
		}
	}
	lit := v
	if i := strings.Index(v, "${"); i >= 0 {
		lit = v[:i]
		if !strings.HasPrefix(lit, dir+"/") {
			return "has a ${...} token before the end of " + dir
		}
		return ""
	}
	if within(path.Clean(lit), dir) {
		return ""
	}
	return "is elsewhere"
}

// sameHost compares the authorities of two hdfs: (or file:) URLs, with
// HDFS's default port 8020.
func sameHost(a, b *url.URL) bool {
	norm := func(u *url.URL) string {
		h, p := strings.ToLower(u.Hostname()), u.Port()
		if p == "" && h != "" {
			p = "8020"
		}
		if h == "localhost" && strings.EqualFold(u.Scheme, "file") {
			h = ""
		}
		return h + ":" + p
	}
	return norm(a) == norm(b)
}
