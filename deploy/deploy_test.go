package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fx "github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// newWorkflow is a valid compiled workflow whose command echoes its id
// (fx is package fixture: this package has a type of that name).
func newWorkflow(id string) workflow.Workflow {
	w := fx.Hourly(id)
	w.ExternalService = fx.Command("echo", id)
	return w
}

func project(name string, ids ...string) *workflow.Project {
	p := fx.Project(name)
	for _, id := range ids {
		p.Workflows = append(p.Workflows, newWorkflow(id))
	}
	return p
}

const localCore = `<?xml version="1.0"?>
<configuration><property><name>fs.defaultFS</name><value>file:///</value></property></configuration>
`

// fixture is a target and a project directory on the local disk: a target
// file whose fs.defaultFS is file:///, so the HDFS side is a local
// directory too.
type fixture struct {
	root      string
	target    string // target file URL
	wfDir     string
	hdfsRoot  string
	deployDir string
	project   *workflow.Project
	conn      *targets.Connector
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{
		root:      root,
		wfDir:     filepath.Join(root, "installation", "workflows"),
		hdfsRoot:  filepath.Join(root, "installation", "hdfs"),
		deployDir: filepath.Join(root, "project"),
		project:   project("wordcount", "wordcount-lax", "wordcount-nyc"),
		conn:      targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{}),
	}
	t.Cleanup(func() { f.conn.Close() })
	// An installed server's workflows directory exists (deploy refuses a
	// missing one: ErrMissingDir).
	if err := os.MkdirAll(f.wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(root, "installation", "conf"), map[string]string{
		"core-site.xml": localCore,
		"hdfs-site.xml": "<configuration/>\n",
	})
	target := fmt.Sprintf(`{
  "hadoop.core-site.xml": "file:installation/conf/core-site.xml",
  "hadoop.hdfs-site.xml": "file:installation/conf/hdfs-site.xml",
  "workflows.dir.uri": "file:installation/workflows",
  "hdfs.root": %q
}`, filepath.ToSlash(f.hdfsRoot))
	writeFiles(t, root, map[string]string{"target.json": target})
	f.target = (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(root, "target.json"))}).String()
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{
		"workflow.xml":   "<workflow-app name='wordcount'/>\n",
		"lib/wc.jar":     strings.Repeat("jar", 1000),
		"lib/deps/x.jar": "x",
	})
	return f
}

func (f *fixture) options() Options {
	return Options{
		Target:    f.target,
		DeployDir: f.deployDir,
		Connector: f.conn,
		Compile: func(dir string) (*workflow.Project, []string, error) {
			if dir != f.deployDir {
				return nil, nil, fmt.Errorf("compile %s, want %s", dir, f.deployDir)
			}
			p := *f.project
			return &p, nil, nil
		},
		Version: "test",
	}
}

