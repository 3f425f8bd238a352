// Package statedb is the slot engine's state database: Celos's on-disk
// layout (compatible both ways), written atomically, indexed in memory, and
// locked against a second process.
//
//	<dir>/state/<workflow>/<yyyy-MM-dd>/<HH:mm:ss.SSS>Z   {"time","status","externalID","retryCount"}
//	<dir>/rerun/<workflow>/<yyyy-MM-dd>/<HH:mm:ss.SSS>Z   {"rerunTime":"<wall clock>"}
//	<dir>/paused/<workflow>                               empty file
//	<dir>/register/<bucket>/<key>                         any JSON
//	<dir>/intent/<workflow>/<yyyy-MM-dd>/<HH:mm:ss.SSS>Z  {"attempt","time"} (celos only: submit intents)
//	<dir>/.lock                                           the PID of the process holding the lock
//
// A workflow's files are read once, on first use, into an index; after
// that, reads are served from memory and every write goes to disk first
// (temp file, fsync, rename, fsync of the directory) and then to the index.
// Every write, rename, removal and mkdir is relative to a directory
// descriptor opened from the root without following links (dirfd.go).
// Nothing else may write the directory while it is open: Open takes an
// exclusive flock on .lock and a second Open fails naming the holder
// (Options.ReadOnly, for a directory that cannot be written, holds a
// shared one and writes nothing: readonly.go).
// A corrupt or unreadable slot file is reported (Problems, and an error
// from Get for that slot) and never stops other slots or workflows.
// Nothing is read, written or removed through a symbolic link below the
// root, and no FIFO or device is read: such a file is an unreadable record
// (see safefs.go); the lock file must be a regular file, never followed.
package statedb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/store"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/slot"
)

// ErrLocked: another process holds the database. The errors every store
// shares (ErrNotFound, ErrBadName, ErrCorrupt) are package store's.
var ErrLocked = errors.New("state database is locked")

// DB is an open state database. Its methods are safe for concurrent use.
type DB struct {
	noSync bool
	// readOnly is Options.ReadOnly: lock may be nil (no lock file).
	readOnly bool
	// beforeInstall is Options.BeforeInstall.
	beforeInstall func(wf string)
	dir           string
	lock          *os.File
	writes        atomic.Int64
	reads         atomic.Int64
	// dirSyncs counts directory fsyncs (for the tests of Prune).
	dirSyncs atomic.Int64

	// runsMu orders the replacements of run/<workflow> (PutRuns, a
	// prune's): a prune does not put back a record a step replaced
	// between its read and its write. Taken before mu.
	runsMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	wfs      map[string]*wfIndex
	paused   map[string]bool
	problems map[string]string
	// reloads counts Reload calls: an index read before one (by Preload,
	// without mu) may miss writes made since and is not installed.
	reloads uint64
	// bg is the running background load (LoadInBackground), nil if none;
	// it is closed when the load ends. bgReloads is reloads when it began:
	// after a Reload it installs nothing, and the next LoadInBackground
	// starts a new one.
	bg        chan struct{}
	bgReloads uint64
	// stop ends background loads: set by Close.
	stop atomic.Bool
}

// errClosed is returned by every use of a closed DB: its lock is released,
// so another process may own the files now.
var errClosed = errors.New("state database is closed")

// preloadLoaded, if set, runs in Preload between reading a workflow and
// installing its index (tests use it to interleave other calls).
var preloadLoaded func(wf string)

type wfIndex struct {
	recs    map[int64]rec
	active  map[int64]struct{} // recs whose status is not final
	corrupt map[int64]error
	reruns  map[int64]time.Time // slot time → rerunTime
	intents map[int64]store.Intent
}

type rec struct {
	status slot.Status
	ext    string
	retry  int
}

// Open opens (creating it if needed) the database in dir and takes its
// lock. It fails with ErrLocked, naming the PID of the holder, if another
// process (or another Open in this one) has it, and with a clear error if
// dir is not a writable directory.
func Open(dir string) (*DB, error) { return OpenWith(dir, Options{}) }

