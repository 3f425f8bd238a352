package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets"
)

// HDFSDirName is the project's Oozie directory, deployed to $HDFS_ROOT/NAME.
const HDFSDirName = "hdfs"

// localTree is the project's hdfs/ directory.
type localTree struct {
	root  string
	dirs  []string // relative, parents first
	files []localFile
	bytes int64
}

type localFile struct {
	rel   string // slash-separated, relative to root
	path  string // what to open: the real path (symbolic links resolved)
	size  int64
	mtime time.Time
	// stat is the file's lstat when listed (its identity, for the
	// checksum cache: recordedSum), nil where the system has none.
	stat *syscall.Stat_t
}

// scanLocal lists deployDir/hdfs. It returns nil when the project has no
// hdfs/ directory. Symbolic links to regular files inside the project are
// followed; a link whose real path leaves the project (hdfs/ itself
// included), a FIFO, device or socket, and the reserved name OwnerFile
// are refused (ErrUnsafeLocalFile) without being opened, and errors name
// the link, never what it points to.
func scanLocal(deployDir string) (*localTree, error) {
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		return nil, err
	}
	project, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(deployDir, HDFSDirName)
	lst, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	realRoot := filepath.Join(project, HDFSDirName)
	if lst.Mode()&fs.ModeSymlink != 0 {
		if realRoot, err = resolveInside(root, project); err != nil {
			return nil, err
		}
	}
	st, err := os.Lstat(realRoot)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	t := &localTree{root: root}
	err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == realRoot {
			return nil
		}
		rel, err := filepath.Rel(realRoot, p)
		if err != nil {
			return err
		}
		shown := filepath.Join(root, rel) // as the user sees it
		rel = filepath.ToSlash(rel)
		// Names are shown quoted here: they are not known to be printable.
		// A control character could forge lines of the plan (a newline) or
		// restyle a terminal (an escape sequence).
		if !utf8.ValidString(rel) {
			return fmt.Errorf("%s/%q: file names must be UTF-8%.0w", root, rel, ErrUnsafeLocalFile)
		}
		if strings.IndexFunc(rel, unicode.IsControl) >= 0 {
			return fmt.Errorf("%s/%q: file names must not contain control characters%.0w", root, rel, ErrUnsafeLocalFile)
		}
		if rel == OwnerFile {
			return fmt.Errorf("%s: the name %s is reserved for the owner record deploy writes%.0w", shown, OwnerFile, ErrUnsafeLocalFile)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		open := p
		if info.Mode()&fs.ModeSymlink != 0 {
			if open, err = resolveInside(shown, project); err != nil {
				return err
			}
			if info, err = os.Lstat(open); err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			if info.IsDir() {
				return fmt.Errorf("%s: symbolic links to directories are not supported", shown)
			}
		}
		switch {
		case info.IsDir():
			t.dirs = append(t.dirs, rel)
		case info.Mode().IsRegular():
			st, _ := info.Sys().(*syscall.Stat_t)
			t.files = append(t.files, localFile{rel: rel, path: open, size: info.Size(), mtime: info.ModTime(), stat: st})
			t.bytes += info.Size()
		default:
			return fmt.Errorf("%s is not a regular file or directory (%s); refused without opening it%.0w", shown, regfile.Kind(info.Mode()), ErrUnsafeLocalFile)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// resolveInside returns the real path of the symbolic link link, which
// must stay inside the project directory (a real path).
func resolveInside(link, project string) (string, error) {
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path named may be the link's target
		}
		return "", fmt.Errorf("%s: broken symbolic link: %w", link, err)
	}
	if real != project && !strings.HasPrefix(real, project+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is a symbolic link that leaves the project directory %s; refused (copy the file into the project instead)%.0w", link, project, ErrUnsafeLocalFile)
	}
	return real, nil
}

// openLocal opens a file of the tree for reading: it must (still) be a
// regular file. O_NONBLOCK makes a FIFO put there since the listing open
// at once (and then be refused) instead of waiting for a writer;
// O_NOFOLLOW refuses a symbolic link put there.
func openLocal(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s became a symbolic link since it was listed%.0w", p, ErrUnsafeLocalFile)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)%.0w", p, regfile.Kind(st.Mode()), ErrUnsafeLocalFile)
	}
	return f, nil
}