// runCommand runs deploy, plan or undeploy (cmd) with o, for the tests
// that expect the three to refuse alike.
func runCommand(ctx context.Context, cmd string, o Options) error {
	var err error
	switch cmd {
	case "deploy":
		_, err = Deploy(ctx, o)
	case "plan":
		_, err = MakePlan(ctx, o)
	case "undeploy":
		_, err = Undeploy(ctx, o)
	default:
		err = fmt.Errorf("runCommand: no command %q", cmd)
	}
	return err
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree returns every file under dir (relative path → content); nil when
// dir does not exist.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deployed is a deployed Oozie directory without the owner record deploy
// adds (OwnerFile), after checking that the record is there.
func deployed(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	if _, ok := files[OwnerFile]; !ok && files != nil {
		t.Errorf("the deployed Oozie directory has no %s", OwnerFile)
	}
	out := map[string]string{}
	for k, v := range files {
		if k != OwnerFile {
			out[k] = v
		}
	}
	return out
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func marshal(t *testing.T, p *workflow.Project) string {
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDeployPlanUndeployLocal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	p, err := MakePlan(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if !p.FirstDeploy || !p.HasChanges() || len(p.WorkflowsAdded) != 2 || len(p.FilesAdded) != 3 {
		t.Fatalf("first plan: %+v", p)
	}

	var steps []string
	o := f.options()
	o.Step = func(s string) { steps = append(steps, s) }
	var last Progress
	o.Progress = func(p Progress) { last = p }
	res, err := Deploy(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Project != "wordcount" || res.Workflows != 2 || res.Files != 3 || res.Bytes != int64(3000+len("<workflow-app name='wordcount'/>\n")+1) {
		t.Fatalf("result %+v", res)
	}
	if last.Files != 3 || last.Bytes != res.Bytes || last.TotalBytes != res.Bytes {
		t.Fatalf("last progress %+v", last)
	}
	// HDFS first, workflows file last.
	iu, iw := indexOf(steps, "upload HDFS directory"), indexOf(steps, "write workflows file")
	if iu < 0 || iw < iu || indexOf(steps, "lock") > iu {
		t.Fatalf("steps %v", steps)
	}
	if got := tree(t, f.wfDir)["wordcount.json"]; got != marshal(t, f.project) {
		t.Fatalf("workflows file:\n%s", got)
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(f.hdfsRoot, "wordcount")))); d != "" {
		t.Fatalf("HDFS dir (-want +got):\n%s", d)
	}
	// The manifest records what was written, and the lock is gone.
	m := readManifestFile(t, f)
	if m.Project != "wordcount" || m.User == "" || m.CelosVersion != "test" || m.HDFS == nil || len(m.HDFS.Files) != 3 ||
		m.HDFS.Dir != filepath.ToSlash(filepath.Join(f.hdfsRoot, "wordcount")) {
		t.Fatalf("manifest %+v", m)
	}
	if d := cmp.Diff([]string{"wordcount-lax", "wordcount-nyc"}, m.Workflows); d != "" {
		t.Fatalf("manifest workflows (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount.manifest.json"}, names(t, filepath.Join(f.wfDir, StateDir))); d != "" {
		t.Fatalf("state dir (-want +got):\n%s", d)
	}

	// Nothing changed: plan says so.
	p, err = MakePlan(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan after deploy: %+v", p)
	}

	// Change a cron, a property, add and remove a workflow; change, add and
	// remove files (one change keeps the size, so content is compared).
	f.project = project("wordcount", "wordcount-nyc", "wordcount-sfo")
	f.project.Workflows[0].Schedule.Cron = "0 30 * * * ?"
	f.project.Workflows[0].ExternalService.Env = map[string]string{"QUEUE": "default"}
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{
		"workflow.xml": "<workflow-app name='WORDCOUNT'/>\n",
		"lib/new.jar":  "new",
	})
	os.Remove(filepath.Join(f.deployDir, "hdfs", "lib", "deps", "x.jar"))
	p, err = MakePlan(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{
		Project: "wordcount", Target: p.Target, WorkflowsFile: p.WorkflowsFile, HDFSDir: p.HDFSDir,
		WorkflowsAdded:   []string{"wordcount-sfo"},
		WorkflowsRemoved: []string{"wordcount-lax"},
		WorkflowsChanged: []WorkflowChange{{ID: "wordcount-nyc", Fields: []FieldChange{
			{Path: "externalService.env", New: `{"QUEUE":"default"}`},
			{Path: "schedule.cron", Old: `"0 0 * * * ?"`, New: `"0 30 * * * ?"`},
		}}},
		FilesAdded:   []FileChange{{Path: "lib/new.jar", OldSize: -1, NewSize: 3}},
		FilesRemoved: []FileChange{{Path: "lib/deps/x.jar", OldSize: 1, NewSize: -1}},
		FilesChanged: []FileChange{{Path: "workflow.xml", OldSize: 33, NewSize: 33,
			Diff: "--- deployed/workflow.xml\n+++ new/workflow.xml\n@@ -1 +1 @@\n-<workflow-app name='wordcount'/>\n+<workflow-app name='WORDCOUNT'/>\n"}},
	}
	if d := cmp.Diff(want, p); d != "" {
		t.Fatalf("plan (-want +got):\n%s", d)
	}
	var text strings.Builder
	p.WriteText(&text)
	for _, line := range []string{
		"+ workflow wordcount-sfo", "- workflow wordcount-lax", "~ workflow wordcount-nyc",
		`schedule.cron: "0 0 * * * ?" -> "0 30 * * * ?"`, `externalService.env: (none) -> {"QUEUE":"default"}`,
		"+ lib/new.jar (3 B)", "- lib/deps/x.jar (1 B)", "~ workflow.xml (33 B, content changed)",
		"3 workflow(s) and 3 file(s) would change.",
	} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("plan text lacks %q:\n%s", line, text.String())
		}
	}

	// Redeploy: the new version replaces the old, nothing is left over.
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(f.hdfsRoot, "wordcount")))); d != "" {
		t.Fatalf("HDFS dir after redeploy (-want +got):\n%s", d)
	}
	if got := tree(t, f.wfDir)["wordcount.json"]; got != marshal(t, f.project) {
		t.Fatalf("workflows file after redeploy:\n%s", got)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, f.hdfsRoot)); d != "" {
		t.Fatalf("HDFS root (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{StateDir, "wordcount.json"}, names(t, f.wfDir)); d != "" {
		t.Fatalf("workflows dir (-want +got):\n%s", d)
	}
	if p, err := MakePlan(ctx, f.options()); err != nil || p.HasChanges() {
		t.Fatalf("plan after redeploy: %+v %v", p, err)
	}

	// A file changed behind the deployer's back (same size, new time) is
	// found by reading it.
	victim := filepath.Join(f.hdfsRoot, "wordcount", "lib", "new.jar")
	writeFiles(t, filepath.Dir(victim), map[string]string{"new.jar": "NEW"})
	os.Chtimes(victim, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if p, err := MakePlan(ctx, f.options()); err != nil || len(p.FilesChanged) != 1 || p.FilesChanged[0].Path != "lib/new.jar" {
		t.Fatalf("plan after tampering: %+v %v", p, err)
	}

	// Undeploy removes exactly what was deployed, workflows file first.
	steps = nil
	o = f.options()
	o.Project = "wordcount"
	o.Step = func(s string) { steps = append(steps, s) }
	res, err = Undeploy(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 3 || indexOf(steps, "remove workflows file") > indexOf(steps, "remove HDFS directory") {
		t.Fatalf("undeploy %+v, steps %v", res, steps)
	}
	if got := names(t, f.hdfsRoot); len(got) != 0 {
		t.Fatalf("HDFS root after undeploy: %v", got)
	}
	if d := cmp.Diff([]string{StateDir}, names(t, f.wfDir)); d != "" {
		t.Fatalf("workflows dir after undeploy (-want +got):\n%s", d)
	}
	if got := names(t, filepath.Join(f.wfDir, StateDir)); len(got) != 0 {
		t.Fatalf("state dir after undeploy: %v", got)
	}
	res, err = Undeploy(ctx, o)
	if err != nil || len(res.Removed) != 0 {
		t.Fatalf("second undeploy: %+v %v", res, err)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func readManifestFile(t *testing.T, f *fixture) *Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.wfDir, StateDir, "wordcount.manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestDeployRecordsGitCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: apt-get install git")
	}
	f := newFixture(t)
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = f.deployDir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "x")
	head := git("rev-parse", "HEAD")
	o := f.options()
	o.User = "ci-bot"
	res, err := Deploy(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifestFile(t, f)
	if res.GitCommit != head || m.GitCommit != head || m.GitDirty || m.User != "ci-bot" {
		t.Fatalf("result %+v manifest %+v, want commit %s", res, m, head)
	}
}

func TestDeployRefusesInvalidProjects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		project string // --project
		mutate  func(*fixture)
		want    string
	}{
		{"compile error", "", func(f *fixture) { f.project = nil }, "invalid; nothing was deployed"},
		{"invalid workflow", "", func(f *fixture) { f.project.Workflows[0].SchedulingStrategy.Concurrency = 0 }, "concurrency 0"},
		{"name mismatch", "other", nil, `--project other does not match the project's name "wordcount"`},
		{"traversal", "../evil", nil, "path separator"},
		{"dots", "..", nil, `contains ".."`},
		{"hidden", ".x", nil, "starts with a dot"},
		{"nul", "a\x00b", nil, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.mutate != nil {
				tc.mutate(f)
			}
			o := f.options()
			o.Project = tc.project
			if f.project == nil {
				o.Compile = func(string) (*workflow.Project, []string, error) {
					return nil, nil, errors.New("project.cue:3:5: workflows.x.schedule: incomplete value")
				}
			}
			_, err := Deploy(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var se *StepError
			if !errors.As(err, &se) || se.Step != "compile" || !se.Intact {
				t.Fatalf("want a compile StepError, got %#v", err)
			}
			if got := names(t, f.wfDir); len(got) != 0 {
				t.Fatalf("something was written: %v", got)
			}
		})
	}
	// Undeploy validates the name too.
	f := newFixture(t)
	o := f.options()
	o.Project = "a/../../b"
	if _, err := Undeploy(context.Background(), o); err == nil || !strings.Contains(err.Error(), "path separator") {
		t.Fatalf("undeploy traversal: %v", err)
	}
}

