package engine

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// config is one loaded state of the workflows directory. It is immutable
// once built; a reload builds a new one.
type config struct {
	workflows map[string]*workflow.Workflow
	ids       []string
	pooled    []string          // the ids of the workflows that name a pool, sorted
	file      map[string]string // workflow id → file name
	scheds    map[string]*schedule.Schedule
	schedErrs map[string]error
	loadErrs  []scheduler.LoadError
	// newLoadErrs are the load errors the previous config did not have
	// (the ones to log).
	newLoadErrs []scheduler.LoadError
}

// fileEntry caches one workflows file by the SHA-256 of its content: a
// replacement with the same size and modification time (tar, rsync with
// normalised mtimes) is still seen. Every load reads every file; see
// BenchmarkLoadUnchanged for the cost.
type fileEntry struct {
	hash [sha256.Size]byte // of the content proj and err were made from
	read bool              // hash is set
	// key identifies the file version hash was taken from (see fileKey);
	// while lstat gives the same key the file is not read again. Zero
	// when the version was too recent to trust (see racyWindow).
	key     fileKey
	readErr string            // the file could not be read (previous version stays)
	proj    *workflow.Project // last version that loaded, nil if none ever did
	err     error             // error of the current version, nil if it loaded
}

// maxFileSize bounds the bytes read from one workflows file.
var maxFileSize int64 = workflow.MaxDocumentSize

// loader re-reads the workflows directory, parsing only files whose
// content changed since the last load.
type loader struct {
	dir   string
	db    Store                // holds the owner records
	owns  func(wf string) bool // Options.Owns: records only the workflows it owns
	log   *slog.Logger         // nil: slog.Default()
	files map[string]*fileEntry
	owner map[string]string // workflow id → file that had it at the last load
	// owners are the owner records of the state database (read on the
	// first load, then kept in step with it); nil until read.
	owners map[string]store.Owner
	// ownersUnread: the records could not be read; they are not written
	// either until a reload (POST /clear-cache) reads them.
	ownersUnread bool
	last         *config // returned again while no file changes
	// logged are the load errors of the last config: a new config logs
	// only the ones that are news.
	logged map[scheduler.LoadError]bool
	// entryErrs are the entries of the last load that could not be read
	// (a dangling symlink, a directory named *.json, a FIFO): name →
	// error. While they stay the same, an unchanged directory returns last.
	entryErrs map[string]string
	// defs lists, for every workflow id, the files whose version in
	// effect defines it, sorted (built by each rebuild).
	defs map[string][]string
	buf  []byte // reused to read the files
	// reads counts the files read (tests: an unchanged file is not read).
	reads int
}

// forget makes the next load re-read and re-parse every file and the
// owner records (POST /clear-cache).
func (l *loader) forget() {
	l.files = make(map[string]*fileEntry)
	l.owners = nil
	l.last = nil
}

// load builds a config from the directory. A file that does not load is
// reported; if an earlier version of it loaded, that version stays in
// effect (a file caught mid-write does not stop its workflows), otherwise
// its workflows are absent.
//
// A workflow id defined by two files belongs to the project recorded as
// its owner in the state database, as long as a file of that project still
// defines it or the file the record names is there but does not load now;
// otherwise to the file that had it at the last load, or the first by
// name, which is then recorded. A file defining an id that belongs to
// another is skipped whole and reported, naming the id and the owner.
func (l *loader) load() *config {
	c := &config{
		workflows: make(map[string]*workflow.Workflow),
		file:      make(map[string]string),
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		c.loadErrs = append(c.loadErrs, scheduler.LoadError{File: l.dir, Error: fmt.Sprintf("read workflows directory: %v", err)})
		c.scheds, c.schedErrs = schedule.Resolve(c.workflows)
		l.note(c)
		return c
	}
	names, entryErrs, changed := l.readFiles(entries)
	if !maps.Equal(entryErrs, l.entryErrs) {
		changed = true
	}
	if l.owners == nil {
		changed = true
		l.readOwners()
	}
	if !changed && l.last != nil {
		return l.last
	}
	l.entryErrs = entryErrs
	sort.Strings(names)
	l.defs = make(map[string][]string)
	for _, name := range names {
		if p := l.files[name].proj; p != nil {
			for i := range p.Workflows {
				l.defs[p.Workflows[i].ID] = append(l.defs[p.Workflows[i].ID], name)
			}
		}
	}
	for name, msg := range entryErrs {
		c.loadErrs = append(c.loadErrs, scheduler.LoadError{File: name, Error: msg})
	}
	l.owner = l.assign(c, names)
	l.recordOwners(c)
	for id, w := range c.workflows {
		c.ids = append(c.ids, id)
		if w.Pool != "" {
			c.pooled = append(c.pooled, id)
		}
	}
	sort.Strings(c.ids)
	sort.Strings(c.pooled)
	sort.Slice(c.loadErrs, func(i, j int) bool { return c.loadErrs[i].File < c.loadErrs[j].File })
	c.scheds, c.schedErrs = schedule.Resolve(c.workflows)
	l.note(c)
	l.last = c
	return c
}