// Options tune a DB.
type Options struct {
	// NoSync skips the fsyncs of writes: for tests and bulk imports only,
	// never for a server (a crash may then lose or truncate state files).
	NoSync bool
	// BeforeInstall, when set, runs in background reads (Preload,
	// LoadInBackground) between reading a workflow's files and installing
	// them: tests of other packages hold a start-up read back with it.
	BeforeInstall func(wf string)
	// ReadOnly opens a directory that cannot be written (a snapshot
	// mounted read-only): nothing is created or written, not even the
	// lock file; a server holding the lock is still refused (readonly.go).
	// Every write fails with ErrReadOnly.
	ReadOnly bool
}

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (*DB, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", dir, err)
	}
	if opts.ReadOnly {
		return openReadOnly(abs, opts)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	lockPath := filepath.Join(abs, ".lock")
	f, err := openLock(lockPath)
	if errors.Is(err, ErrBadLock) {
		return nil, fmt.Errorf("state database %s: %w", abs, err)
	}
	if err != nil {
		return nil, fmt.Errorf("state database %s is not writable: %w", abs, err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		err = lockError(f, abs, lockPath, err)
		f.Close()
		return nil, err
	}
	// Only now, with the lock held, is the file truncated and written.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("state database %s is not writable: %w", abs, err)
		}
	} else {
		f.Close()
		return nil, fmt.Errorf("state database %s is not writable: %w", abs, err)
	}
	return newDB(abs, opts, f, false)
}

// newDB is the DB of directory abs whose lock file f (nil: none) is
// locked, with its paused workflows read; on an error it closes f.
func newDB(abs string, opts Options, f *os.File, readOnly bool) (*DB, error) {
	db := &DB{
		noSync:        opts.NoSync,
		beforeInstall: opts.BeforeInstall,
		readOnly:      readOnly,
		dir:           abs,
		lock:          f,
		wfs:           make(map[string]*wfIndex),
		paused:        make(map[string]bool),
		problems:      make(map[string]string),
	}
	if err := db.loadPaused(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Dir is the database's directory (absolute).
func (db *DB) Dir() string { return db.dir }

// Stats returns the file operation counters.
func (db *DB) Stats() store.Stats {
	return store.Stats{Writes: db.writes.Load(), Reads: db.reads.Load()}
}

// Problems lists the files that could not be read or parsed, with the
// reason, sorted: "state/wf/2015-09-13/13:00:00.000Z: unknown status "X"".
func (db *DB) Problems() []string {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := make([]string, 0, len(db.problems))
	for p, msg := range db.problems {
		out = append(out, p+": "+msg)
	}
	sort.Strings(out)
	return out
}

// Reload forgets the index; every workflow is read from disk again on its
// next use. For an operator who repaired files by hand (POST /clear-cache).
func (db *DB) Reload() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.reloads++
	db.wfs = make(map[string]*wfIndex)
	db.paused = make(map[string]bool)
	db.problems = make(map[string]string)
	return db.loadPaused()
}

func key(t time.Time) int64 { return t.UnixMilli() }

func keyTime(k int64) time.Time { return time.UnixMilli(k).UTC() }

// index returns the loaded index of workflow wf; db.mu is held.
func (db *DB) index(wf string) (*wfIndex, error) {
	if db.closed {
		return nil, errClosed
	}
	if err := validWorkflow(wf); err != nil {
		return nil, err
	}
	if ix := db.wfs[wf]; ix != nil {
		return ix, nil
	}
	l, err := db.load(wf)
	if err != nil {
		return nil, err
	}
	db.install(wf, l)
	return l.ix, nil
}

// install adds a loaded index and what its load found; db.mu is held.
func (db *DB) install(wf string, l *loaded) {
	db.wfs[wf] = l.ix
	for p, msg := range l.problems {
		db.problems[p] = msg
	}
}

// Preload reads the indexes of the named workflows that are not loaded
// yet, with up to workers files read at once; a server calls it before its
// first step so that start-up does not read 100,000s of files one by one.
// Workflows whose directory cannot be read are left to fail on first use.
func (db *DB) Preload(wfs []string, workers int) {
	db.mu.Lock()
	reloads := db.reloads
	db.mu.Unlock()
	db.preload(wfs, workers, reloads)
}

// preload is Preload for the index as it is after reloads Reloads: if a
// Reload came since, it reads and installs nothing more.
func (db *DB) preload(wfs []string, workers int, reloads uint64) {
	db.mu.Lock()
	if db.reloads != reloads {
		db.mu.Unlock()
		return
	}
	var todo []string
	for _, wf := range wfs {
		if db.wfs[wf] == nil && validWorkflow(wf) == nil {
			todo = append(todo, wf)
		}
	}
	db.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	workers = max(1, min(workers, len(todo)))
	jobs := make(chan string)
	var stale atomic.Bool // a Reload came: nothing read from now on is installed
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wf := range jobs {
				if db.stop.Load() || stale.Load() {
					continue // closed or reloaded: drain the jobs, read nothing more
				}
				l, err := db.load(wf)
				if err != nil {
					continue
				}
				if preloadLoaded != nil {
					preloadLoaded(wf)
				}
				if db.beforeInstall != nil {
					db.beforeInstall(wf)
				}
				db.mu.Lock()
				if db.reloads != reloads {
					stale.Store(true)
				} else if db.wfs[wf] == nil && !db.closed {
					db.install(wf, l)
				}
				db.mu.Unlock()
			}
		}()
	}
	for _, wf := range todo {
		jobs <- wf
	}
	close(jobs)
	wg.Wait()
}