func TestDeployWithoutHDFSDir(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	// The project drops its hdfs/ directory: the deployed one goes too,
	// after the workflows file no longer needs it.
	os.RemoveAll(filepath.Join(f.deployDir, "hdfs"))
	p, err := MakePlan(ctx, f.options())
	if err != nil || !strings.HasSuffix(p.HDFSDirRemoved, "/hdfs/wordcount") || p.HDFSDir != "" || !p.HasChanges() {
		t.Fatalf("plan: %+v %v", p, err)
	}
	res, err := Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if res.HDFSDir != "" || res.Files != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := names(t, f.hdfsRoot); len(got) != 0 {
		t.Fatalf("HDFS root %v", got)
	}
	if m := readManifestFile(t, f); m.HDFS != nil {
		t.Fatalf("manifest %+v", m)
	}
	// The HDFS side is not even needed now: a target whose cluster is
	// unreachable still deploys a command-only project.
	writeFiles(t, filepath.Join(f.root, "installation", "conf"), map[string]string{
		"core-site.xml": `<configuration><property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:1</value></property></configuration>`,
	})
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
}

// TestDeployMovesHDFSRoot: a deploy to another HDFS root leaves the
// directory the previous deploy wrote where it is (deploy and undeploy
// only ever remove HDFS_ROOT/NAME, so an edited manifest cannot point them
// elsewhere) and plan and deploy warn about it; undeploy with the old root
// removes it.
func TestDeployMovesHDFSRoot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	o := f.options()
	o.HDFSRoot = filepath.ToSlash(filepath.Join(f.root, "elsewhere"))
	o.Warn = func(s string) { warnings = append(warnings, s) }
	p, err := MakePlan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.HDFSDirRemoved != "" || len(p.FilesAdded) != 3 {
		t.Fatalf("plan %+v", p)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "/installation/hdfs/wordcount") || !strings.Contains(warnings[0], "left alone") {
		t.Fatalf("plan warnings %q", warnings)
	}
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, f.hdfsRoot)); d != "" {
		t.Fatalf("old root (-want +got):\n%s", d)
	}
	if got := deployed(t, tree(t, filepath.Join(f.root, "elsewhere", "wordcount"))); len(got) != 3 {
		t.Fatalf("new root holds %v", got)
	}
	// Undeploy with the old root removes the old directory (its owner
	// record names this workflows directory), not the new one.
	o = f.options()
	o.Project = "wordcount"
	if _, err := Undeploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got := names(t, f.hdfsRoot); len(got) != 0 {
		t.Fatalf("old root after undeploy: %v", got)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, filepath.Join(f.root, "elsewhere"))); d != "" {
		t.Fatalf("new root after undeploy (-want +got):\n%s", d)
	}
}

func TestDeployLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lockPath := filepath.Join(f.wfDir, StateDir, "wordcount.lock")
	since := time.Now().Add(-2 * time.Hour).UTC()
	other, _ := json.Marshal(lockInfo{ID: "x", Project: "wordcount", User: "alice", Host: "ci-7.example", PID: 4242, Since: since, Command: "deploy"})
	writeFiles(t, filepath.Dir(lockPath), map[string]string{"wordcount.lock": string(other)})

	_, err := Deploy(ctx, f.options())
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("want LockedError, got %v", err)
	}
	for _, want := range []string{"alice@ci-7.example (pid 4242, deploy)", since.Format(time.RFC3339), "(2h", "stale", "--break-lock", lockPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lock error lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(f.wfDir + "/wordcount.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("deployed despite the lock")
	}
	// --break-lock takes it over, with a warning.
	var warnings []string
	o := f.options()
	o.BreakLock = true
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "broke the lock held by alice@ci-7.example") {
		t.Fatalf("warnings %v", warnings)
	}
	// A lock left by a dead process of this machine is stale: removed.
	host, _ := os.Hostname()
	dead := exec.Command("true")
	dead.Run()
	stale, _ := json.Marshal(lockInfo{ID: "y", Project: "wordcount", User: "bob", Host: host, PID: dead.Process.Pid, Since: time.Now()})
	writeFiles(t, filepath.Dir(lockPath), map[string]string{"wordcount.lock": string(stale)})
	warnings = nil
	o.BreakLock = false
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "stale lock") {
		t.Fatalf("warnings %v", warnings)
	}
	// A live process of this machine keeps its lock.
	live, _ := json.Marshal(lockInfo{ID: "z", Project: "wordcount", User: "carol", Host: host, PID: os.Getppid(), Since: time.Now()})
	writeFiles(t, filepath.Dir(lockPath), map[string]string{"wordcount.lock": string(live)})
	o.Project = "wordcount"
	if _, err := Undeploy(ctx, o); !errors.As(err, &le) {
		t.Fatalf("undeploy under a live lock: %v", err)
	}
}

