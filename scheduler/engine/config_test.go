package engine

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/google/go-cmp/cmp"
)

// loadErrs returns the engine's load errors by file.
func loadErrs(e *Engine) map[string]string {
	out := map[string]string{}
	for _, le := range e.LoadErrors() {
		out[le.File] = le.Error
	}
	return out
}

// TestSameSizeSameMtimeReplacementIsReloaded: a workflows file replaced by
// one of the same size and modification time (tar, rsync with normalised
// mtimes) is reloaded: the loader compares contents, not metadata.
func TestSameSizeSameMtimeReplacementIsReloaded(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("aaaa"))
	path := filepath.Join(r.wdir, "p.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	r.step(ts("2024-01-01T00:30Z"))
	if ids := strings.Join(r.e.WorkflowIDs(), ","); ids != "aaaa" {
		t.Fatalf("ids %s", ids)
	}
	for _, replace := range []func(data []byte) error{
		// in place (rsync --inplace, a copy over the file)
		func(data []byte) error { return os.WriteFile(path, data, 0o644) },
		// a new file renamed over it (rsync, tar)
		func(data []byte) error {
			if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
				return err
			}
			return os.Rename(path+".tmp", path)
		},
	} {
		old, _ := os.ReadFile(path)
		next := "bbbb"
		if strings.Contains(string(old), `"bbbb"`) {
			next = "aaaa"
		}
		data := []byte(strings.ReplaceAll(string(old), `"`+map[string]string{"aaaa": "bbbb", "bbbb": "aaaa"}[next]+`"`, `"`+next+`"`))
		if len(data) != len(old) {
			t.Fatal("test bug: the replacement has another size")
		}
		if err := replace(data); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		r.step(ts("2024-01-01T00:30Z"))
		if ids := strings.Join(r.e.WorkflowIDs(), ","); ids != next {
			t.Fatalf("after a same-size same-mtime replacement: ids %s, want %s", ids, next)
		}
	}
}

