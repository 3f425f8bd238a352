package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
)

// Result summarises a deploy or undeploy.
type Result struct {
	Project       string `json:"project"`
	Target        string `json:"target"`
	WorkflowsFile string `json:"workflowsFile"`
	HDFSDir       string `json:"hdfsDir,omitempty"`
	Workflows     int    `json:"workflows"`
	Files         int    `json:"files"`
	Bytes         int64  `json:"bytes"`
	// FilesSent and BytesSent are what was uploaded: the files of the
	// Oozie directory that changed (the others are kept or hard-linked).
	FilesSent int   `json:"filesSent"`
	BytesSent int64 `json:"bytesSent"`
	// HDFSUnchanged: the Oozie directory was already the project's; it
	// was neither uploaded nor swapped. WorkflowsUnchanged: the workflows
	// file already had this content and was not rewritten.
	HDFSUnchanged      bool    `json:"hdfsUnchanged,omitempty"`
	WorkflowsUnchanged bool    `json:"workflowsUnchanged,omitempty"`
	Seconds            float64 `json:"seconds"`
	GitCommit          string  `json:"gitCommit,omitempty"`
	// GitDirty: the tree had uncommitted changes (as the manifest records).
	GitDirty bool `json:"gitDirty,omitempty"`
	// Removed lists what an undeploy removed (URLs).
	Removed []string `json:"removed,omitempty"`
}

// compiled is a compiled project ready to deploy.
type compiled struct {
	project *workflow.Project
	json    []byte
	dir     string     // the deploy directory
	tree    *localTree // the hdfs/ directory
	// commit and dirty: git's commit of dir and whether it had changes
	// (deploy only).
	commit string
	dirty  bool
}