// TestConcurrentDeploys: two deploys at once; the lock lets exactly one
// in, the other names it.
func TestConcurrentDeploys(t *testing.T) {
	f := newFixture(t)
	gate := make(chan struct{})
	var entered atomic.Int32
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &faultFS{FS: fsys, onWrite: func(name string) error {
			if strings.Contains(name, ".tmp-") && strings.HasSuffix(name, "workflow.xml") && entered.Add(1) == 1 {
				<-gate // hold the first deploy inside its upload
			}
			return nil
		}}
	}
	errs := make(chan error, 2)
	go func() { _, err := Deploy(context.Background(), f.options()); errs <- err }()
	for entered.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := Deploy(context.Background(), f.options())
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second deploy: %v", err)
	}
	close(gate)
	if err := <-errs; err != nil {
		t.Fatalf("first deploy: %v", err)
	}
}

// faultFS injects failures into a file system.
type faultFS struct {
	targets.FS
	onWrite  func(name string) error
	onRename func(from, to string) error
}

func (f *faultFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	if f.onWrite != nil {
		if err := f.onWrite(name); err != nil {
			return err
		}
	}
	return f.FS.WriteNew(ctx, name, r, size, durable)
}

func (f *faultFS) Rename(from, to string) error {
	if f.onRename != nil {
		if err := f.onRename(from, to); err != nil {
			return err
		}
	}
	return f.FS.Rename(from, to)
}