// TestUnchangedFilesAreNotReadAgain: a step reads only the workflows files
// whose lstat key (inode, size, mtime, ctime) changed since they were read,
// and a same-size in-place rewrite with the mtime set back is still seen
// (ctime cannot be set back). racyWindow is 0 here so the keys are trusted
// at once; the test waits for the file-system clock to tick past the key
// before it writes, as the window does in production.
func TestUnchangedFilesAreNotReadAgain(t *testing.T) {
	defer func(w time.Duration) { racyWindow = w }(racyWindow)
	racyWindow = 0
	r := newRig(t, nil, fixture.Hourly("aaaa"))
	fixture.WriteProject(t, r.wdir, "q", fixture.Hourly("q1"))
	fixture.WriteProject(t, r.wdir, "s", fixture.Hourly("s1"))
	r.step(ts("2024-01-01T00:30Z"))
	reads := r.e.loader.reads
	for range 3 {
		r.step(ts("2024-01-01T00:30Z"))
	}
	if got := r.e.loader.reads - reads; got != 0 {
		t.Fatalf("three steps over three unchanged files read %d files, want 0", got)
	}
	path := filepath.Join(r.wdir, "p.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until a new write gets a later ctime than the key's.
	key := r.e.loader.files["p.json"].key
	if key == (fileKey{}) {
		t.Fatal("the key of p.json was not trusted with racyWindow 0")
	}
	probe := filepath.Join(t.TempDir(), "tick")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(probe, &st); err != nil {
			t.Fatal(err)
		}
		if st.Ctim.Nano() > key.ctime {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file-system clock did not tick past the key's ctime in 10 s")
		}
	}
	old, _ := os.ReadFile(path)
	data := []byte(strings.ReplaceAll(string(old), `"aaaa"`, `"bbbb"`))
	if err := os.WriteFile(path, data, 0o644); err != nil { // in place, same size
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	reads = r.e.loader.reads
	r.step(ts("2024-01-01T00:30Z"))
	if got := r.e.loader.reads - reads; got != 1 {
		t.Errorf("after one file changed a step read %d files, want 1", got)
	}
	if ids := strings.Join(r.e.WorkflowIDs(), ","); ids != "bbbb,q1,s1" {
		t.Fatalf("after a same-size same-mtime rewrite in place: ids %s, want bbbb,q1,s1", ids)
	}
}

// TestSpecialFilesInWorkflowsDir: a FIFO, a socket, a symbolic link to
// /dev/zero or to a FIFO never block or feed the loader; each is a load
// error naming what it is. A symbolic link to a regular file that is not a
// celos document (a secret) is a load error that does not quote it. The
// good project loads.
func TestSpecialFilesInWorkflowsDir(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("a"))
	p := func(name string) string { return filepath.Join(r.wdir, name) }
	if err := syscall.Mkfifo(p("fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "sock") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	l, err := net.Listen("unix", filepath.Join(sockDir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("root:$6$s3cr3tXq$abcdefgh:19000:0:99999:7:::\n"), 0o600)
	outsideFifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(outsideFifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"zero.json":   "/dev/zero",
		"tofifo.json": outsideFifo,
		"sock.json":   filepath.Join(sockDir, "s"),
		"shadow.json": secret,
	} {
		if err := os.Symlink(target, p(name)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		r.step(ts("2024-01-01T00:30Z"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a step still blocked after 2 minutes")
	}
	if ids := strings.Join(r.e.WorkflowIDs(), ","); ids != "a" {
		t.Fatalf("ids %s, want a", ids)
	}
	got := loadErrs(r.e)
	want := map[string]string{
		"fifo.json":   "not a regular file (named pipe)",
		"zero.json":   "not a regular file (symbolic link to a character device)",
		"tofifo.json": "not a regular file (symbolic link to a named pipe)",
		"sock.json":   "not a regular file (symbolic link to a socket)",
		"shadow.json": "must be a JSON object (it starts with a letter)",
	}
	for name, msg := range want {
		if !strings.Contains(got[name], msg) {
			t.Errorf("%s: load error %q, want it to say %q", name, got[name], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("load errors %v", got)
	}
	for name, msg := range got {
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "root:") {
			t.Errorf("%s: load error quotes the file: %q", name, msg)
		}
	}
}

// logCounter counts the log records whose message contains a string.
type logCounter struct{ servertest.LockedBuffer }

func (l *logCounter) count(s string) int { return strings.Count(l.String(), s) }

// openEngine opens the state database ddir and an engine over wdir; close
// ends both (a server's stop).
func openEngine(t *testing.T, wdir, ddir string, log *slog.Logger) (e *Engine, close func()) {
	t.Helper()
	db, err := statedb.OpenWith(ddir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err = New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: log})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return e, func() { db.Close() }
}

// projectOf returns the project a loaded workflow comes from, by the
// command its test project gave it.
func commandOf(t *testing.T, e *Engine, id string) string {
	t.Helper()
	w, err := e.Workflow(id)
	if err != nil {
		t.Fatalf("workflow %s: %v", id, err)
	}
	return strings.Join(w.ExternalService.Command, " ")
}

// TestWorkflowOwnerSurvivesRestart: two projects define the same workflow
// id. The project that had it first keeps it across restarts, whatever the
// names of the files become; the other file is a load error naming the id
// and the owner's file, logged once.
func TestWorkflowOwnerSurvivesRestart(t *testing.T) {
	wdir, ddir := t.TempDir(), t.TempDir()
	mine, theirs := fixture.Hourly("wordcount-nyc"), fixture.Hourly("wordcount-nyc")
	mine.ExternalService.Command = []string{"echo", "mine"}
	theirs.ExternalService.Command = []string{"echo", "theirs"}
	other := fixture.Hourly("other")
	fixture.WriteProject(t, wdir, "mine", mine)
	logs := &logCounter{}
	log := slog.New(slog.NewTextHandler(logs, nil))

	e, stop := openEngine(t, wdir, ddir, log)
	// Deployed later: sorts first, defines the id again and another one.
	fixture.WriteProject(t, wdir, "athers", theirs, other)
	for range 3 {
		e.Step(t.Context(), ts("2024-01-01T00:30Z"), nil)
	}
	check := func(stage, theirFile, mineFile string) {
		t.Helper()
		if got := commandOf(t, e, "wordcount-nyc"); got != "echo mine" {
			t.Fatalf("%s: wordcount-nyc runs %q, want the first owner's echo mine", stage, got)
		}
		if _, err := e.Workflow("other"); err == nil {
			t.Errorf("%s: the clashing file's other workflows loaded; it should be skipped whole", stage)
		}
		got := loadErrs(e)
		want := map[string]string{theirFile: `workflow id "wordcount-nyc" belongs to project mine (` + mineFile + `): file skipped`}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: load errors (-want +got):\n%s", stage, diff)
		}
	}
	check("first start", "athers.json", "mine.json")
	stop()

	// Restart: the intruder still sorts first.
	e, stop = openEngine(t, wdir, ddir, log)
	check("restart", "athers.json", "mine.json")
	stop()

	// Restart with the files renamed: the owner now sorts after the other
	// by name, and keeps its id by project.
	os.Rename(filepath.Join(wdir, "mine.json"), filepath.Join(wdir, "zzz-mine.json"))
	os.Rename(filepath.Join(wdir, "athers.json"), filepath.Join(wdir, "0-theirs.json"))
	e, stop = openEngine(t, wdir, ddir, log)
	for range 2 {
		e.Step(t.Context(), ts("2024-01-01T00:30Z"), nil)
	}
	check("restart after renames", "0-theirs.json", "zzz-mine.json")
	// A change to another file does not log the clash again.
	fixture.WriteProject(t, wdir, "unrelated", fixture.Hourly("u"))
	e.Step(t.Context(), ts("2024-01-01T00:30Z"), nil)
	if n := logs.count("belongs to project mine"); n != 3 {
		t.Errorf("the clash was logged %d times over three starts, want once per start", n)
	}

	// Undeploying the owner frees the id for the other project.
	os.Remove(filepath.Join(wdir, "zzz-mine.json"))
	e.Step(t.Context(), ts("2024-01-01T00:30Z"), nil)
	if got := commandOf(t, e, "wordcount-nyc"); got != "echo theirs" {
		t.Fatalf("after the owner was removed: wordcount-nyc runs %q, want echo theirs", got)
	}
	stop()
	// ... and the new owner keeps it when the old one comes back.
	fixture.WriteProject(t, wdir, "mine", mine)
	e, stop = openEngine(t, wdir, ddir, log)
	defer stop()
	if got := commandOf(t, e, "wordcount-nyc"); got != "echo theirs" {
		t.Fatalf("after the old owner came back: wordcount-nyc runs %q, want echo theirs", got)
	}
	if le := loadErrs(e)["mine.json"]; !strings.Contains(le, "belongs to project athers (0-theirs.json)") {
		t.Errorf("load error of the returning file: %q", le)
	}
	var _ scheduler.LoadError
}

// TestOwnerFileThatDoesNotLoadKeepsItsIDs: after a restart, an owner whose
// file does not load now (caught mid-write, broken) keeps its ids: the
// other project does not take them in the meantime.
func TestOwnerFileThatDoesNotLoadKeepsItsIDs(t *testing.T) {
	wdir, ddir := t.TempDir(), t.TempDir()
	mine, theirs := fixture.Hourly("wf"), fixture.Hourly("wf")
	theirs.ExternalService.Command = []string{"echo", "theirs"}
	fixture.WriteProject(t, wdir, "mine", mine)
	e, stop := openEngine(t, wdir, ddir, discard)
	fixture.WriteProject(t, wdir, "athers", theirs)
	e.Step(t.Context(), ts("2024-01-01T00:30Z"), nil)
	stop()
	os.WriteFile(filepath.Join(wdir, "mine.json"), []byte(`{"format":`), 0o644)
	e, stop = openEngine(t, wdir, ddir, discard)
	if ids := e.WorkflowIDs(); len(ids) != 0 {
		t.Fatalf("ids %v: the other project took the id of an owner whose file does not load", ids)
	}
	if le := loadErrs(e)["athers.json"]; !strings.Contains(le, `workflow id "wf" belongs to project mine (mine.json, which does not load now)`) {
		t.Errorf("load error %q", le)
	}
	stop()

	// The same for an owner's file that is a dangling symbolic link (a
	// checkout being replaced).
	os.Remove(filepath.Join(wdir, "mine.json"))
	os.Symlink(filepath.Join(wdir, "nowhere"), filepath.Join(wdir, "mine.json"))
	e, stop = openEngine(t, wdir, ddir, discard)
	if ids := e.WorkflowIDs(); len(ids) != 0 {
		t.Fatalf("ids %v: the other project took the id of an owner whose file is a dangling link", ids)
	}
	stop()
	// Once the owner's file loads again, the owner runs.
	os.Remove(filepath.Join(wdir, "mine.json"))
	fixture.WriteProject(t, wdir, "mine", mine)
	e, stop = openEngine(t, wdir, ddir, discard)
	defer stop()
	if got := commandOf(t, e, "wf"); got != "true" {
		t.Fatalf("wf runs %q, want the owner's", got)
	}
}

// BenchmarkLoadUnchanged1000Files: a load of a workflows directory of
// 1,000 files (5 workflows each, ~3 KiB) none of which changed: "key" is
// the loader (an lstat per file, compared with the key of the version
// read), "hash" reads and hashes (SHA-256) every file, as the loader did
// before the key and still does for files younger than racyWindow, and
// "stat-only" is the mtime-and-size check of the first version (which
// missed same-size, same-mtime replacements), for comparison.
func BenchmarkLoadUnchanged1000Files(b *testing.B) {
	dir := b.TempDir()
	var total int64
	for i := range 1000 {
		var ws []workflow.Workflow
		for j := range 5 {
			w := fixture.Hourly(fmt.Sprintf("wf-%04d-%d", i, j))
			w.ExternalService.Command = []string{"/opt/jobs/run.sh", "--date", "${year}-${month}-${day}", "--hour", "${hour}"}
			w.Contacts = []workflow.Contact{{Name: "Data team", Email: "data@example.com"}}
			ws = append(ws, w)
		}
		fixture.WriteProject(b, dir, fmt.Sprintf("project-%04d", i), ws...)
		fi, _ := os.Stat(filepath.Join(dir, fmt.Sprintf("project-%04d.json", i)))
		total += fi.Size()
	}
	loadAll := func(b *testing.B, window time.Duration) {
		defer func(w time.Duration) { racyWindow = w }(racyWindow)
		racyWindow = window
		l := &loader{dir: dir, files: make(map[string]*fileEntry), log: discard}
		first := l.load()
		if len(first.ids) != 5000 || len(first.loadErrs) != 0 {
			b.Fatalf("%d workflows, load errors %v", len(first.ids), first.loadErrs)
		}
		b.SetBytes(total)
		b.ResetTimer()
		for b.Loop() {
			if l.load() != first {
				b.Fatal("rebuilt")
			}
		}
	}
	// key: the loader as it is (racyWindow 0 here, as if the files were
	// older than the window): an lstat per file, no read.
	b.Run("key", func(b *testing.B) { loadAll(b, 0) })
	// hash: every file read and hashed each time (the loader before the
	// lstat key; what it still does for files younger than racyWindow).
	b.Run("hash", func(b *testing.B) { loadAll(b, 100*365*24*time.Hour) })
	b.Run("stat-only", func(b *testing.B) {
		for b.Loop() {
			entries, err := os.ReadDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range entries {
				if _, err := e.Info(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestUnreadableOwnerRecords: when the owner records cannot be read, the
// engine still loads (first file by name), says so in the log, and does
// not write records it could not check.
func TestUnreadableOwnerRecords(t *testing.T) {
	wdir, ddir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ddir, "owner"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.WriteProject(t, wdir, "a", fixture.Hourly("wf"))
	fixture.WriteProject(t, wdir, "b", fixture.Hourly("wf"))
	logs := &logCounter{}
	e, stop := openEngine(t, wdir, ddir, slog.New(slog.NewTextHandler(logs, nil)))
	defer stop()
	if ids := strings.Join(e.WorkflowIDs(), ","); ids != "wf" {
		t.Fatalf("ids %s", ids)
	}
	if le := loadErrs(e)["b.json"]; !strings.Contains(le, `duplicate workflow id "wf" (also in a.json)`) {
		t.Errorf("load error of b.json: %q", le)
	}
	if logs.count("workflow owners not read") != 1 {
		t.Errorf("log does not say the owners were not read:\n%s", logs.String())
	}
	if logs.count("workflow owner not recorded") != 0 {
		t.Errorf("records were written although they could not be read:\n%s", logs.String())
	}
	if data, _ := os.ReadFile(filepath.Join(ddir, "owner")); string(data) != "not a directory" {
		t.Errorf("the owner path was changed: %q", data)
	}
}
