package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
)

// The PostgreSQL side of celos db: migrate and export move a state between
// the file store and PostgreSQL (scheduler/statepg's Migrate and Export);
// prune --db postgres://... prunes the database.

func newDBMigrateCmd() *cobra.Command {
	var from, to string
	c := &cobra.Command{
		Use:   "migrate --from DIR --to postgres://...",
		Short: "Copy a state directory (Celos layout) into a PostgreSQL database",
		Long: `migrate copies every record of the state directory --from (slot states,
rerun markers, submit intents, paused flags, workflow owners, records of
submissions, registers) into the PostgreSQL database --to, creating its schema if needed, one
workflow per transaction. It is idempotent and resumable: run it again
after an interruption and it copies only the workflows that differ; until
then servers refuse the database, which holds part of the state. At the
end it compares the two sides by counts and a sha256 checksum and fails
if they differ.

It refuses, copying nothing, a source with files that do not parse (it
names them) and a destination holding any record the source does not hold
as it is (another server's state; a database that ran on after a first
migrate is never put back): only an empty database, or one holding part
of the source after an interruption, is copied into.
Stop the server on the directory first (migrate takes its lock) and the
servers on the database (it refuses while one is live, naming it). A
directory migrate cannot write (a snapshot mounted read-only) is read
without writing anything, not even its lock file, and it says so; a
server holding its lock is still refused. Give the
password in PGPASSWORD or ~/.pgpass. See docs/postgres.md.`,
		Example: `  PGPASSWORD=... celos db migrate --from /var/lib/celos/db --to postgres://celos@db1/celos`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usageError("celos db migrate needs --from DIR and --to postgres://...")
			}
			if !statepg.IsDSN(to) {
				return usageError("--to %q: want a PostgreSQL URL (postgres://...) or connection string (host=... dbname=...)", to)
			}
			if fi, err := os.Stat(from); err != nil || !fi.IsDir() {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("state directory %s (--from): must exist and be a directory", from)}
			}
			if !holdsState(from) {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("state directory %s (--from) holds no state (none of %s): nothing copied; give the server's --db directory", from, strings.Join(stateAreas, "/, ")+"/")}
			}
			return copyState(c.OutOrStdout(), from, to, true)
		},
	}
	c.Flags().StringVar(&from, "from", "", "the state directory to copy (as celos server --db)")
	c.Flags().StringVar(&to, "to", "", "the PostgreSQL database: a URL or a keyword/value connection string")
	return c
}

func newDBExportCmd() *cobra.Command {
	var from, to string
	c := &cobra.Command{
		Use:   "export --from postgres://... --to DIR",
		Short: "Write a PostgreSQL state database out as a state directory (Celos layout)",
		Long: `export writes every record of the PostgreSQL database --from into the state
directory --to, so that the file store can take over again. A --to that
does not exist or is an empty directory is written as
--to.export-incomplete and renamed to --to once the copy is verified
(keeping the empty directory's mode): an interrupted export never leaves
a --to holding part of the state, and run again it completes the
.export-incomplete directory. An empty mount point is refused (nothing
can be renamed over it): export into a new directory inside it. It refuses, writing nothing, a directory holding any record the
database does not hold as it is (the old directory of a migrate, another
server's): export into a new directory, or run it again on the one an
interrupted export left. It skips workflows already equal, and compares
the two sides by counts and a sha256 checksum at the end. Stop the servers
on the database first: it refuses while one is live, naming it.`,
		Example: `  celos db export --from postgres://celos@db1/celos --to /var/lib/celos/db-back`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usageError("celos db export needs --from postgres://... and --to DIR")
			}
			if !statepg.IsDSN(from) {
				return usageError("--from %q: want a PostgreSQL URL (postgres://...) or connection string (host=... dbname=...)", from)
			}
			if other := notState(to); other != "" {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s (--to) is not empty and not a state directory (it holds %s): nothing written; export into a new directory", to, other)}
			}
			return copyState(c.OutOrStdout(), to, from, false)
		},
	}
	c.Flags().StringVar(&from, "from", "", "the PostgreSQL database: a URL or a keyword/value connection string")
	c.Flags().StringVar(&to, "to", "", "the state directory to write (as celos server --db)")
	return c
}

