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
// Nothing else may write the directory while it is open: Open takes an
// exclusive flock on .lock and a second Open fails naming the holder.
// A corrupt or unreadable slot file is reported (Problems, and an error
// from Get for that slot) and never stops other slots or workflows.
// Nothing is read or written through a symbolic link below the root, and
// no FIFO or device is read: such a file is an unreadable record (see
// safefs.go); the lock file must be a regular file, never followed.
package statedb

import (
	"bytes"
	"encoding/json"
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

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
)

// RerunExpiry is how long a rerun marker lives after it was written (Celos's
// RerunState.EXPIRATION_DAYS); celos keeps a marker past it until its slot
// is final.
const RerunExpiry = 14 * 24 * time.Hour

// Errors of the database, wrapped with details.
var (
	// ErrLocked: another process holds the database.
	ErrLocked = errors.New("state database is locked")
	// ErrNotFound: no such register.
	ErrNotFound = errors.New("not found")
	// ErrBadName: a workflow id, bucket or key that cannot be a path component.
	ErrBadName = errors.New("bad name")
	// ErrCorrupt: a slot file that does not parse.
	ErrCorrupt = errors.New("corrupt state file")
)

// DB is an open state database. Its methods are safe for concurrent use.
type DB struct {
	noSync bool
	dir    string
	lock   *os.File
	writes atomic.Int64
	reads  atomic.Int64
	// dirSyncs counts directory fsyncs (for the tests of Prune).
	dirSyncs atomic.Int64

	mu       sync.Mutex
	closed   bool
	wfs      map[string]*wfIndex
	paused   map[string]bool
	dirs     map[string]bool // directories known to exist
	problems map[string]string
	// reloads counts Reload calls: an index read before one (by Preload,
	// without mu) may miss writes made since and is not installed.
	reloads uint64
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
	intents map[int64]Intent
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
}

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (*DB, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", dir, err)
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
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		b := make([]byte, 32)
		if n, _ := f.ReadAt(b, 0); n > 0 {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by %s (lock file %s)", ErrLocked, abs, holder, lockPath)
		}
		return nil, fmt.Errorf("state database %s: lock %s: %w", abs, lockPath, err)
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
	db := &DB{
		noSync:   opts.NoSync,
		dir:      abs,
		lock:     f,
		wfs:      make(map[string]*wfIndex),
		paused:   make(map[string]bool),
		dirs:     make(map[string]bool),
		problems: make(map[string]string),
	}
	if err := db.loadPaused(); err != nil {
		f.Close()
		return nil, err
	}
	return db, nil
}

// ErrBadLock: the lock file is a symbolic link, FIFO, device or anything
// but a regular file; it is neither followed, opened for I/O nor changed.
var ErrBadLock = errors.New("lock file is not a regular file")

// openLock opens (creating it) the lock file at path for writing without
// following a symbolic link (O_NOFOLLOW), without blocking on a FIFO
// (O_NONBLOCK) and without truncating it: a symlink or anything but a
// regular file is refused with ErrBadLock, naming it.
func openLock(path string) (*os.File, error) {
	// A FIFO or device is refused before it is opened at all; the open
	// and fstat below catch one swapped in between.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, badLock(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, badLock(path, fi.Mode())
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = badLock(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func badLock(path string, mode fs.FileMode) error {
	if mode&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link (not followed; remove it)", ErrBadLock, path)
	}
	return fmt.Errorf("%w: %s is a %s (remove it)", ErrBadLock, path, regfile.Kind(mode))
}

// Dir is the database's directory (absolute).
func (db *DB) Dir() string { return db.dir }

// Close releases the lock. The DB must not be used afterwards.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	return db.lock.Close()
}

// Stats counts file operations since Open: Writes are files written,
// renamed or removed; Reads are files read.
type Stats struct {
	Writes int64
	Reads  int64
}

// Stats returns the file operation counters.
func (db *DB) Stats() Stats { return Stats{Writes: db.writes.Load(), Reads: db.reads.Load()} }

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
	db.dirs = make(map[string]bool)
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
		return nil, fmt.Errorf("%w: %v", ErrBadName, err)
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
	for _, d := range l.dirs {
		db.dirs[d] = true
	}
}