// fileKey is what lstat tells of a file version: a write in place changes
// ctime (which no system call can set back), a replacement by rename
// changes the inode. Two versions with the same key have the same content,
// unless the second was written in the same clock tick as the first was
// looked at: see racyWindow.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns
}

// racyWindow: a key is trusted only for a file whose ctime and mtime are
// at least this much older than the moment it was taken (git's "racily
// clean" rule): file-system timestamps come from a coarse clock, so a write
// within the same tick as the lstat could leave the key unchanged.
var racyWindow = time.Second

// lstatKey returns the key of path's current version, or false when it is
// not a regular file (the read reports why).
func lstatKey(path string) (fileKey, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileKey{}, false
	}
	return fileKey{dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// trusted is k, or the zero key when k's version is too recent to trust at
// now.
func (k fileKey) trusted(now time.Time) fileKey {
	limit := now.Add(-racyWindow).UnixNano()
	if k.mtime >= limit || k.ctime >= limit {
		return fileKey{}
	}
	return k
}

// readFiles reads the workflows files of the directory listing entries
// that changed since the last load (by content hash) and forgets those
// that are gone. It returns the names of the files present, the entries
// that are not regular files (by name), and whether anything changed.
func (l *loader) readFiles(entries []fs.DirEntry) (names []string, entryErrs map[string]string, changed bool) {
	seen := make(map[string]bool)
	entryErrs = make(map[string]string)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(l.dir, name)
		// The key is taken before the read: a write after it changes the
		// key the next load sees, so the content is read again then.
		key, keyOK := lstatKey(path)
		if fe := l.files[name]; keyOK && fe != nil && fe.read && fe.key != (fileKey{}) && fe.key == key {
			seen[name] = true // unchanged since it was read: not read again
			names = append(names, name)
			continue
		}
		l.reads++
		data, err := regfile.ReadFileInto(l.buf, path, maxFileSize)
		if err == nil {
			l.buf = data
		}
		if err != nil {
			link := e.Type()&fs.ModeSymlink != 0
			switch {
			case errors.Is(err, fs.ErrNotExist) && !link:
				continue // removed since the listing
			case errors.Is(err, regfile.ErrNotRegular) || link && errors.Is(err, fs.ErrNotExist):
				entryErrs[name] = strings.TrimPrefix(err.Error(), path+": ")
				continue
			}
		}
		seen[name] = true
		names = append(names, name)
		fe := l.files[name]
		if fe == nil {
			fe = &fileEntry{}
			l.files[name] = fe
		}
		if err != nil {
			// Unreadable now (permissions, too large): the previous
			// version, if any, stays in effect.
			msg := strings.TrimPrefix(err.Error(), path+": ")
			fe.key = fileKey{}
			if fe.readErr != msg {
				changed = true
				fe.readErr, fe.read, fe.err = msg, false, errors.New(msg)
			}
			continue
		}
		sum := sha256.Sum256(data)
		fe.key = fileKey{}
		if keyOK {
			fe.key = key.trusted(time.Now())
		}
		if fe.read && fe.hash == sum {
			continue
		}
		changed = true
		fe.hash, fe.read, fe.readErr = sum, true, ""
		p, err := workflow.Load(bytes.NewReader(data))
		if err != nil {
			fe.err = err
			continue
		}
		fe.proj, fe.err = p, nil
	}
	for name := range l.files {
		if !seen[name] {
			delete(l.files, name)
			changed = true
		}
	}
	return names, entryErrs, changed
}

// assign gives each workflow id of the files names to the file that owns
// it, into c (a file that clashes with an owner or another file is
// skipped, with a load error), and returns the owners.
func (l *loader) assign(c *config, names []string) map[string]string {
	// Files that owned ids before go first, so a newly deployed file that
	// repeats an id cannot take it (or its file's other workflows) away;
	// then files named by owner records.
	recorded, owning := make(map[string]bool), make(map[string]bool)
	for _, o := range l.owners {
		recorded[o.File] = true
	}
	for _, f := range l.owner {
		owning[f] = true
	}
	sort.Slice(names, func(i, j int) bool {
		oi, oj := owning[names[i]], owning[names[j]]
		if oi != oj {
			return oi
		}
		if ri, rj := recorded[names[i]], recorded[names[j]]; ri != rj {
			return ri
		}
		return names[i] < names[j]
	})
	owner := make(map[string]string)
	for _, name := range names {
		fe := l.files[name]
		if fe.err != nil {
			msg := fe.err.Error()
			if fe.proj != nil {
				msg += " (the previous version of the file stays in effect)"
			}
			c.loadErrs = append(c.loadErrs, scheduler.LoadError{File: name, Error: msg})
		}
		if fe.proj == nil {
			continue
		}
		var clashes []string
		for i := range fe.proj.Workflows {
			id := fe.proj.Workflows[i].ID
			if o, where, broken, ok := l.recordHolds(id); ok && o.Project != fe.proj.Project {
				if broken {
					where += ", which does not load now"
				}
				clashes = append(clashes, fmt.Sprintf("workflow id %q belongs to project %s (%s)", id, o.Project, where))
			} else if other, ok := c.file[id]; ok {
				clashes = append(clashes, fmt.Sprintf("duplicate workflow id %q (also in %s)", id, other))
			}
		}
		if len(clashes) > 0 {
			c.loadErrs = append(c.loadErrs, scheduler.LoadError{File: name, Error: strings.Join(clashes, ", ") + ": file skipped"})
			continue
		}
		for i := range fe.proj.Workflows {
			w := &fe.proj.Workflows[i]
			c.workflows[w.ID] = w
			c.file[w.ID] = name
			owner[w.ID] = name
		}
	}
	return owner
}