// TestDeployFailuresKeepPrevious fails each step of a redeploy in turn and
// checks that the previous deployment is intact, that the error names the
// step, and that a rerun succeeds.
func TestDeployFailuresKeepPrevious(t *testing.T) {
	boom := errors.New("injected failure")
	for _, tc := range []struct {
		step     string
		onWrite  func(name string) error
		onRename func(from, to string) error
		// notAtRisk: the step fails before the deploy may change anything,
		// so the message does not reassure about the previous deployment.
		notAtRisk bool
	}{
		{step: "upload HDFS directory", onWrite: func(name string) error {
			if strings.HasSuffix(name, "/lib/wc.jar") {
				return boom
			}
			return nil
		}},
		{step: "swap HDFS directory", onRename: func(from, to string) error {
			if strings.Contains(from, ".wordcount.tmp-") {
				return boom
			}
			return nil
		}},
		{step: "write workflows file", onRename: func(from, to string) error {
			if strings.HasSuffix(to, "/wordcount.json") {
				return boom
			}
			return nil
		}},
		{step: "write workflows file", onWrite: func(name string) error {
			if strings.Contains(name, ".wordcount.json.tmp-") {
				return boom
			}
			return nil
		}},
		{step: "lock", notAtRisk: true, onWrite: func(name string) error {
			if strings.HasSuffix(name, ".lock") {
				return boom
			}
			return nil
		}},
	} {
		t.Run(tc.step, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			before := tree(t, filepath.Join(f.root, "installation"))

			f.project = project("wordcount", "wordcount-v2")
			writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"workflow.xml": "<v2/>", "lib/wc.jar": "v2"})
			armed := true
			f.conn.Close()
			f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
			f.conn.Wrap = func(fsys targets.FS) targets.FS {
				return &faultFS{FS: fsys,
					onWrite: func(name string) error {
						if armed && tc.onWrite != nil {
							return tc.onWrite(name)
						}
						return nil
					},
					onRename: func(from, to string) error {
						if armed && tc.onRename != nil {
							return tc.onRename(from, to)
						}
						return nil
					}}
			}
			_, err := Deploy(ctx, f.options())
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step || !se.Intact || !errors.Is(err, boom) {
				t.Fatalf("want a StepError at %q, intact, got %#v", tc.step, err)
			}
			if got := strings.Contains(err.Error(), "previous deployment is intact"); got == tc.notAtRisk {
				t.Errorf("message says the previous deployment is intact: %v, want %v: %v", got, !tc.notAtRisk, err)
			}
			if d := cmp.Diff(before, tree(t, filepath.Join(f.root, "installation"))); d != "" {
				t.Fatalf("previous deployment changed (-before +after):\n%s", d)
			}
			armed = false
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if got := tree(t, f.wfDir)["wordcount.json"]; got != marshal(t, f.project) {
				t.Fatal("rerun did not deploy the new version")
			}
			if d := cmp.Diff([]string{"wordcount"}, names(t, f.hdfsRoot)); d != "" {
				t.Fatalf("HDFS root after rerun (-want +got):\n%s", d)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRecoverInterruptedSwap: a deploy that died between moving the old
// Oozie directory aside and moving the new one in left no live directory;
// the next deploy (or plan) puts the old one back first.
func TestRecoverInterruptedSwap(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(f.hdfsRoot, "wordcount")
	want := tree(t, live)
	aside := filepath.Join(f.hdfsRoot, ".wordcount.old-0123456789ab")
	if err := os.Rename(live, aside); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(f.hdfsRoot, ".wordcount.tmp-aaaaaaaaaaaa"), map[string]string{"partial": "x"})
	writeFiles(t, f.wfDir, map[string]string{".wordcount.json.tmp-bbbbbbbbbbbb": "{"})
	// Another project's leftovers are not touched.
	writeFiles(t, filepath.Join(f.hdfsRoot, ".wordcount2.tmp-aaaaaaaaaaaa"), map[string]string{"x": "x"})

	// A failing upload (of a changed file: an unchanged project uploads
	// nothing) still leaves the restored directory in place.
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"workflow.xml": "<workflow-app name='wordcount-v2'/>\n"})
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &faultFS{FS: fsys, onWrite: func(name string) error {
			if strings.HasSuffix(name, "workflow.xml") {
				return errors.New("injected")
			}
			return nil
		}}
	}
	var warnings []string
	o := f.options()
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err == nil {
		t.Fatal("deploy with a failing upload succeeded")
	}
	if d := cmp.Diff(want, tree(t, live)); d != "" {
		t.Fatalf("restored dir (-want +got):\n%s", d)
	}
	if len(warnings) == 0 || !strings.Contains(warnings[0], "restored the Oozie directory") {
		t.Fatalf("warnings %v", warnings)
	}
	if d := cmp.Diff([]string{".wordcount2.tmp-aaaaaaaaaaaa", "wordcount"}, names(t, f.hdfsRoot)); d != "" {
		t.Fatalf("HDFS root (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{StateDir, "wordcount.json"}, names(t, f.wfDir)); d != "" {
		t.Fatalf("workflows dir (-want +got):\n%s", d)
	}
}