// Preload reads the indexes of the named workflows that are not loaded
// yet, with up to workers files read at once; a server calls it before its
// first step so that start-up does not read 100,000s of files one by one.
// Workflows whose directory cannot be read are left to fail on first use.
func (db *DB) Preload(wfs []string, workers int) {
	db.mu.Lock()
	reloads := db.reloads
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
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wf := range jobs {
				l, err := db.load(wf)
				if err != nil {
					continue
				}
				if preloadLoaded != nil {
					preloadLoaded(wf)
				}
				db.mu.Lock()
				if db.wfs[wf] == nil && !db.closed && db.reloads == reloads {
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

// loaded is one workflow's index as read from disk, with the problems met.
type loaded struct {
	ix       *wfIndex
	problems map[string]string
	dirs     []string
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
			intents: make(map[int64]Intent),
		},
		problems: make(map[string]string),
	}
	ix := l.ix
	problem := func(rel string, err error) { l.problems[filepath.ToSlash(rel)] = err.Error() }
	err := db.walkSlots(l, "state", wf, func(t time.Time, rel string, data []byte, rerr error) {
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
		ix.corrupt[k] = fmt.Errorf("%w %s: %v", ErrCorrupt, filepath.Join(db.dir, rel), rerr)
		problem(rel, rerr)
	})
	if err == nil {
		err = db.walkSlots(l, "rerun", wf, func(t time.Time, rel string, data []byte, rerr error) {
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
		err = db.walkSlots(l, "intent", wf, func(t time.Time, rel string, data []byte, rerr error) {
			if rerr == nil {
				var in Intent
				if in, rerr = parseIntent(data); rerr == nil {
					ix.intents[key(t)] = in
					return
				}
			}
			ix.intents[key(t)] = Intent{Attempt: -1}
			problem(rel, rerr)
		})
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// walkSlots calls fn for every slot file under <kind>/<wf>/<day>/, with its
// content or the error reading it. Leftover temporary files are removed;
// other stray names are reported as problems. No symbolic link is
// followed and no FIFO or device is read (see readRegularAt): such a slot
// file is an unreadable record, a symlinked day directory a stray name,
// and a symlinked <kind>/<wf> (or <kind>) fails the walk, naming it.
func (db *DB) walkSlots(l *loaded, kind, wf string, fn func(t time.Time, rel string, data []byte, err error)) error {
	base := filepath.Join(db.dir, kind, wf)
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
	l.dirs = append(l.dirs, base)
	for _, d := range days {
		relDay := filepath.Join(kind, wf, d.Name())
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			os.Remove(filepath.Join(db.dir, relDay))
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
		l.dirs = append(l.dirs, dayDir)
		for _, f := range files {
			rel := filepath.Join(relDay, f.Name())
			if strings.HasPrefix(f.Name(), tmpPrefix) {
				os.Remove(filepath.Join(db.dir, rel))
				continue
			}
			t, err := parseSlotPath(d.Name(), f.Name())
			if err != nil || f.IsDir() {
				l.problems[filepath.ToSlash(rel)] = "not a slot file (HH:mm:ss.SSSZ)"
				continue
			}
			data, err := readRegularAt(int(dd.Fd()), f.Name(), filepath.Join(db.dir, rel))
			db.reads.Add(1)
			fn(t, rel, data, err)
		}
		dd.Close()
	}
	return nil
}

// Get returns the stored state of a slot; found is false when it has no
// record. A corrupt file gives an error wrapping ErrCorrupt and naming it.
func (db *DB) Get(id slot.ID) (slot.State, bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return slot.State{}, false, err
	}
	k := key(id.Time)
	if err := ix.corrupt[k]; err != nil {
		return slot.State{}, false, err
	}
	r, ok := ix.recs[k]
	if !ok {
		return slot.State{}, false, nil
	}
	return r.state(id.Workflow, k), true, nil
}

func (r rec) state(wf string, k int64) slot.State {
	return slot.State{ID: slot.ID{Workflow: wf, Time: keyTime(k)}, Status: r.status, ExternalID: r.ext, RetryCount: r.retry}
}

// Put stores a slot state. Writing the state a slot already has is a no-op
// (no file is written). On error the stored state is unchanged, unless the
// file was replaced before the error (a failed directory sync): the index
// then holds what the file holds.
func (db *DB) Put(st slot.State) error {
	if !st.Status.Valid() {
		return fmt.Errorf("state database: put %s: invalid status %q", st.ID, st.Status)
	}
	if st.RetryCount < 0 {
		return fmt.Errorf("state database: put %s: negative retry count", st.ID)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(st.ID.Workflow)
	if err != nil {
		return err
	}
	k := key(st.ID.Time)
	r := rec{status: st.Status, ext: st.ExternalID, retry: st.RetryCount}
	if old, ok := ix.recs[k]; ok && old == r && ix.corrupt[k] == nil {
		return nil
	}
	t := keyTime(k)
	st.ID.Time = t
	day, file := slotPath(t)
	enc := EncodeState(st)
	if err := db.writeFileAtomic(filepath.Join(db.dir, "state", st.ID.Workflow, day), file, enc); err != nil {
		// The write may have failed after its rename (syncing the
		// directory): the file then holds the new state, and so must the
		// index, or it would disagree with the disk until a restart.
		if db.fileHolds(filepath.Join(db.dir, "state", st.ID.Workflow, day, file), enc) {
			ix.setRec(k, r)
			delete(db.problems, filepath.ToSlash(filepath.Join("state", st.ID.Workflow, day, file)))
		}
		return err
	}
	ix.setRec(k, r)
	delete(db.problems, filepath.ToSlash(filepath.Join("state", st.ID.Workflow, day, file)))
	return nil
}

// fileHolds reports whether the file at path holds exactly data: after a
// failed atomic write, whether the rename happened (the index must then
// follow the disk).
func (db *DB) fileHolds(path string, data []byte) bool {
	rel, err := filepath.Rel(db.dir, path)
	if err != nil {
		return false
	}
	got, err := db.readFile(rel)
	return err == nil && bytes.Equal(got, data)
}

// Range returns the stored states of workflow wf with times in [start,
// end), oldest first. Corrupt slots are left out (Get reports them).
func (db *DB) Range(wf string, start, end time.Time) ([]slot.State, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	lo, hi := key(start), key(end)
	if start.Sub(keyTime(lo)) > 0 { // start had a sub-millisecond part
		lo++
	}
	var out []slot.State
	for k, r := range ix.recs {
		if k >= lo && k < hi {
			out = append(out, r.state(wf, k))
		}
	}
	sortStates(out)
	return out, nil
}

// Active returns the stored states of workflow wf that are not final
// (WAITING, READY, RUNNING), at any time, oldest first.
func (db *DB) Active(wf string) ([]slot.State, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	out := make([]slot.State, 0, len(ix.active))
	for k := range ix.active {
		out = append(out, ix.recs[k].state(wf, k))
	}
	sortStates(out)
	return out, nil
}

// Count returns how many stored slots of workflow wf are in each status.
func (db *DB) Count(wf string) (map[slot.Status]int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	out := make(map[slot.Status]int)
	for _, r := range ix.recs {
		out[r.status]++
	}
	return out, nil
}

func sortStates(s []slot.State) {
	sort.Slice(s, func(i, j int) bool { return s[i].ID.Time.Before(s[j].ID.Time) })
}

// MarkRerun writes a rerun marker for the slot, stamped with now.
func (db *DB) MarkRerun(id slot.ID, now time.Time) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	k := key(id.Time)
	day, file := slotPath(keyTime(k))
	enc := encodeRerun(now)
	if err := db.writeFileAtomic(filepath.Join(db.dir, "rerun", id.Workflow, day), file, enc); err != nil {
		if db.fileHolds(filepath.Join(db.dir, "rerun", id.Workflow, day, file), enc) { // failed after the rename
			ix.reruns[k] = now.UTC()
		}
		return err
	}
	ix.reruns[k] = now.UTC()
	return nil
}

// UnmarkRerun removes a slot's rerun marker, if any.
func (db *DB) UnmarkRerun(id slot.ID) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	return removeMarker(db, ix.reruns, "rerun", id)
}

// removeMarker removes the file of a slot's entry in one of the per-slot
// areas beside state/ (rerun/, intent/) and then the index entry m holds
// for it; a slot without one is left as it is. db.mu is held.
func removeMarker[V any](db *DB, m map[int64]V, area string, id slot.ID) error {
	k := key(id.Time)
	if _, ok := m[k]; !ok {
		return nil
	}
	day, file := slotPath(keyTime(k))
	if err := db.removeFile(filepath.Join(db.dir, area, id.Workflow, day), file); err != nil {
		return err
	}
	delete(m, k)
	return nil
}

// RerunMark is a slot marked for rerun and when it was marked.
type RerunMark struct {
	Slot time.Time
	At   time.Time
}

// Expired reports whether the mark is older than RerunExpiry at now.
func (m RerunMark) Expired(now time.Time) bool { return m.At.Add(RerunExpiry).Before(now) }

// RerunMarks returns the rerun markers of workflow wf, oldest slot first.
// Expiry is the caller's decision (the engine drops a marker once its slot
// is final and either outside the window or expired; see UnmarkRerun).
func (db *DB) RerunMarks(wf string) ([]RerunMark, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	if len(ix.reruns) == 0 {
		return nil, nil
	}
	out := make([]RerunMark, 0, len(ix.reruns))
	for k, at := range ix.reruns {
		out = append(out, RerunMark{Slot: keyTime(k), At: at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot.Before(out[j].Slot) })
	return out, nil
}

// PutIntent records that the engine is about to submit the slot.
func (db *DB) PutIntent(id slot.ID, in Intent) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	k := key(id.Time)
	day, file := slotPath(keyTime(k))
	in.Time = in.Time.UTC()
	enc := encodeIntent(in)
	if err := db.writeFileAtomic(filepath.Join(db.dir, "intent", id.Workflow, day), file, enc); err != nil {
		if db.fileHolds(filepath.Join(db.dir, "intent", id.Workflow, day, file), enc) { // failed after the rename
			ix.intents[k] = in
		}
		return err
	}
	ix.intents[k] = in
	return nil
}

// GetIntent returns a slot's submit intent, if one was left. An unreadable
// intent file is returned with Attempt -1 and a zero Time.
func (db *DB) GetIntent(id slot.ID) (Intent, bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return Intent{}, false, err
	}
	in, ok := ix.intents[key(id.Time)]
	return in, ok, nil
}

// DeleteIntent removes a slot's submit intent, if any.
func (db *DB) DeleteIntent(id slot.ID) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	return removeMarker(db, ix.intents, "intent", id)
}

func (db *DB) loadPaused() error {
	entries, err := db.readDir("paused")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	for _, e := range entries {
		if validWorkflow(e.Name()) == nil && !e.IsDir() {
			db.paused[e.Name()] = true
		}
	}
	return nil
}

// Paused reports whether workflow wf is paused.
func (db *DB) Paused(wf string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.paused[wf]
}

// SetPaused pauses (an empty file paused/<wf>) or unpauses a workflow.
func (db *DB) SetPaused(wf string, paused bool) error {
	if err := validWorkflow(wf); err != nil {
		return fmt.Errorf("%w: %v", ErrBadName, err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	if db.paused[wf] == paused {
		return nil
	}
	dir := filepath.Join(db.dir, "paused")
	var err error
	if paused {
		err = db.writeFileAtomic(dir, wf, nil)
	} else {
		err = db.removeFile(dir, wf)
	}
	if err != nil {
		return err
	}
	if paused {
		db.paused[wf] = true
	} else {
		delete(db.paused, wf)
	}
	return nil
}

// Workflows lists the workflows that have a state directory, sorted.
func (db *DB) Workflows() ([]string, error) {
	entries, err := db.readDir("state")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && validWorkflow(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// MinRetention is the shortest history Prune keeps: the engine's window
// (scheduler.Window, 7 days) and a day more, so that a pruned final slot
// can never reappear as WAITING.
const MinRetention = scheduler.Window + 24*time.Hour

// Prune deletes the files of final slots (SUCCESS, FAILURE, WAIT_TIMEOUT,
// KILLED) older than before, submit intents older than before and expired
// rerun markers of final slots, in every workflow, and removes day directories left empty.
// before must be at least MinRetention before now. Slots that are not final are
// kept whatever their age. It returns the number of slot files deleted.
func (db *DB) Prune(before, now time.Time) (int, error) {
	if before.After(now.Add(-MinRetention)) {
		return 0, fmt.Errorf("prune: %s is inside the last %v: slots there may still be stepped", slot.FormatTime(before), MinRetention)
	}
	return db.PruneBefore(now, func(string) time.Time { return before })
}

// PruneBefore is Prune with a limit per workflow: the files of workflow wf
// older than before(wf) (for a workflow whose states a trigger reads far
// back: see trigger.LookBacks). Every limit must be at least MinRetention
// before now; a workflow whose limit is not is left alone and reported.
func (db *DB) PruneBefore(now time.Time, before func(wf string) time.Time) (int, error) {
	wfs, err := db.Workflows()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, wf := range wfs {
		b := before(wf)
		if b.After(now.Add(-MinRetention)) {
			errs = append(errs, fmt.Errorf("prune %s: %s is inside the last %v: slots there may still be stepped", wf, slot.FormatTime(b), MinRetention))
			continue
		}
		m, err := db.pruneWorkflow(wf, b, now)
		n += m
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// pruneChunk is how many files pruneWorkflow removes per hold of db.mu:
// steps and API reads wait for at most one chunk, not a whole workflow's
// history.
const pruneChunk = 256

// pruneFile is one file pruneWorkflow may remove.
type pruneFile struct {
	kind string // "state", "intent" or "rerun"
	k    int64
}

func (db *DB) pruneWorkflow(wf string, before, now time.Time) (int, error) {
	lim := key(before)
	// The candidates, picked under the lock; each is checked again when it
	// is removed (the lock is released between chunks).
	db.mu.Lock()
	ix, err := db.index(wf)
	if err != nil {
		db.mu.Unlock()
		return 0, err
	}
	var cands []pruneFile
	for k, at := range ix.reruns {
		if r, ok := ix.recs[k]; (!ok || r.status.Final()) && (RerunMark{At: at}).Expired(now) {
			cands = append(cands, pruneFile{"rerun", k})
		}
	}
	for k, r := range ix.recs {
		if k < lim && r.status.Final() {
			cands = append(cands, pruneFile{"state", k})
		}
	}
	for k := range ix.intents {
		if k < lim {
			cands = append(cands, pruneFile{"intent", k})
		}
	}
	db.mu.Unlock()

	// The removals, without a directory sync each: every touched
	// directory is synced once at the end.
	touched := make(map[string]bool)
	n := 0
	var firstErr error
	for start := 0; start < len(cands) && firstErr == nil; start += pruneChunk {
		db.mu.Lock()
		ix, err := db.index(wf)
		if err != nil {
			db.mu.Unlock()
			firstErr = err
			break
		}
		for _, c := range cands[start:min(start+pruneChunk, len(cands))] {
			switch c.kind {
			case "rerun":
				at, ok := ix.reruns[c.k]
				r, live := ix.recs[c.k]
				if !ok || (live && !r.status.Final()) || !(RerunMark{At: at}).Expired(now) {
					continue
				}
			case "state":
				if r, ok := ix.recs[c.k]; !ok || !r.status.Final() {
					continue
				}
			case "intent":
				if _, ok := ix.intents[c.k]; !ok {
					continue
				}
			}
			day, file := slotPath(keyTime(c.k))
			dir := filepath.Join(db.dir, c.kind, wf, day)
			if err := db.removeFileNoSync(dir, file); err != nil {
				firstErr = err
				break
			}
			touched[dir] = true
			switch c.kind {
			case "rerun":
				delete(ix.reruns, c.k)
			case "state":
				delete(ix.recs, c.k)
				n++
			case "intent":
				delete(ix.intents, c.k)
			}
		}
		db.mu.Unlock()
	}
	// A directory syncs on its own (no lock needed); one removed since
	// (left empty below, or by another prune) is skipped.
	for dir := range touched {
		if err := db.syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
			firstErr = fmt.Errorf("state database: sync %s: %w", dir, err)
		}
	}
	if firstErr != nil {
		return n, firstErr
	}

	// Day directories left empty are removed: those of the state files
	// just pruned, and, since submit intents and rerun markers are
	// transient and leave their day directories empty once the files are
	// gone, every empty one of a day before the limit (on disk and from
	// the directory cache), so that neither grows with the history.
	db.mu.Lock()
	defer db.mu.Unlock()
	for dir := range touched {
		if strings.HasPrefix(dir, filepath.Join(db.dir, "state")+string(filepath.Separator)) && os.Remove(dir) == nil { // only succeeds when empty
			delete(db.dirs, dir)
		}
	}
	limDay, _ := slotPath(before)
	for _, kind := range []string{"intent", "rerun"} {
		base := filepath.Join(db.dir, kind, wf)
		entries, err := db.readDir(filepath.Join(kind, wf))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if _, perr := time.Parse(dayLayout, e.Name()); perr != nil || !e.IsDir() || e.Name() >= limDay {
				continue
			}
			dir := filepath.Join(base, e.Name())
			if os.Remove(dir) == nil { // only succeeds when empty
				delete(db.dirs, dir)
			}
		}
	}
	return n, nil
}

// Registers.

func (db *DB) registerPath(bucket, key string) (string, error) {
	if err := validName("bucket", bucket); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadName, err)
	}
	if err := validName("key", key); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadName, err)
	}
	return filepath.Join(db.dir, "register", bucket, key), nil
}

// GetRegister returns the JSON stored under bucket/key (ErrNotFound if none).
func (db *DB) GetRegister(bucket, key string) (json.RawMessage, error) {
	p, err := db.registerPath(bucket, key)
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errClosed
	}
	data, err := db.readFile(filepath.Join("register", bucket, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: register %s/%s", ErrNotFound, bucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("state database: register %s: %w", p, err)
	}
	db.reads.Add(1)
	return json.RawMessage(data), nil
}

// PutRegister stores value (which must be valid JSON) under bucket/key.
func (db *DB) PutRegister(bucket, key string, value json.RawMessage) error {
	p, err := db.registerPath(bucket, key)
	if err != nil {
		return err
	}
	if !json.Valid(value) {
		return fmt.Errorf("%w: register value is not valid JSON", ErrBadName)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	return db.writeFileAtomic(filepath.Dir(p), key, value)
}

// DeleteRegister removes bucket/key (a missing one is not an error).
func (db *DB) DeleteRegister(bucket, key string) error {
	p, err := db.registerPath(bucket, key)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	return db.removeFile(filepath.Dir(p), key)
}

// DeleteRegistersWithPrefix removes every key of bucket starting with prefix.
func (db *DB) DeleteRegistersWithPrefix(bucket, prefix string) error {
	keys, err := db.RegisterKeys(bucket, prefix)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	dir := filepath.Join(db.dir, "register", bucket)
	for _, k := range keys {
		if err := db.removeFile(dir, k); err != nil {
			return err
		}
	}
	return nil
}

// RegisterKeys lists the keys of bucket starting with prefix, sorted. An
// unknown bucket has no keys.
func (db *DB) RegisterKeys(bucket, prefix string) ([]string, error) {
	if err := validName("bucket", bucket); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadName, err)
	}
	if prefix != "" && strings.ContainsAny(prefix, "/\\.") {
		return nil, fmt.Errorf("%w: prefix %q may not contain '/', '\\' or '.'", ErrBadName, prefix)
	}
	entries, err := db.readDir(filepath.Join("register", bucket))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	out := []string{}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && validName("key", n) == nil && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}
