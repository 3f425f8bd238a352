package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/schema"
)

// config is one loaded state of the workflows directory. It is immutable
// once built; a reload builds a new one.
type config struct {
	workflows map[string]*schema.Workflow
	ids       []string
	file      map[string]string // workflow id → file name
	scheds    map[string]*schedule.Schedule
	schedErrs map[string]error
	loadErrs  []api.LoadError
}

// fileEntry caches one workflows file by its mtime and size.
type fileEntry struct {
	mtime time.Time
	size  int64
	proj  *schema.Project // last version that loaded, nil if none ever did
	err   error           // error of the current version, nil if it loaded
}

// loader re-reads the workflows directory, parsing only files whose mtime
// or size changed since the last load.
type loader struct {
	dir   string
	files map[string]*fileEntry
	owner map[string]string // workflow id → file that had it at the last load
	last  *config           // returned again while no file changes
	// entryErrs are the entries of the last load that could not be read
	// (a dangling symlink, a directory named *.json): name → error. While
	// they stay the same, an unchanged directory returns last.
	entryErrs map[string]string
}

// load builds a config from the directory. A file that does not load is
// reported; if an earlier version of it loaded, that version stays in
// effect (a file caught mid-write does not stop its workflows), otherwise
// its workflows are absent. A workflow id defined by two files is kept in
// the file that had it before (or the first by name) and the other file is
// skipped whole.
func (l *loader) load() *config {
	c := &config{
		workflows: make(map[string]*schema.Workflow),
		file:      make(map[string]string),
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		c.loadErrs = append(c.loadErrs, api.LoadError{File: l.dir, Error: fmt.Sprintf("read workflows directory: %v", err)})
		c.scheds, c.schedErrs = schedule.Resolve(c.workflows)
		return c
	}
	seen := make(map[string]bool)
	entryErrs := make(map[string]string)
	changed := false
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			entryErrs[name] = err.Error()
			continue
		}
		if !info.Mode().IsRegular() {
			if info.Mode()&fs.ModeSymlink != 0 {
				fi, err := os.Stat(filepath.Join(l.dir, name))
				switch {
				case err != nil:
					entryErrs[name] = fmt.Sprintf("symbolic link: %v", err)
					continue
				case !fi.Mode().IsRegular():
					entryErrs[name] = "symbolic link to something that is not a regular file"
					continue
				}
				info = fi
			} else {
				entryErrs[name] = "not a regular file"
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
		if fe.mtime.Equal(info.ModTime()) && fe.size == info.Size() && (fe.proj != nil || fe.err != nil) {
			continue
		}
		changed = true
		fe.mtime, fe.size = info.ModTime(), info.Size()
		p, err := loadFile(filepath.Join(l.dir, name))
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
	if !maps.Equal(entryErrs, l.entryErrs) {
		changed = true
	}
	if !changed && l.last != nil {
		return l.last
	}
	l.entryErrs = entryErrs
	for name, msg := range entryErrs {
		c.loadErrs = append(c.loadErrs, api.LoadError{File: name, Error: msg})
	}
	// Files that owned ids before go first, so a newly deployed file that
	// repeats an id cannot take it (or its file's other workflows) away.
	sort.Slice(names, func(i, j int) bool {
		oi, oj := l.ownsAny(names[i]), l.ownsAny(names[j])
		if oi != oj {
			return oi
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
			c.loadErrs = append(c.loadErrs, api.LoadError{File: name, Error: msg})
		}
		if fe.proj == nil {
			continue
		}
		var dups []string
		for i := range fe.proj.Workflows {
			if other, ok := c.file[fe.proj.Workflows[i].ID]; ok {
				dups = append(dups, fmt.Sprintf("%q (also in %s)", fe.proj.Workflows[i].ID, other))
			}
		}
		if len(dups) > 0 {
			c.loadErrs = append(c.loadErrs, api.LoadError{File: name, Error: "duplicate workflow id " + strings.Join(dups, ", ") + ": file skipped"})
			continue
		}
		for i := range fe.proj.Workflows {
			w := &fe.proj.Workflows[i]
			c.workflows[w.ID] = w
			c.file[w.ID] = name
			owner[w.ID] = name
		}
	}
	l.owner = owner
	for id := range c.workflows {
		c.ids = append(c.ids, id)
	}
	sort.Strings(c.ids)
	sort.Slice(c.loadErrs, func(i, j int) bool { return c.loadErrs[i].File < c.loadErrs[j].File })
	c.scheds, c.schedErrs = schedule.Resolve(c.workflows)
	l.last = c
	return c
}

func (l *loader) ownsAny(name string) bool {
	for _, f := range l.owner {
		if f == name {
			return true
		}
	}
	return false
}

func loadFile(path string) (*schema.Project, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return schema.Load(f)
}