// compileProject compiles and checks the project in o.DeployDir.
func compileProject(o *Options) (*compiled, error) {
	if o.Compile == nil {
		return nil, errors.New("deploy: no Compile function")
	}
	dir := o.DeployDir
	if dir == "" {
		dir = "."
	}
	p, warnings, err := o.Compile(dir)
	for _, w := range warnings {
		if o.Warn != nil {
			o.Warn(w)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the project in %s is invalid; nothing was deployed:\n%w", dir, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("the project in %s is invalid; nothing was deployed:\n%w", dir, err)
	}
	if o.Project == "" {
		o.Project = p.Project
	}
	if err := ValidateProjectName(o.Project); err != nil {
		return nil, err
	}
	if p.Project != o.Project {
		origin := "its project: field, else its CUE package name"
		if o.NameSource != nil {
			origin = o.NameSource(dir)
		}
		return nil, fmt.Errorf("--project %s does not match the project's name %q (from %s); deploy it as --project %s, or rename it", o.Project, p.Project, origin, p.Project)
	}
	data, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	return &compiled{project: p, json: data, dir: dir}, nil
}

// localWork is the local side of a deploy besides the compile, done in
// the background while the deploy connects to the target (with 10,000
// files it is as long as the SSH handshake): the hdfs/ directory listed,
// the checksums the cache recorded for its files, and the git commit.
type localWork struct {
	done  chan struct{}
	tree  *localTree
	known *knownSums
	err   error
	// commit and dirty: the git commit checked out, and whether the work
	// tree has changes (gitCommit).
	commit string
	dirty  bool
}

// startLocal starts the local work for c: the listing, and then the
// recorded checksums (none without cacheDir); git's commit too if withGit.
func startLocal(c *compiled, cacheDir string, withGit bool) *localWork {
	l := &localWork{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var git sync.WaitGroup
		if withGit {
			git.Add(1)
			go func() {
				defer git.Done()
				l.commit, l.dirty = gitCommit(c.dir)
			}()
		}
		defer git.Wait()
		l.tree, l.err = scanLocal(c.dir)
		if l.err != nil {
			l.err = fmt.Errorf("read the project's %s/ directory: %w", HDFSDirName, l.err)
			l.tree = nil
			return
		}
		l.known = lookUpKnownSums(cacheDir, l.tree)
	}()
	return l
}

// wait waits for the local work and returns its error.
func (l *localWork) wait() error {
	<-l.done
	return l.err
}

// finish waits for everything the local work started.
func (l *localWork) finish() {
	if l.wait() == nil {
		l.known.wait()
	}
}

// openWithLocal opens the deploy's session while the local work runs
// (with 10,000 files that work is as long as the SSH handshake). A local
// failure is reported as the compile step's, as when it came first, and
// at once: the connection still being made is abandoned.
func openWithLocal(ctx context.Context, o Options, c *compiled) (*session, *localWork, error) {
	local := startLocal(c, o.CacheDir, true)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type opened struct {
		s   *session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := openSession(sctx, o)
		ch <- opened{s, err}
	}()
	var op opened
	select {
	case <-local.done:
		if local.err != nil {
			cancel()
		}
		op = <-ch
	case op = <-ch:
		<-local.done
	}
	if local.err != nil {
		return nil, local, &StepError{Step: "compile", Err: local.err, Intact: true} // nothing touched yet
	}
	if op.err != nil {
		return nil, local, op.err
	}
	return op.s, local, nil
}

// compile is compileProject and the listing of the hdfs/ directory.
func compile(o *Options) (*compiled, error) {
	c, err := compileProject(o)
	if err != nil {
		return nil, err
	}
	local := startLocal(c, "", false)
	if err := local.wait(); err != nil {
		return nil, err
	}
	c.tree = local.tree
	return c, nil
}

// Deploy compiles the project in o.DeployDir and deploys it to o.Target:
// the Oozie directory first, then the workflows file, then the manifest.
// On failure the returned error is a *StepError (or, before anything was
// touched, a plain error) that says which step failed and whether the
// previous deployment is intact.
//
// The steps run in this order, each in its own function; every step before
// "swap HDFS directory" fails with the previous deployment intact, and
// each later one says what it left.
func Deploy(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Step != nil {
		o.Step("compile")
	}
	c, err := compileProject(&o)
	if err != nil {
		return nil, &StepError{Step: "compile", Err: err, Intact: true} // nothing touched yet
	}
	s, local, err := openWithLocal(ctx, o, c)
	defer local.finish()
	if err != nil {
		return nil, err
	}
	c.tree, c.commit, c.dirty = local.tree, local.commit, local.dirty
	res := &Result{Project: o.Project, Target: s.target.Source, WorkflowsFile: s.wfURL(), Workflows: len(c.project.Workflows)}

	if err := s.checkTargetForDeploy(ctx, c, o.CreateDirs, o.AllowForeignAppPath); err != nil {
		return nil, err
	}

	s.begin("lock")
	lk, err := s.acquireLock(ctx, "deploy")
	if err != nil {
		return nil, s.fail(err, true)
	}
	defer lk.release()

	s.begin("read manifest")
	prev, err := s.readManifest()
	if err != nil {
		return nil, s.fail(err, true)
	}
	s.atRisk = s.deployed(prev)
	hfs, err := s.prepareHDFS(ctx, c, prev)
	if err != nil {
		return nil, err
	}

	var old string // the previous Oozie directory while the new one is tried
	var hashes map[string]string
	var listed map[string]fs.FileInfo // the live files, when kept as they were
	if c.tree != nil {
		res.HDFSDir = s.hdfsURL(s.hdfsDir())
		res.Files, res.Bytes = len(c.tree.files), c.tree.bytes
		up, err := s.uploadAndSwap(ctx, hfs, c.tree, local.known, prev, start, o.Parallel, o.Progress)
		if err != nil {
			return nil, err
		}
		old, hashes, listed = up.old, up.hashes, up.listed
		res.FilesSent, res.BytesSent, res.HDFSUnchanged = up.filesSent, up.bytesSent, up.unchanged
	}

	if sameRemoteFile(s.wf, s.wfFile, c.json) {
		res.WorkflowsUnchanged = true // nothing to write, nothing to reload
	} else if err := s.writeWorkflowsFile(ctx, hfs, c, old); err != nil {
		return nil, err
	}

	s.begin("write manifest")
	m := s.newManifest(hfs, c, hashes, listed)
	res.GitCommit, res.GitDirty = m.GitCommit, m.GitDirty
	changed := !res.WorkflowsUnchanged || (c.tree != nil && !res.HDFSUnchanged) || (c.tree == nil && prev != nil && prev.HDFS != nil)
	if err := s.recordManifest(ctx, m, prev, changed); err != nil {
		return nil, &StepError{Step: s.step, Err: err, Note: "The new deployment is in place and running; only its manifest could not be written (undeploy and plan will miss it): rerun the deploy."}
	}

	s.cleanUp(hfs, old, prev, c.tree != nil)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// checkTargetForDeploy is deploy's "check target" step: the target's
// directories, the HDFS directory's overlap with others, the workflows'
// app paths (refused outside HDFS_ROOT unless allowForeign) and workflow
// ID clashes. Nothing has been touched yet, so every failure leaves the
// previous deployment intact.
func (s *session) checkTargetForDeploy(ctx context.Context, c *compiled, createDirs, allowForeign bool) error {
	s.begin("check target")
	if err := s.checkDirs(ctx, createDirs, false); err != nil {
		return s.fail(err, true)
	}
	if err := s.checkOverlap(ctx, s.hdfsDir()); err != nil {
		return s.fail(err, true)
	}
	problems, err := s.checkAppPaths(ctx, c.project)
	if err != nil {
		return s.fail(err, true)
	}
	if len(problems) > 0 && !allowForeign {
		return s.fail(fmt.Errorf("%w:\n  %s\nHDFS_ROOT is --hdfs-root, else the target's hdfs.root, else %s. Fix the paths, or deploy anyway with --allow-foreign-app-path",
			ErrForeignAppPath, strings.Join(problems, "\n  "), DefaultHDFSRoot), true)
	}
	for _, p := range problems {
		s.warn("%s (deployed anyway: --allow-foreign-app-path)", p)
	}
	if err := s.checkIDClash(c.project); err != nil {
		return s.fail(err, true)
	}
	return nil
}

// prepareHDFS connects to HDFS when the deploy needs it (to upload, or to
// remove an Oozie directory the project no longer has), checks who owns
// the live Oozie directory, and recovers what an interrupted deploy left.
// It returns nil for hfs when HDFS is not needed. Nothing is changed but
// recover's own repairs, so every failure leaves the previous deployment
// intact.
func (s *session) prepareHDFS(ctx context.Context, c *compiled, prev *Manifest) (hfs targets.FS, err error) {
	if c.tree != nil || (prev != nil && prev.HDFS != nil) {
		s.begin("connect to HDFS")
		if hfs, err = s.openHDFS(ctx); err != nil {
			return nil, s.fail(err, true)
		}
	}
	live := s.hdfsDir()
	if c.tree != nil {
		// Before recover, which removes leftovers beside the directory.
		s.begin("check HDFS directory")
		if err := s.checkOwner(hfs, live, prev); err != nil {
			return nil, s.fail(err, true)
		}
	}
	s.begin("recover")
	if err := s.recover(hfs); err != nil {
		return nil, s.fail(err, true)
	}
	if c.tree != nil {
		// recover may have put a directory back.
		if err := s.checkOwner(hfs, live, prev); err != nil {
			return nil, s.fail(err, true)
		}
	}
	return hfs, nil
}

// swapped is what uploadAndSwap did.
type swapped struct {
	// old is the previous directory, kept until the deploy is done to
	// swap back on failure ("" when there was none, or no swap).
	old       string
	hashes    map[string]string      // every file's SHA-256
	unchanged bool                   // the live directory was kept as it is
	listed    map[string]fs.FileInfo // then: its files as listed
	filesSent int
	bytesSent int64
}

// uploadAndSwap makes the live Oozie directory the project's hdfs/ tree.
// When the live directory already is (incremental.go), nothing is
// written. Otherwise the tree is built beside it, with the owner record
// (files equal to trusted live ones hard-linked where the file system
// can, the others uploaded), and swapped in. A failed upload is removed;
// only a swap that could not put the previous directory back leaves the
// deployment broken.
func (s *session) uploadAndSwap(ctx context.Context, hfs targets.FS, tree *localTree, known *knownSums, prev *Manifest, start time.Time, parallel int, progress func(Progress)) (*swapped, error) {
	live := s.hdfsDir()
	s.begin("upload HDFS directory")
	st, err := s.inspectLive(hfs, prev)
	if err != nil {
		return nil, s.fail(err, true)
	}
	same, unchanged, err := reusable(ctx, tree, st, known)
	if err != nil {
		return nil, s.fail(err, true)
	}
	known.save(tree)
	if unchanged {
		return &swapped{hashes: same, unchanged: true, listed: st.listed}, nil
	}
	if err := hfs.MkdirAll(s.hdfsRoot); err != nil {
		return nil, s.fail(fmt.Errorf("create HDFS root %s: %w", s.hdfsURL(s.hdfsRoot), err), true)
	}
	tmp := targets.TempName(live, "tmp")
	up, err := upload(ctx, hfs, tree, uploadPlan{dest: tmp, link: same, from: live, start: start, stamps: distinctStamps(tree, st, start)}, parallel, progress)
	if err == nil {
		owner := s.ownerData()
		if werr := hfs.WriteNew(ctx, path.Join(tmp, OwnerFile), bytes.NewReader(owner), int64(len(owner)), true); werr != nil {
			err = fmt.Errorf("write the owner record %s: %w", s.hdfsURL(path.Join(tmp, OwnerFile)), werr)
		}
	}
	if err != nil {
		if rerr := hfs.RemoveAll(tmp); rerr != nil {
			s.warn("could not remove the partial upload %s (the next deploy will): %v", s.hdfsURL(tmp), rerr)
		}
		return nil, s.fail(err, true)
	}
	s.begin("swap HDFS directory")
	old, err := swapDir(hfs, tmp, live)
	if err != nil {
		_ = hfs.RemoveAll(tmp)
		if errors.Is(err, errNotRestored) {
			return nil, &StepError{Step: s.step, Err: err, Note: "The Oozie directory is missing until the next deploy restores it; rerun the deploy."}
		}
		return nil, s.fail(err, true)
	}
	return &swapped{old: old, hashes: up.hashes, filesSent: up.filesSent, bytesSent: up.bytesSent}, nil
}

// writeWorkflowsFile writes the compiled workflows file over the previous
// one. On failure the previous Oozie directory old is swapped back, so the
// old workflows file keeps running against the directory it was deployed
// with; the error says whether that worked.
func (s *session) writeWorkflowsFile(ctx context.Context, hfs targets.FS, c *compiled, old string) error {
	s.begin("write workflows file")
	if err := targets.WriteFileAtomic(ctx, s.wf, s.wfFile, c.json); err != nil {
		se := &StepError{Step: s.step, Err: fmt.Errorf("%s: %w", s.wfURL(), err), Intact: true, AtRisk: s.atRisk}
		if c.tree != nil {
			// Put the previous Oozie directory back, so the old workflows
			// file keeps running against the directory it was deployed with.
			if rerr := unswapDir(hfs, s.hdfsDir(), old); rerr != nil {
				se.Intact = false
				se.Note = fmt.Sprintf("The new Oozie directory %s is in place but the workflows file is the previous one, and restoring the previous directory failed (%v); rerun the deploy.", s.hdfsURL(s.hdfsDir()), rerr)
			}
		}
		return se
	}
	return nil
}

// newManifest records the deployment just made: who, from which commit,
// the workflows file's checksum and workflow IDs, and the Oozie
// directory's files with their checksums (hashes, from the upload) and
// modification times as HDFS reports them (listed, when the live
// directory was kept as it was listed; else listed again).
func (s *session) newManifest(hfs targets.FS, c *compiled, hashes map[string]string, listed map[string]fs.FileInfo) *Manifest {
	userName, host := who(s.o)
	commit, dirty := c.commit, c.dirty
	sum := sha256.Sum256(c.json)
	m := &Manifest{
		Format: ManifestFormat, Project: s.o.Project, DeployedAt: time.Now().UTC(),
		User: userName, Host: host, GitCommit: commit, GitDirty: dirty, CelosVersion: s.o.Version,
		Target: s.target.Source, WorkflowsDir: s.wfKey(), WorkflowsFile: s.wfURL(), WorkflowsSHA256: hex.EncodeToString(sum[:]),
	}
	for _, w := range c.project.Workflows {
		m.Workflows = append(m.Workflows, w.ID)
	}
	if c.tree != nil {
		live := s.hdfsDir()
		m.HDFS = &HDFSManifest{FS: s.hdfsName, Dir: live, Bytes: c.tree.bytes}
		mtimes := map[string]time.Time{}
		if listed != nil {
			for p, fi := range listed {
				mtimes[p] = fi.ModTime().UTC()
			}
		} else if files, _, err := targets.Walk(hfs, live); err == nil {
			for _, f := range files {
				mtimes[f.Path] = f.Info.ModTime().UTC()
			}
		}
		for _, f := range c.tree.files {
			m.HDFS.Files = append(m.HDFS.Files, ManifestFile{Path: f.rel, Size: f.size, SHA256: hashes[f.rel], ModTime: mtimes[f.rel]})
		}
	}
	return m
}

// recordManifest writes m, unless the deploy changed nothing and m says
// what prev says but for the time (the same commit, user, host, version,
// files): a deploy that changed nothing then writes nothing at all. A
// deploy that changed nothing but its provenance is recorded, without
// fsync (a manifest lost in a crash leaves prev, naming the same files).
func (s *session) recordManifest(ctx context.Context, m, prev *Manifest, changed bool) error {
	if !changed && prev != nil && sameButTime(m, prev) {
		return nil
	}
	return s.writeManifest(ctx, m, changed || prev == nil)
}

// sameButTime reports whether manifests a and b record the same
// deployment but for DeployedAt: the same header (compared as JSON) and
// the same files (compared one by one: with 10,000 files, marshalling
// both was most of recordManifest's time).
func sameButTime(a, b *Manifest) bool {
	ha, hb := *a, *b
	ha.DeployedAt, hb.DeployedAt = time.Time{}, time.Time{}
	var fa, fb []ManifestFile
	if a.HDFS != nil && b.HDFS != nil {
		da, db := *a.HDFS, *b.HDFS
		fa, fb = da.Files, db.Files
		da.Files, db.Files = nil, nil
		ha.HDFS, hb.HDFS = &da, &db
	}
	ja, erra := json.Marshal(ha)
	jb, errb := json.Marshal(hb)
	if erra != nil || errb != nil || !bytes.Equal(ja, jb) || len(fa) != len(fb) {
		return false
	}
	for i := range fa {
		x, y := fa[i], fb[i]
		if x.Path != y.Path || x.Size != y.Size || x.SHA256 != y.SHA256 || !x.ModTime.Equal(y.ModTime) {
			return false
		}
	}
	return true
}

// cleanUp is the deploy's last step, after the new deployment is in place:
// it removes the previous Oozie directory old, and the one a previous
// deploy wrote when the project no longer has an hdfs/ directory. A
// failure there only warns.
func (s *session) cleanUp(hfs targets.FS, old string, prev *Manifest, hasTree bool) {
	s.begin("clean up")
	if old != "" {
		if err := hfs.RemoveAll(old); err != nil {
			s.warn("deployed, but the previous Oozie directory %s could not be removed (the next deploy will): %v", s.hdfsURL(old), err)
		}
	}
	if stale := s.staleHDFSDir(prev, hasTree); stale != "" && s.staleOwned(hfs, stale, prev) {
		// The project no longer has an hdfs/ directory: remove the one the
		// previous deploy wrote, now that no workflow refers to it.
		if err := hfs.RemoveAll(stale); err != nil {
			s.warn("deployed, but the previous Oozie directory %s could not be removed: %v", s.hdfsURL(stale), err)
		}
	}
}

// staleHDFSDir returns the Oozie directory the previous deploy wrote when
// this deploy does not replace it: the project has no hdfs/ any more.
// readManifest keeps only a directory that is HDFS_ROOT/NAME, so that is
// the only one ever returned (a deploy to another HDFS root leaves the old
// one, with readManifest's warning), and only on the same file system
// (another one cannot be reached). The caller still checks its owner.
func (s *session) staleHDFSDir(prev *Manifest, hasTree bool) string {
	if prev == nil || prev.HDFS == nil || (hasTree && prev.HDFS.Dir == s.hdfsDir()) {
		return ""
	}
	if prev.HDFS.FS != s.hdfsName {
		s.warn("the previous deploy wrote %s%s, which this target's HDFS (%s) cannot reach; remove it by hand", shown(prev.HDFS.FS), shown(prev.HDFS.Dir), s.hdfsName)
		return ""
	}
	return prev.HDFS.Dir
}

// staleOwned reports whether the stale directory may be removed: it was
// deployed through this workflows directory (else a warning says why it
// stays).
func (s *session) staleOwned(hfs targets.FS, dir string, prev *Manifest) bool {
	if err := s.checkOwner(hfs, dir, prev); err != nil {
		s.warn("the previous Oozie directory %s is left alone: %v", s.hdfsURL(dir), err)
		return false
	}
	return true
}

// errNotRestored marks a swap that failed half way.
var errNotRestored = errors.New("and putting the previous directory back failed")

// swapDir puts tmp in place of live: live (if any) is renamed aside first,
// because no file system here replaces a non-empty directory in one step.
// It returns the aside name ("" if live did not exist) for the caller to
// remove once the new directory is confirmed. On failure the previous
// directory is put back.
func swapDir(fsys targets.FS, tmp, live string) (old string, err error) {
	exists, err := targets.Exists(fsys, live)
	if err != nil {
		return "", err
	}
	if exists {
		old = targets.TempName(live, "old")
		if err := fsys.Rename(live, old); err != nil {
			return "", fmt.Errorf("move the previous directory %s aside: %w", live, err)
		}
	}
	if err := fsys.Rename(tmp, live); err != nil {
		if old != "" {
			if rerr := fsys.Rename(old, live); rerr != nil {
				return "", fmt.Errorf("move %s into place: %v; %w from %s: %v", tmp, err, errNotRestored, old, rerr)
			}
		}
		return "", fmt.Errorf("move %s into place: %w", tmp, err)
	}
	return old, nil
}

// unswapDir undoes swapDir: live goes away and old (if any) comes back.
func unswapDir(fsys targets.FS, live, old string) error {
	if old == "" {
		return fsys.RemoveAll(live)
	}
	failed := targets.TempName(live, "failed")
	if err := fsys.Rename(live, failed); err != nil {
		return err
	}
	if err := fsys.Rename(old, live); err != nil {
		return err
	}
	return fsys.RemoveAll(failed)
}

// leftover matches what an interrupted deploy of project p leaves beside
// its Oozie directory or workflows file.
func leftover(base string) *regexp.Regexp {
	return regexp.MustCompile(`^\.` + regexp.QuoteMeta(base) + `\.(tmp|old|failed)-[0-9a-f]{12}$`)
}

// recover cleans up after an interrupted deploy of this project (run under
// the lock): if the Oozie directory is missing but an interrupted swap left
// the previous one aside, it is put back; leftover temporary files and
// directories are removed.
func (s *session) recover(hfs targets.FS) error {
	if err := s.cleanDir(s.wf, s.wfDir, s.o.Project+".json", nil); err != nil {
		return err
	}
	if err := s.cleanDir(s.wf, s.stateDir, s.o.Project+".manifest.json", nil); err != nil {
		return err
	}
	if hfs == nil {
		return nil
	}
	live := s.hdfsDir()
	return s.cleanDir(hfs, s.hdfsRoot, s.o.Project, func(entries []fs.FileInfo) error {
		if ok, err := targets.Exists(hfs, live); err != nil || ok {
			return err
		}
		var olds []fs.FileInfo
		for _, e := range entries {
			if strings.Contains(e.Name(), ".old-") {
				olds = append(olds, e)
			}
		}
		if len(olds) == 0 {
			return nil
		}
		sort.Slice(olds, func(i, j int) bool { return olds[i].ModTime().After(olds[j].ModTime()) })
		from := path.Join(s.hdfsRoot, olds[0].Name())
		if err := hfs.Rename(from, live); err != nil {
			return fmt.Errorf("restore %s from an interrupted deploy: %w", live, err)
		}
		s.warn("restored the Oozie directory %s from an interrupted deploy (%s)", s.hdfsURL(live), olds[0].Name())
		return nil
	})
}

func (s *session) cleanDir(fsys targets.FS, dir, base string, restore func([]fs.FileInfo) error) error {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	re := leftover(base)
	var mine []fs.FileInfo
	for _, e := range entries {
		if re.MatchString(e.Name()) {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	if restore != nil {
		if err := restore(mine); err != nil {
			return err
		}
	}
	for _, e := range mine {
		p := path.Join(dir, e.Name())
		if ok, _ := targets.Exists(fsys, p); !ok {
			continue // restored
		}
		if err := fsys.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s left by an interrupted deploy: %w", p, err)
		}
	}
	return nil
}
