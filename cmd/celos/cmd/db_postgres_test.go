package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
)

// TestDBMigrateExport: celos db migrate copies a state directory into a
// real PostgreSQL database (a second run copies nothing), celos db export
// writes it back as the same tree, and errors name no password.
func TestDBMigrateExport(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	src := filepath.Join(t.TempDir(), "db")
	db, err := statedb.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 24 {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: "wc", Time: t0.Add(time.Duration(i) * time.Hour)}, Status: slot.Success, ExternalID: "j"}); err != nil {
			t.Fatal(err)
		}
	}
	db.SetPaused("wc", true)
	db.PutIntent(slot.ID{Workflow: "wc", Time: t0}, store.Intent{Attempt: 0, Time: t0})
	db.PutRegister("b", "k", []byte(`{"x": 1}`))
	// Two submissions before the prune's limit below, one after it.
	if failed := db.PutRuns(map[string][]store.Run{"wc": {
		{Slot: t0, At: t0.Add(time.Minute)},
		{Slot: t0.Add(time.Hour), At: t0.Add(time.Hour + time.Minute)},
		{Slot: t0, Attempt: 1, At: time.Date(2024, 2, 25, 0, 0, 0, 0, time.UTC)},
	}}); failed != nil {
		t.Fatal(failed)
	}
	db.Close()

	celos := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != want {
			t.Fatalf("celos %s: exit %d, want %d\n%s%s", pgtest.Redact(fmt.Sprint(args)), code, want, out.String(), errOut.String())
		}
		for _, s := range []string{out.String(), errOut.String()} {
			if strings.Contains(s, srv.Password) {
				t.Fatalf("celos %s printed the password:\n%s", pgtest.Redact(fmt.Sprint(args)), pgtest.Redact(strings.ReplaceAll(s, srv.Password, "xxxxx")))
			}
		}
		return out.String(), errOut.String()
	}
	out, _ := celos(0, "db", "migrate", "--from", src, "--to", dsn)
	if !strings.Contains(out, "1 workflows written, 0 already there") || !strings.Contains(out, "1 workflows: 24 slot states, 0 rerun marks, 1 submit intents, 1 paused, 0 owners, 3 submissions recorded; 1 registers") {
		t.Fatalf("migrate printed:\n%s", out)
	}
	out, _ = celos(0, "db", "migrate", "--from", src, "--to", dsn)
	if !strings.Contains(out, "0 workflows written, 1 already there") {
		t.Fatalf("second migrate printed:\n%s", out)
	}
	dst := filepath.Join(t.TempDir(), "back")
	celos(0, "db", "export", "--from", dsn, "--to", dst)
	if d := cmp.Diff(files(t, src), files(t, dst)); d != "" {
		t.Fatalf("exported tree differs (-source +export):\n%s", d)
	}

	out, _ = celos(0, "db", "prune", "--db", dsn, "--older-than", "8d", "--ignore-triggers", "--now", "2024-03-01T00:00Z", "--dry-run")
	if !strings.HasPrefix(out, "would delete 24 slot states older than 2024-02-22T00:00:00.000Z and 2 of 3 recorded submissions made before it from postgres://celos@") {
		t.Fatalf("prune --dry-run printed:\n%s", out)
	}
	if n := countRows(t, dsn, "celos_runs"); n != 3 {
		t.Fatalf("the dry run left %d submissions recorded, want 3", n)
	}
	out, _ = celos(0, "db", "prune", "--db", dsn, "--older-than", "8d", "--ignore-triggers", "--now", "2024-03-01T00:00Z")
	if !strings.HasPrefix(out, "deleted 24 slot states older than 2024-02-22T00:00:00.000Z and 2 recorded submissions made before it from postgres://celos@") {
		t.Fatalf("prune printed:\n%s", out)
	}
	if n := countRows(t, dsn, "celos_runs"); n != 1 {
		t.Fatalf("%d submissions recorded after the prune, want 1", n)
	}
	out, _ = celos(0, "db", "prune", "--db", dsn, "--older-than", "8d", "--ignore-triggers", "--now", "2024-03-01T00:00Z", "--dry-run")
	if !strings.HasPrefix(out, "would delete 0 slot states older than 2024-02-22T00:00:00.000Z and 0 of 1 recorded submissions") {
		t.Fatalf("prune --dry-run after prune printed:\n%s", out)
	}

	_, errOut := celos(ExitUsage, "db", "migrate", "--from", src)
	if !strings.Contains(errOut, "needs --from DIR and --to") {
		t.Errorf("usage: %s", errOut)
	}
	_, errOut = celos(ExitUsage, "db", "export", "--from", src, "--to", dst)
	if !strings.Contains(errOut, "want a PostgreSQL URL") {
		t.Errorf("usage: %s", errOut)
	}
	_, errOut = celos(ExitFailure, "db", "migrate", "--from", src, "--to", strings.Replace(dsn, srv.Password, "Wr0ng", 1))
	if !strings.Contains(errOut, "password authentication failed") || strings.Contains(errOut, "Wr0ng") {
		t.Errorf("wrong password: %s", errOut)
	}
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != ".lock" {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// TestDBCopyRefusesDirectoriesThatAreNotStates: celos db migrate --from a
// directory holding no state (a wrong path: the parent of the state
// directory, an empty one) said "copied ... 0 workflows" and left a lock
// file in it; celos db export --to a directory holding other files wrote
// a state database among them. Both are refused now, touching nothing.
func TestDBCopyRefusesDirectoriesThatAreNotStates(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	celos := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != ExitFailure {
			t.Fatalf("celos %s: exit %d, want %d\n%s%s", pgtest.Redact(fmt.Sprint(args)), code, ExitFailure, out.String(), errOut.String())
		}
		return errOut.String()
	}
	parent := t.TempDir()
	if err := os.MkdirAll(filepath.Join(parent, "db", "state", "wc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, dir := range []string{parent, empty} {
		before := files(t, dir)
		errOut := celos("db", "migrate", "--from", dir, "--to", dsn)
		if !strings.Contains(errOut, dir) || !strings.Contains(errOut, "holds no state") {
			t.Errorf("migrate --from %s: %s", dir, errOut)
		}
		if _, err := os.Lstat(filepath.Join(dir, ".lock")); err == nil {
			t.Errorf("migrate --from %s left a lock file", dir)
		}
		if d := cmp.Diff(before, files(t, dir)); d != "" {
			t.Errorf("migrate --from %s changed it:\n%s", dir, d)
		}
	}
	before := files(t, parent)
	errOut := celos("db", "export", "--from", dsn, "--to", parent)
	if !strings.Contains(errOut, parent) || !strings.Contains(errOut, "(it holds \"db\")") || !strings.Contains(errOut, "not a state directory") {
		t.Errorf("export --to %s: %s", parent, errOut)
	}
	if _, err := os.Lstat(filepath.Join(parent, ".lock")); err == nil {
		t.Errorf("export --to %s left a lock file", parent)
	}
	if d := cmp.Diff(before, files(t, parent)); d != "" {
		t.Errorf("export --to %s changed it:\n%s", parent, d)
	}
}

// TestDBCopyRefusesADatabaseInUse: a live server instance on the
// database (its heartbeat within its lease) makes migrate and export
// refuse, naming it, before anything is read or written: migrate replaced
// workflows' rows under the running servers, and export copied a state
// that moved while it was read. Once the instance has left, both run.
func TestDBCopyRefusesADatabaseInUse(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	db, err := statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	member, err := cluster.New(pool, cluster.Options{ID: "sched-1", Host: "h1", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := member.Join(ctx); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "db")
	sdb, err := statedb.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdb.Put(slot.State{ID: slot.ID{Workflow: "wc", Time: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}, Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	celos := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != want {
			t.Fatalf("celos %s: exit %d, want %d\n%s%s", pgtest.Redact(fmt.Sprint(args)), code, want, out.String(), errOut.String())
		}
		return errOut.String()
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"db", "migrate", "--from", src, "--to", dsn},
		{"db", "export", "--from", dsn, "--to", out},
	} {
		errOut := celos(ExitFailure, args...)
		if !strings.Contains(errOut, "in use") || !strings.Contains(errOut, `"sched-1"`) || !strings.Contains(errOut, "nothing") {
			t.Errorf("celos %v: want a refusal naming instance sched-1, got %s", args[:2], errOut)
		}
	}
	if _, err := os.Lstat(out); err == nil {
		t.Errorf("the refused export created %s", out)
	}
	if wfs := countRows(t, dsn, "celos_slots"); wfs != 0 {
		t.Fatalf("migrate wrote %d slot rows into a database in use", wfs)
	}
	if err := member.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	celos(0, "db", "migrate", "--from", src, "--to", dsn)
	celos(0, "db", "export", "--from", dsn, "--to", out)
}

// countRows counts the rows of table in the database at dsn.
func countRows(t *testing.T, dsn, table string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDBExportInterrupted: celos db export killed (SIGKILL) part way
// leaves no directory at --to that looks like a state (a server started
// on it would run the missing slots again), only --to.export-incomplete;
// run again, it completes that and renames it to --to, the same tree as
// the source. An existing empty --to (made ready by an administrator,
// mode 0750) is staged the same way and keeps its mode: it was written in
// place, and a kill left a state directory missing workflows.
func TestDBExportInterrupted(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	src := writeSuccessState(t, 400, 10)
	var out, errOut bytes.Buffer
	if code := run([]string{"db", "migrate", "--from", src, "--to", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	want := files(t, src)
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "back")
			if existing {
				if err := os.Mkdir(dst, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			killExportPartWay(t, dsn, dst)
			if _, err := os.Stat(dst); err == nil && !(existing && len(files(t, dst)) == 0) {
				if d := cmp.Diff(want, files(t, dst)); d != "" {
					t.Fatalf("the killed export left %s, a state directory missing records (-source +left):\n%.2000s", dst, d)
				}
				t.Logf("the export ended before the kill")
			}
			var out, errOut bytes.Buffer
			if code := run([]string{"db", "export", "--from", dsn, "--to", dst}, &out, &errOut); code != 0 {
				t.Fatalf("export again: exit %d\n%s%s", code, out.String(), errOut.String())
			}
			if d := cmp.Diff(want, files(t, dst)); d != "" {
				t.Fatalf("the resumed export differs (-source +export):\n%.2000s", d)
			}
			if _, err := os.Lstat(dst + ".export-incomplete"); err == nil {
				t.Errorf("%s.export-incomplete is left after the export", dst)
			}
			if existing {
				if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o750 {
					t.Errorf("%s after the export: %v, %v; want the mode it had, 0750", dst, fi.Mode(), err)
				}
			}
		})
	}
}

// killExportPartWay starts celos db export --from dsn --to dst as a
// process of its own and kills it (SIGKILL) once it has written some
// workflows (into dst or dst.export-incomplete), or once it ended.
func killExportPartWay(t *testing.T, dsn, dst string) {
	t.Helper()
	killPartWay(t, []string{"db", "export", "--from", dsn, "--to", dst}, func() int {
		n := 0
		for _, d := range []string{dst, dst + ".export-incomplete"} {
			ents, _ := os.ReadDir(filepath.Join(d, "state"))
			n += len(ents)
		}
		return n
	})
}

// killPartWay starts celos with args as a process of its own and kills it
// (SIGKILL) once written() counts 20 workflows written, or once it ended
// by itself. The 2 minutes are a bound, not a timing assertion: if it
// ended first, the callers' checks still hold.
func killPartWay(t *testing.T, args []string, written func() int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Args[0] = "celos" // testscript.Main runs it as celos
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { cmd.Wait(); close(ended) }()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case <-ended:
			return
		default:
		}
		if written() >= 20 {
			break
		}
	}
	cmd.Process.Kill()
	<-ended
}

// TestDBMigrateInterrupted: celos db migrate killed (SIGKILL) part way
// leaves a database holding some workflows and not others; a server must
// not start on it (it would run the missing workflows' slots again), so
// opening it as a server does fails naming the interrupted migrate. Run
// again, the migrate completes it, and it opens.
func TestDBMigrateInterrupted(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	src := writeSuccessState(t, 400, 10)

	killPartWay(t, []string{"db", "migrate", "--from", src, "--to", dsn}, func() int {
		n := 0
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.QueryRow(ctx, "SELECT count(DISTINCT workflow) FROM celos_slots").Scan(&n)
			conn.Close(ctx)
		}
		return n
	})
	var out, errOut bytes.Buffer
	copied := countRows(t, dsn, "celos_slots")
	pg, err := statepg.Open(ctx, dsn, statepg.Options{})
	if copied < 4000 {
		if err == nil || !errors.Is(err, statepg.ErrIncompleteCopy) || !strings.Contains(err.Error(), src) {
			t.Fatalf("a database holding %d of 4000 slot states opened as a server opens it: %v", copied, err)
		}
	} else {
		t.Logf("the migrate ended before the kill")
	}
	if err == nil {
		pg.Close()
	}
	if code := run([]string{"db", "migrate", "--from", src, "--to", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("migrate again: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	pg, err = statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatalf("after the migrate completed: %v", err)
	}
	pg.Close()
	if n := countRows(t, dsn, "celos_slots"); n != 4000 {
		t.Fatalf("%d slot states after the migrate completed, want 4000", n)
	}
}

// TestDBExportIntoAStateWithARunRecord: a file store's record of
// submissions (run/, kept for run constraints) is one of its areas: an
// export into a state directory that has one is not refused as a
// directory of other files.
func TestDBExportIntoAStateWithARunRecord(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	dir := t.TempDir()
	for _, d := range []string{"state", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "run", "wc"), []byte(`[]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"db", "export", "--from", dsn, "--to", dir}, &out, &errOut); code != 0 {
		t.Fatalf("export --to a state directory with run/: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// writeSuccessState writes a file state of workflows wf-000… with hours
// SUCCESS slots each from 2024-01-01 and returns its directory.
func writeSuccessState(t *testing.T, workflows, hours int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "db")
	db, err := statedb.OpenWith(src, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := db.Batch()
	for w := range workflows {
		for i := range hours {
			if err := b.Put(slot.State{ID: slot.ID{Workflow: fmt.Sprintf("wf-%03d", w), Time: t0.Add(time.Duration(i) * time.Hour)}, Status: slot.Success, ExternalID: "j"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, err := range b.Commit() {
		t.Fatalf("%s: %v", id, err)
	}
	return src
}