// hashLocal returns the SHA-256 of a local file.
func hashLocal(p string) (string, error) {
	f, err := openLocal(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// countingReader adds what it reads to a counter, and to a running total
// (if any).
type countingReader struct {
	r     io.Reader
	n     *atomic.Int64
	total *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if c.total != nil {
		c.total.Add(int64(n))
	}
	return n, err
}

// DefaultParallel is the number of files uploaded at once unless
// Options.Parallel says otherwise. Over SFTP each small file costs three
// round trips (open, write, close) that the server answers one after the
// other per session, so many files in flight keep its sessions busy.
const DefaultParallel = 16

// uploadPlan says where upload writes and what it may link instead.
type uploadPlan struct {
	dest string // the new directory, which must not exist
	// link lists the files (relative path to SHA-256) equal to the file
	// of the same name under from, the live directory: on a
	// targets.Linker they are hard-linked from there, not sent.
	link map[string]string
	from string
	// start is the deploy's start: uploaded files are stamped with
	// uploadStamp on a targets.TimeSetter, or with stamps[rel] when set
	// (distinctStamps).
	start  time.Time
	stamps map[string]time.Time
}

// uploaded is what upload did.
type uploaded struct {
	hashes    map[string]string // every file's SHA-256
	filesSent int
	bytesSent int64
}

// uploader is one upload's shared state.
type uploader struct {
	fsys   targets.FS
	linker targets.Linker // nil when fsys cannot link
	plan   uploadPlan
	toSend int64 // bytes of the files not linked

	bytesDone, filesDone atomic.Int64
	noLink               atomic.Bool // the server turned out not to link
	mu                   sync.Mutex
	out                  uploaded
	total                int
}

func (u *uploader) progress() Progress {
	return Progress{Files: int(u.filesDone.Load()), TotalFiles: u.total, Bytes: u.bytesDone.Load(), TotalBytes: u.toSend}
}

func (u *uploader) done(f localFile, sum string, sent bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.out.hashes[f.rel] = sum
	if sent {
		u.out.filesSent++
		u.out.bytesSent += f.size
	}
}

// link hard-links f from the live directory when the plan says it is
// equal there; it reports whether it did. A link that fails for another
// reason than a lost connection is no error: the file is sent instead.
func (u *uploader) link(ctx context.Context, f localFile) (bool, error) {
	sum, ok := u.plan.link[f.rel]
	if !ok || u.linker == nil || u.noLink.Load() {
		return false, nil
	}
	err := u.linker.Link(path.Join(u.plan.from, f.rel), path.Join(u.plan.dest, f.rel))
	if err == nil {
		u.done(f, sum, false)
		return true, nil
	}
	if errors.Is(err, errors.ErrUnsupported) {
		u.noLink.Store(true)
	}
	if ctx.Err() != nil || errors.Is(err, targets.ErrConnectionLost) {
		return false, err
	}
	return false, nil // the live file gone? Send it.
}

// one links or uploads one file.
func (u *uploader) one(ctx context.Context, f localFile) error {
	if linked, err := u.link(ctx, f); linked || err != nil {
		return err
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		var sum string
		var sent atomic.Int64 // this attempt's bytes
		// bytesDone grows while the file is read, so the progress of a
		// big file shows; a failed attempt takes its bytes back.
		stamp, ok := u.plan.stamps[f.rel]
		if !ok {
			stamp = uploadStamp(f.mtime, u.plan.start)
		}
		sum, err = uploadFile(ctx, u.fsys, f, path.Join(u.plan.dest, f.rel), stamp, &sent, &u.bytesDone)
		if err == nil {
			u.done(f, sum, true)
			return nil
		}
		u.bytesDone.Add(-sent.Load())
		if ctx.Err() != nil || errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, targets.ErrConnectionLost) || errors.Is(err, ErrUnsafeLocalFile) {
			return err
		}
	}
	return err
}

// ticker reports u's progress a few times a second until stop is closed.
func (u *uploader) ticker(report func(Progress), stop <-chan struct{}) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if report == nil {
			return
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				report(u.progress())
			case <-stop:
				return
			}
		}
	}()
	return ch
}

// upload copies the tree into p.dest on fsys, several files at a time,
// linking the files p.link names where fsys can, and returns each file's
// SHA-256. A file whose write fails is removed and written again (twice
// at most: HDFS has no pipeline recovery); the first file that fails for
// good stops the upload. A link that fails is replaced by an upload.
func upload(ctx context.Context, fsys targets.FS, t *localTree, p uploadPlan, parallel int, report func(Progress)) (*uploaded, error) {
	if err := fsys.MkdirAll(p.dest); err != nil {
		return nil, err
	}
	for _, d := range t.dirs {
		if err := fsys.MkdirAll(path.Join(p.dest, d)); err != nil {
			return nil, err
		}
	}
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	u := &uploader{fsys: fsys, plan: p, toSend: t.bytes, total: len(t.files), out: uploaded{hashes: make(map[string]string, len(t.files))}}
	if u.linker, _ = fsys.(targets.Linker); u.linker != nil {
		for _, f := range t.files {
			if _, ok := p.link[f.rel]; ok {
				u.toSend -= f.size
			}
		}
	}
	// Big files first, so the long transfer overlaps the many small ones.
	order := make([]localFile, len(t.files))
	copy(order, t.files)
	sort.SliceStable(order, func(i, j int) bool { return order[i].size > order[j].size })

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		work     = make(chan localFile)
		stop     = make(chan struct{})
	)
	tickerDone := u.ticker(report, stop)
	for i := 0; i < min(parallel, max(len(order), 1)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := u.one(ctx, f); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("upload %s: %w", f.rel, err)
					}
					mu.Unlock()
					cancel()
					continue
				}
				u.filesDone.Add(1)
			}
		}()
	}
feed:
	for _, f := range order {
		select {
		case work <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(stop)
	<-tickerDone
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if report != nil {
		report(u.progress())
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return &u.out, nil
}

// uploadFile writes the local file lf to remote, stamped with mtime where
// fsys can set it, and returns its SHA-256.
func uploadFile(ctx context.Context, fsys targets.FS, lf localFile, remote string, mtime time.Time, sent, total *atomic.Int64) (string, error) {
	local, size := lf.path, lf.size
	f, err := openLocal(local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	r := io.TeeReader(io.LimitReader(f, size), h)
	if err := fsys.WriteNew(ctx, remote, countingReader{r, sent, total}, size, false); err != nil {
		return "", err
	}
	if sent.Load() != size {
		_ = fsys.Remove(remote)
		return "", fmt.Errorf("%s changed size during the upload", local)
	}
	if ts, ok := fsys.(targets.TimeSetter); ok {
		if err := ts.SetModTime(remote, mtime); err != nil {
			_ = fsys.Remove(remote)
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