// LoadInBackground starts Preload(wfs, workers) in the background and
// returns a channel closed when it ends; while one runs, it returns that
// one's channel and starts nothing (the next call after it ended loads
// what is still missing), unless a Reload came since it began: that one
// installs nothing more and stops, and a new one starts (POST
// /clear-cache during the start-up read). Reads of a workflow not loaded yet do not wait
// for it: they load that workflow themselves. A server calls it at
// start-up so that its first step need not wait for 100,000s of files
// (see engine: a step steps the workflows loaded so far). Close stops it
// between two workflows.
func (db *DB) LoadInBackground(wfs []string, workers int) <-chan struct{} {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.bg != nil && db.bgReloads == db.reloads {
		return db.bg
	}
	done := make(chan struct{})
	db.bg, db.bgReloads = done, db.reloads
	go func(reloads uint64) {
		db.preload(wfs, workers, reloads)
		db.mu.Lock()
		if db.bg == done { // (not a newer load's)
			db.bg = nil
		}
		db.mu.Unlock()
		close(done)
	}(db.reloads)
	return done
}

// Loaded reports whether workflow wf's index is in memory (reads of it
// need no file).
func (db *DB) Loaded(wf string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.wfs[wf] != nil
}

// loaded is one workflow's index as read from disk, with the problems met.
type loaded struct {
	ix       *wfIndex
	problems map[string]string
}