// TestSwapFailsHalfWay: the new directory cannot be moved in and the old
// one cannot be moved back. The error says the target is not intact, and
// the next deploy restores the old directory before it deploys.
func TestSwapFailsHalfWay(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	// A changed file (an unchanged project is not swapped).
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"workflow.xml": "<workflow-app name='wordcount-v2'/>\n"})
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &faultFS{FS: fsys, onRename: func(from, to string) error {
			if strings.HasSuffix(to, "/hdfs/wordcount") {
				return errors.New("injected")
			}
			return nil
		}}
	}
	_, err := Deploy(ctx, f.options())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "swap HDFS directory" || se.Intact || !strings.Contains(err.Error(), "missing until the next deploy restores it") {
		t.Fatalf("got %v", err)
	}
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
	var warnings []string
	o := f.options()
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "restored the Oozie directory") {
		t.Fatalf("warnings %v", warnings)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, f.hdfsRoot)); d != "" {
		t.Fatalf("HDFS root (-want +got):\n%s", d)
	}
}

func TestValidateProjectName(t *testing.T) {
	for _, ok := range []string{"wordcount", "a.b-c_d", "X1"} {
		if err := ValidateProjectName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "../x", "a..b", ".hidden", "a\x00", "a b", "ü", strings.Repeat("x", 201)} {
		if err := ValidateProjectName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDiffDocumentsUnreadable(t *testing.T) {
	p := &Plan{}
	diffDocuments(p, []byte("garbage"), []byte(marshal(t, project("p", "a"))))
	if len(p.Document) != 1 || !strings.Contains(p.Document[0].Old, "unreadable") || len(p.WorkflowsAdded) != 1 || !p.HasChanges() {
		t.Fatalf("%+v", p)
	}
	p = &Plan{}
	old := project("p", "a")
	old.Format = "celos.dev/workflows/v0"
	diffDocuments(p, []byte(marshal(t, old)), []byte(marshal(t, project("p", "a"))))
	if len(p.Document) != 1 || p.Document[0].Path != "format" {
		t.Fatalf("%+v", p)
	}
}

// TestUndeployLeavesNeighbours: undeploy removes the project's own files
// and nothing that merely looks like them: other projects whose names
// share a prefix, backups beside the workflows file, foreign dot files
// in the HDFS root, another project's lock and manifest. Without a
// manifest (a project deployed by Celos CI) it removes NAME.json and
// HDFS_ROOT/NAME only.
func TestUndeployLeavesNeighbours(t *testing.T) {
	for _, withManifest := range []bool{true, false} {
		t.Run(fmt.Sprintf("manifest=%v", withManifest), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if withManifest {
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFiles(t, f.wfDir, map[string]string{"wordcount.json": marshal(t, f.project)})
				writeFiles(t, filepath.Join(f.hdfsRoot, "wordcount"), map[string]string{"workflow.xml": "<celos-ci/>"})
			}
			neighbours := map[string]string{
				"wordcount2.json":                      "{}",
				"wordcount.json.bak":                   "backup",
				"wordcount.js":                         "old Celos JS",
				StateDir + "/wordcount2.manifest.json": "{}",
				StateDir + "/wordcount2.lock":          "{}",
				".wordcount.json.tmp-not-ours":         "x",
			}
			hdfsNeighbours := map[string]string{
				"wordcount2/workflow.xml":    "<w2/>",
				"wordcount-old/workflow.xml": "<old/>",
				".wordcount.tmp-not-hex/x":   "x",
				"wordcount.txt":              "notes",
			}
			writeFiles(t, f.wfDir, neighbours)
			writeFiles(t, f.hdfsRoot, hdfsNeighbours)

			o := f.options()
			o.Project = "wordcount"
			res, err := Undeploy(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			want := 2 // workflows file, Oozie directory
			if withManifest {
				want = 3 // and the manifest
			}
			if len(res.Removed) != want {
				t.Errorf("removed %v, want %d items", res.Removed, want)
			}
			if d := cmp.Diff(neighbours, tree(t, f.wfDir)); d != "" {
				t.Errorf("workflows dir after undeploy (-want +got):\n%s", d)
			}
			if d := cmp.Diff(hdfsNeighbours, tree(t, f.hdfsRoot)); d != "" {
				t.Errorf("HDFS root after undeploy (-want +got):\n%s", d)
			}
		})
	}
}

// stallFS holds the upload of a file in the middle (after half its bytes)
// until release is closed.
type stallFS struct {
	targets.FS
	release chan struct{}
}

func (s *stallFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	return s.FS.WriteNew(ctx, name, &stallReader{r: r, left: size / 2, release: s.release}, size, durable)
}

type stallReader struct {
	r       io.Reader
	left    int64
	release chan struct{}
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		<-s.release
	} else if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

// TestUploadProgressInsideAFile: the progress of a long upload counts the
// bytes of files still in flight, not only of finished files (a single big
// jar showed 0 bytes until it was done).
func TestUploadProgressInsideAFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, HDFSDirName), map[string]string{"lib/big.jar": strings.Repeat("x", 4<<20)})
	lt, err := scanLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	fsys := &stallFS{FS: targets.Local{}, release: make(chan struct{})}
	var once sync.Once
	var mid Progress
	report := func(p Progress) {
		if p.Files == 0 && p.Bytes > 0 {
			once.Do(func() { mid = p; close(fsys.release) })
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := upload(context.Background(), fsys, lt, uploadPlan{dest: filepath.ToSlash(filepath.Join(t.TempDir(), "dest"))}, 2, report)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a hang guard, not a timing assertion
		once.Do(func() { close(fsys.release) })
		t.Fatal("no progress report counted the bytes of the file in flight")
	}
	if mid.Bytes != 2<<20 || mid.TotalBytes != 4<<20 || mid.TotalFiles != 1 {
		t.Fatalf("progress in the middle of the file: %+v, want 2 MiB of 4 MiB", mid)
	}
}