// stateAreas are the directories of a file store's records.
var stateAreas = []string{"state", "rerun", "intent", "paused", "owner", "register", "run"}

// holdsState reports whether dir has one of the record directories (a
// state directory's, even if empty) rather than being a wrong path.
func holdsState(dir string) bool {
	for _, a := range stateAreas {
		if _, err := os.Lstat(filepath.Join(dir, a)); err == nil {
			return true
		}
	}
	return false
}

// notState names an entry of dir that a state directory does not have
// (its lock file, record directories and a mount point's lost+found),
// "" if there is none or dir does not exist.
func notState(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if n := e.Name(); n != ".lock" && n != "lost+found" && !slices.Contains(stateAreas, n) {
			return fmt.Sprintf("%q", n)
		}
	}
	return ""
}

// copyState opens both stores and copies dir into dsn (toPG) or dsn into
// dir, printing the summary.
func copyState(out io.Writer, dir, dsn string, toPG bool) error {
	ctx := context.Background()
	// A migrate completes what an interrupted one left; an export of it
	// is refused (it would write part of a state).
	pg, err := statepg.Open(ctx, dsn, statepg.Options{IncompleteCopy: toPG})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer pg.Close()
	// Before the directory is opened (created, locked): nothing is left
	// behind by a refusal.
	if err := pg.NotInUse(ctx); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	final, dir, err := exportDir(dir, toPG)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	fdb, err := openState(out, dir, toPG)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("state directory %s: %w", dir, err)}
	}
	defer fdb.Close()
	start := time.Now()
	var sum statepg.Summary
	what := ""
	if toPG {
		sum, err = statepg.Migrate(ctx, fdb, pg, out)
		what = fmt.Sprintf("%s → %s", dir, pg)
	} else {
		sum, err = statepg.Export(ctx, pg, fdb, out)
		what = fmt.Sprintf("%s → %s", pg, dir)
	}
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if final != dir {
		fdb.Close()
		if err := swapIn(dir, final); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: the copy is complete and verified in %s, but: %w", what, dir, err)}
		}
		what = fmt.Sprintf("%s → %s", pg, final)
	}
	fmt.Fprintf(out, "copied %s in %v: %d workflows written, %d already there\n%v\nsha256 %s (the same on both sides)\n",
		what, time.Since(start).Round(time.Millisecond), sum.Copied, sum.Skipped, sum.Counts, sum.Checksum)
	return nil
}

// openState opens the state directory of a copy. A migrate's source that
// cannot be written (a snapshot mounted read-only, a directory of another
// user) is read without writing anything, not even its lock file
// (statedb.Options.ReadOnly), and it says so on out: a process holding
// its lock (a server) is still refused.
func openState(out io.Writer, dir string, toPG bool) (*statedb.DB, error) {
	fdb, err := statedb.Open(dir)
	if err == nil || !toPG || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)) {
		return fdb, err
	}
	why := err.Error()
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		why = errno.Error()
	}
	fdb, err = statedb.OpenWith(dir, statedb.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	held := "its lock file is held shared while it is read, so a server holding it is refused and none can start on it"
	if _, locked := fdb.ReadOnly(); !locked {
		held = "it has no lock file, so no server holds it"
	}
	fmt.Fprintf(out, "note: %s is not writable (%s): reading it read-only, writing nothing to it; %s\n", dir, why, held)
	return fdb, nil
}

// incompleteSuffix names the directory an export into a new directory
// writes, renamed to the directory once the copy is verified.
const incompleteSuffix = ".export-incomplete"