// note sets c.newLoadErrs to the load errors that the previous config did
// not have, so that each is logged once, not at every rebuild.
func (l *loader) note(c *config) {
	logged := make(map[scheduler.LoadError]bool, len(c.loadErrs))
	for _, le := range c.loadErrs {
		logged[le] = true
		if !l.logged[le] {
			c.newLoadErrs = append(c.newLoadErrs, le)
		}
	}
	l.logged = logged
}

func (l *loader) logger() *slog.Logger {
	if l.log == nil {
		return slog.Default()
	}
	return l.log
}

// readOwners reads the owner records of the state database.
func (l *loader) readOwners() {
	l.owners = make(map[string]store.Owner)
	if l.db == nil {
		return
	}
	owners, err := l.db.Owners()
	if err != nil {
		// Without records the choice falls back on load order; say so,
		// and leave the records alone (they may be right).
		l.logger().Error("workflow owners not read: a workflow id defined by two projects goes to the first file by name", "error", err)
		l.ownersUnread = true
		return
	}
	l.owners, l.ownersUnread = owners, false
}

// recordHolds returns the recorded owner of id if the record still holds,
// with the file that holds it: a loaded file of the owner's project that
// defines id (the recorded file if it is one, else the first by name), or
// the recorded file if it is in the directory but has never loaded or
// cannot be read (broken). l.defs and l.entryErrs are current.
func (l *loader) recordHolds(id string) (o store.Owner, file string, broken, ok bool) {
	o, ok = l.owners[id]
	if !ok {
		return o, "", false, false
	}
	for _, name := range l.defs[id] { // sorted by name
		if l.files[name].proj.Project != o.Project {
			continue
		}
		if file == "" || name == o.File {
			file = name
		}
	}
	if file != "" {
		return o, file, false, true
	}
	if fe := l.files[o.File]; fe != nil && fe.proj == nil {
		return o, o.File, true, true
	}
	if _, bad := l.entryErrs[o.File]; bad { // a dangling link, for now
		return o, o.File, true, true
	}
	return o, "", false, false
}

// recordOwners brings the owner records in line with c: the project and
// file of every loaded workflow, and no record that no longer holds for an
// id nobody loads. The records are written together when the store can
// (ownersWriter: one transaction, or one pair of file-system syncs, for
// 10,000 new workflows). A record that cannot be written is logged; the
// choice made stands for this process.
func (l *loader) recordOwners(c *config) {
	set := make(map[string]store.Owner)
	for id, name := range c.file {
		o := store.Owner{Project: l.files[name].proj.Project, File: name}
		if l.owners[id] == o || (l.owns != nil && !l.owns(id)) {
			continue // (another instance records the workflows it owns)
		}
		l.owners[id] = o
		set[id] = o
	}
	var remove []string
	for id := range l.owners {
		if c.workflows[id] != nil {
			continue
		}
		if _, _, _, holds := l.recordHolds(id); holds {
			continue
		}
		delete(l.owners, id)
		remove = append(remove, id)
	}
	if l.db == nil || l.ownersUnread {
		return
	}
	failed := make(map[string]error)
	if w, ok := l.db.(ownersWriter); ok {
		if len(set) > 0 || len(remove) > 0 {
			failed = w.WriteOwners(set, remove)
		}
	} else {
		for id, o := range set {
			if err := l.db.SetOwner(id, o); err != nil {
				failed[id] = err
			}
		}
		for _, id := range remove {
			if err := l.db.DeleteOwner(id); err != nil {
				failed[id] = err
			}
		}
	}
	for id, err := range failed {
		if o, ok := set[id]; ok {
			l.logger().Error("workflow owner not recorded: after a restart another project defining the id could take it", "workflow", id, "project", o.Project, "file", o.File, "error", err)
		} else {
			l.logger().Error("stale workflow owner record not removed", "workflow", id, "error", err)
		}
	}
}