// load reads workflow wf's files. It touches no shared state of db (it may
// run without db.mu), except removing a crash's temporary files.
func (db *DB) load(wf string) (*loaded, error) {
	l := &loaded{
		ix: &wfIndex{
			recs:    make(map[int64]rec),
			active:  make(map[int64]struct{}),
			corrupt: make(map[int64]error),
			reruns:  make(map[int64]time.Time),
			intents: make(map[int64]store.Intent),
		},
		problems: make(map[string]string),
	}
	ix := l.ix
	problem := func(rel string, err error) { l.problems[filepath.ToSlash(rel)] = err.Error() }
	err := db.walkSlots(l, "state", wf, func(t time.Time, rel string, data []byte, rerr error, mod modTime) {
		k := key(t)
		if rerr == nil {
			st, ext, retry, perr := ParseState(data)
			if perr == nil {
				ix.recs[k] = rec{status: st, ext: ext, retry: retry}
				if !st.Final() {
					ix.active[k] = struct{}{}
				}
				return
			}
			rerr = perr
		}
		ix.corrupt[k] = fmt.Errorf("%w %s: %v", store.ErrCorrupt, filepath.Join(db.dir, rel), rerr)
		problem(rel, rerr)
	})
	if err == nil {
		err = db.walkSlots(l, "rerun", wf, func(t time.Time, rel string, data []byte, rerr error, mod modTime) {
			if rerr == nil {
				var at time.Time
				if at, rerr = parseRerun(data); rerr == nil {
					ix.reruns[key(t)] = at
					return
				}
			}
			// An unreadable marker still marks the slot, as if written at
			// the epoch (expired: dropped once the slot is final).
			ix.reruns[key(t)] = time.Time{}
			problem(rel, rerr)
		})
	}
	if err == nil {
		err = db.walkSlots(l, "intent", wf, func(t time.Time, rel string, data []byte, rerr error, mod modTime) {
			if rerr == nil {
				var in store.Intent
				if in, rerr = parseIntent(data); rerr == nil {
					ix.intents[key(t)] = in
					return
				}
			}
			// Unreadable: of an unknown attempt, written when the file
			// was (its modification time: the temporary file's, kept by
			// the rename), so that a recovery looks for a job started
			// since then only, not for any job the slot ever had.
			in := store.Intent{Attempt: -1}
			in.Time, _ = mod()
			ix.intents[key(t)] = in
			problem(rel, rerr)
		})
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// modTime returns the modification time of a slot file (UTC).
type modTime func() (time.Time, error)

// walkSlots calls fn for every slot file under <kind>/<wf>/<day>/, with its
// content or the error reading it. Leftover temporary files are removed;
// other stray names are reported as problems. No symbolic link is
// followed and no FIFO or device is read (see readRegularAt): such a slot
// file is an unreadable record, a symlinked day directory a stray name,
// and a symlinked <kind>/<wf> (or <kind>) fails the walk, naming it.
func (db *DB) walkSlots(l *loaded, kind, wf string, fn func(t time.Time, rel string, data []byte, err error, mod modTime)) error {
	bd, err := db.openDir(filepath.Join(kind, wf))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	defer bd.Close()
	days, err := bd.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	for _, d := range days {
		relDay := filepath.Join(kind, wf, d.Name())
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			removeAt(int(bd.Fd()), d.Name()) // a crash's leftover
			continue
		}
		if _, err := time.Parse(dayLayout, d.Name()); err != nil || !d.IsDir() {
			l.problems[filepath.ToSlash(relDay)] = "not a day directory (yyyy-MM-dd)"
			continue
		}
		dayDir := filepath.Join(db.dir, relDay)
		dfd, err := openat(int(bd.Fd()), d.Name(), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
		if err != nil {
			l.problems[filepath.ToSlash(relDay)] = classify(int(bd.Fd()), d.Name(), err, errNotDir).Error()
			continue
		}
		dd := os.NewFile(uintptr(dfd), dayDir)
		files, err := dd.ReadDir(-1)
		if err != nil {
			dd.Close()
			l.problems[filepath.ToSlash(relDay)] = err.Error()
			continue
		}
		for _, f := range files {
			rel := filepath.Join(relDay, f.Name())
			if strings.HasPrefix(f.Name(), tmpPrefix) {
				removeAt(int(dd.Fd()), f.Name()) // a crash's leftover
				continue
			}
			// A directory with a slot file's name is an unreadable record
			// (readRegularAt refuses it), as a FIFO is, not a stray name:
			// the slot would look as if it had no record.
			t, err := parseSlotPath(d.Name(), f.Name())
			if err != nil {
				l.problems[filepath.ToSlash(rel)] = "not a slot file (HH:mm:ss.SSSZ)"
				continue
			}
			data, err := readRegularAt(int(dd.Fd()), f.Name(), filepath.Join(db.dir, rel))
			db.reads.Add(1)
			fn(t, rel, data, err, func() (time.Time, error) {
				// Of the name in the day directory opened (not followed).
				var st unix.Stat_t
				if err := unix.Fstatat(int(dd.Fd()), f.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return time.Time{}, err
				}
				return time.Unix(st.Mtim.Unix()).UTC(), nil
			})
		}
		dd.Close()
	}
	return nil
}