// exportDir is where an export into dir writes: dir + incompleteSuffix
// (resumed if an interrupted export left it), renamed to dir at the end,
// when dir does not exist or is an empty directory (one holding at most a
// lock file no process holds, which is removed), so that dir never holds
// part of a state; dir itself if it is a state directory (one an earlier
// celos's export was interrupted in, or an equal state). An empty mount
// point is refused: nothing can be renamed over it. final is dir
// (absolute when staged); a migrate (toPG) reads dir itself.
func exportDir(dir string, toPG bool) (final, write string, err error) {
	if toPG || holdsState(dir) {
		return dir, dir, nil
	}
	// Absolute, so that "." or "sub/.." stages beside the directory, not
	// in it.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("%s (--to): %w", dir, err)
	}
	if filepath.Dir(abs) == abs {
		return "", "", fmt.Errorf("%s (--to) is the root directory: nothing written; export into a new directory", dir)
	}
	staging := abs + incompleteSuffix
	if other := notState(staging); other != "" {
		return "", "", fmt.Errorf("%s, where the export writes until it is verified, is not empty and not a state directory (it holds %s): nothing written; remove it", staging, other)
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		return abs, staging, nil
	}
	if err := emptyForSwap(abs); err != nil {
		return "", "", err
	}
	return abs, staging, nil
}

// emptyForSwap checks that the existing directory dir can be replaced by
// a rename at the end of an export: it is a directory, not a mount point,
// and empty; a lock file no process holds (left by a server that never
// wrote a record) is removed.
func emptyForSwap(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s (--to): %w", dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s (--to) is a symbolic link (not followed: the export is renamed into place at the end): nothing written; give the directory it points to", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s (--to) is not a directory: nothing written", dir)
	}
	if mountPoint(dir) {
		return fmt.Errorf("%s (--to) is a mount point: an export is written aside and renamed into place once verified, and nothing can be renamed over a mount point; nothing written: export into a new directory inside it (--to %s) and give that to the server",
			dir, filepath.Join(dir, "db"))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s (--to): %w", dir, err)
	}
	for _, e := range ents {
		if e.Name() != ".lock" || !e.Type().IsRegular() {
			return fmt.Errorf("%s (--to) is not empty (it holds %q): nothing written; export into a new directory", dir, e.Name())
		}
		if err := removeStaleLock(filepath.Join(dir, ".lock")); err != nil {
			return err
		}
	}
	return nil
}

// removeStaleLock removes the lock file of an empty state directory,
// refusing one a process holds (a server running on it).
func removeStaleLock(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("%w: %s is in use (lock file %s): nothing written; stop the server first", statedb.ErrLocked, filepath.Dir(path), path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the stale lock file %s: %w", path, err)
	}
	return nil
}

// mountPoint reports whether dir is the root of a mount (a bind mount
// too: statx's STATX_ATTR_MOUNT_ROOT), or on another device than its
// parent (kernels before 5.8).
func mountPoint(dir string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err == nil &&
		st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	var a, b unix.Stat_t
	return unix.Lstat(dir, &a) == nil && unix.Stat(filepath.Dir(filepath.Clean(dir)), &b) == nil && a.Dev != b.Dev
}

// swapIn renames the verified export from to to, which may be an empty
// directory (rename(2) replaces it atomically): the result keeps its mode
// and, where the process may set it, its owner. It syncs their parent, so
// that the rename survives a crash.
func swapIn(from, to string) error {
	if fi, err := os.Lstat(to); err == nil && fi.IsDir() {
		if err := os.Chmod(from, fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			// Only root may give the directory away; others keep their own.
			if err := os.Lchown(from, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
				return err
			}
		}
	}
	// rename(2) itself: os.Rename refuses any existing directory.
	if err := syscall.Rename(from, to); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("%s is a mount point (nothing can be renamed over it); export into a new directory inside it", to)
		}
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%s is no longer empty (something wrote it during the export); move it away and run the export again", to)
		}
		return fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// pruneArgs are celos db prune's, checked.
type pruneArgs struct {
	db, wfDir, olderThan string // db: the --db, a directory or a PostgreSQL DSN
	keep                 time.Duration
	before, now          time.Time
	dryRun               bool
}

// prunePostgres is celos db prune on a PostgreSQL database: the same
// rules as on a directory (statepg.Prune), counted in rows. It may run
// beside servers: each workflow is pruned in a transaction of its own.
func prunePostgres(out io.Writer, a pruneArgs) error {
	db, err := statepg.Open(context.Background(), a.db, statepg.Options{})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer db.Close()
	return prune(out, a, pruneTarget{db: db, unit: "slot states", where: fmt.Sprintf("from %s", db)})
}