// TestManifestForeignHDFSDir: a manifest whose Oozie directory is not
// $ROOT/NAME (edited, or written by something else) is not trusted:
// undeploy and the stale clean-up of deploy would otherwise remove a
// directory no deploy of the project wrote.
func TestManifestForeignHDFSDir(t *testing.T) {
	for _, cmd := range []string{"undeploy", "deploy without hdfs/"} {
		t.Run(cmd, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			foreign := filepath.Join(f.root, "installation", "shared")
			writeFiles(t, foreign, map[string]string{"other-project/workflow.xml": "<other/>"})
			m := readManifestFile(t, f)
			m.HDFS.Dir = filepath.ToSlash(foreign)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.manifest.json": string(data)})
			var warnings []string
			o := f.options()
			o.Project = "wordcount"
			o.Warn = func(s string) { warnings = append(warnings, s) }
			if cmd == "undeploy" {
				_, err = Undeploy(ctx, o)
			} else {
				if err := os.RemoveAll(filepath.Join(f.deployDir, "hdfs")); err != nil {
					t.Fatal(err)
				}
				_, err = Deploy(ctx, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tree(t, foreign); len(got) != 1 {
				t.Fatalf("%s removed the foreign directory named by the manifest: left %v (warnings %q)", cmd, keys(got), warnings)
			}
			if len(warnings) == 0 {
				t.Errorf("no warning about the manifest")
			}
		})
	}
}

// TestLeftoverManifestTempRemoved: a manifest temporary file left by an
// interrupted deploy (killed between writing and renaming it) is removed
// by the next deploy and by undeploy, like the workflows file's.
func TestLeftoverManifestTempRemoved(t *testing.T) {
	for _, cmd := range []string{"deploy", "undeploy"} {
		t.Run(cmd, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			leftovers := map[string]string{".wordcount.manifest.json.tmp-0123456789ab": "{"}
			neighbours := map[string]string{".wordcount2.manifest.json.tmp-0123456789ab": "{"}
			state := filepath.Join(f.wfDir, StateDir)
			writeFiles(t, state, leftovers)
			writeFiles(t, state, neighbours)
			o := f.options()
			o.Project = "wordcount"
			var err error
			if cmd == "deploy" {
				_, err = Deploy(ctx, o)
			} else {
				_, err = Undeploy(ctx, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tree(t, state)
			delete(got, "wordcount.manifest.json")
			if d := cmp.Diff(neighbours, got); d != "" {
				t.Fatalf("state dir after %s (-want +got):\n%s", cmd, d)
			}
		})
	}
}
