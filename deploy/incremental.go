package deploy

// Incremental deploys: what of the live Oozie directory can be kept.
//
// A deploy compares the project's hdfs/ tree with the live directory as
// the previous manifest recorded it. A live file is trusted (its content
// is the manifest's SHA-256) only when its listing still shows the size
// and modification time the manifest recorded, and that time is at least
// racyMargin older than the deploy that recorded it: every file deploy
// uploads is stamped with such a time (uploadStamp), so any later write
// to it, which sets the time to the server's "now", shows in a listing.
// Only a tool that writes a file and then sets its time back to the
// recorded second goes unnoticed.
//
// When every local file equals a trusted live file, and the live
// directory has nothing else (no other file, directory or link; its owner
// record present), the Oozie directory is unchanged: no upload, no swap.
// Otherwise the new directory is built beside the live one as before, and
// each file that equals a trusted live file is hard-linked from it
// (targets.Linker: the local disk, OpenSSH's hardlink@openssh.com) instead
// of uploaded; only the rest is sent. HDFS has no hard links, so there a
// changed project is uploaded whole (see docs/deploy.md).

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
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/cache"
	"github.com/celos-go/celos/targets"
)

// racyMargin: a recorded modification time is trusted only when it is at
// least this much older than the deploy that recorded it. A write after
// that deploy sets a later time, unless the server's clock is this much
// behind the deploying machine's.
const racyMargin = 30 * time.Second

// stampAge is how far before the deploy's start an uploaded file's
// modification time is set (at most; an older local time is kept), well
// beyond racyMargin.
const stampAge = time.Minute

// uploadStamp is the modification time an uploaded file gets: the local
// file's, or the deploy's start minus stampAge when that is earlier,
// in whole seconds (SFTP's resolution).
func uploadStamp(local, start time.Time) time.Time {
	t := start.Add(-stampAge)
	if !local.IsZero() && local.Before(t) {
		t = local
	}
	return t.Truncate(time.Second)
}

// distinctStamps gives each file of tree its uploadStamp, moved back a
// second at a time until no other file of the deployment has it: neither
// another uploaded file nor a trusted live file that may be hard-linked
// (kept with its time). With one time for all, a file copied onto
// another of the same size with its time kept (cp -p, hdfs dfs -cp -p),
// or moved onto it (mv), listed as the recorded size and time, and was
// trusted with the wrong content.
func distinctStamps(tree *localTree, st *liveState, start time.Time) map[string]time.Time {
	used := map[int64]bool{}
	if st != nil {
		for _, m := range st.trusted {
			used[m.ModTime.Unix()] = true
		}
	}
	stamps := make(map[string]time.Time, len(tree.files))
	for _, f := range tree.files {
		t := uploadStamp(f.mtime, start)
		for used[t.Unix()] {
			t = t.Add(-time.Second)
		}
		used[t.Unix()] = true
		stamps[f.rel] = t
	}
	return stamps
}

// liveState is the live Oozie directory compared with the previous
// manifest.
type liveState struct {
	// trusted are the live files whose listing matches the manifest
	// (size, modification time, not racy), by relative path.
	trusted map[string]ManifestFile
	// files and dirs are everything the live directory holds (relative,
	// the owner record not included).
	files map[string]bool
	dirs  map[string]bool
	// odd: an entry that is neither a regular file nor a directory.
	odd bool
	// owner: the owner record is there (checkOwner has read it).
	owner bool
	// listed are the regular files as listed (the owner record not
	// included).
	listed map[string]fs.FileInfo
}

// inspectLive lists the live Oozie directory and compares it with the
// previous manifest. It returns nil when there is nothing to compare: no
// manifest of this directory on this file system, or no live directory.
func (s *session) inspectLive(hfs targets.FS, prev *Manifest) (*liveState, error) {
	live := s.hdfsDir()
	if prev == nil || prev.HDFS == nil || prev.HDFS.Dir != live || prev.HDFS.FS != s.hdfsName {
		return nil, nil
	}
	st := &liveState{trusted: map[string]ManifestFile{}, files: map[string]bool{}, dirs: map[string]bool{}}
	listed, err := s.listLive(hfs, live, st)
	st.listed = listed
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.hdfsURL(live), err)
	}
	for _, m := range prev.HDFS.Files {
		if e, ok := listed[m.Path]; ok && prev.trusts(m, e.Size(), e.ModTime()) {
			st.trusted[m.Path] = m
		}
	}
	return st, nil
}

// trusts reports whether f, a file of manifest m, still has the recorded
// content when the live file's listing shows size and mtime: both as
// recorded, and the recorded time at least racyMargin older than the
// deploy that recorded it (a write in the same second as the recorded
// one keeps the time; a manifest of an older celos, which did not stamp
// uploaded files, may record such a time).
func (m *Manifest) trusts(f ManifestFile, size int64, mtime time.Time) bool {
	return len(f.SHA256) == 64 && f.Size == size && f.ModTime.Equal(mtime) && !f.ModTime.After(m.DeployedAt.Add(-racyMargin))
}

// listLive lists the live directory into st, every directory's listing
// in flight at once (up to 16: one round trip each over SFTP or to the
// NameNode), and returns its regular files.
func (s *session) listLive(hfs targets.FS, live string, st *liveState) (map[string]fs.FileInfo, error) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
		sem      = make(chan struct{}, 16)
		listed   = map[string]fs.FileInfo{}
	)
	var list func(rel string)
	list = func(rel string) {
		defer wg.Done()
		sem <- struct{}{}
		entries, err := hfs.ReadDir(path.Join(live, rel))
		<-sem
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				st.dirs[p] = true
				wg.Add(1)
				go list(p)
			case !e.Mode().IsRegular():
				st.odd = true
			case p == OwnerFile:
				st.owner = true
			default:
				st.files[p] = true
				listed[p] = e
			}
		}
	}
	wg.Add(1)
	list("")
	wg.Wait()
	return listed, firstErr
}

// reusable hashes the local files that have a trusted live twin of the
// same size and returns those whose content is equal (relative path to
// SHA-256), and whether the live directory is exactly the local tree.
func reusable(ctx context.Context, tree *localTree, st *liveState, known *knownSums) (same map[string]string, unchanged bool, err error) {
	same = map[string]string{}
	if st == nil {
		return same, false, nil
	}
	var candidates []localFile
	for _, f := range tree.files {
		if m, ok := st.trusted[f.rel]; ok && m.Size == f.size {
			candidates = append(candidates, f)
		}
	}
	hc, recorded := known.wait()
	var toHash []localFile
	for _, f := range candidates {
		if _, ok := recorded[f.rel]; !ok {
			toHash = append(toHash, f)
		}
	}
	sums, err := hashLocalFiles(ctx, toHash, hc)
	if err != nil {
		return nil, false, err
	}
	for rel, sum := range recorded {
		sums[rel] = sum
	}
	for _, f := range candidates {
		if sums[f.rel] == st.trusted[f.rel].SHA256 {
			same[f.rel] = sums[f.rel]
		}
	}
	unchanged = st.owner && !st.odd && len(same) == len(tree.files) && len(st.files) == len(tree.files) && len(st.dirs) == len(tree.dirs)
	for _, d := range tree.dirs {
		unchanged = unchanged && st.dirs[d]
	}
	return same, unchanged, nil
}

// hashLocalFiles returns the SHA-256 of each file, two at a time (hashing
// is CPU-bound; reading is from the page cache, usually), or as hc
// recorded it for a file whose identity is unchanged (hc may be nil).
func hashLocalFiles(ctx context.Context, files []localFile, hc *cache.FileHashes) (map[string]string, error) {
	var (
		mu       sync.Mutex
		sums     = make(map[string]string, len(files))
		firstErr error
		wg       sync.WaitGroup
		work     = make(chan localFile)
	)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				sum, err := hashLocalCached(f, hc)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("read %s: %w", shown(f.rel), err)
				}
				sums[f.rel] = sum
				mu.Unlock()
			}
		}()
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		work <- f
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return sums, firstErr
}

// hashLocalCached is hashLocal, answered by hc (if not nil) while the
// file's identity is the one recorded, and recorded there otherwise.
func hashLocalCached(f localFile, hc *cache.FileHashes) (string, error) {
	if hc == nil {
		return hashLocal(f.path)
	}
	file, st, err := openStat(f)
	if err != nil {
		return "", err
	}
	defer file.Close()
	if sum, ok := hc.Lookup(f.rel, st); ok {
		return sum, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	hc.Add(f.rel, st, sum)
	return sum, nil
}

// knownSums are the checksums the cache recorded for the local files
// whose identity is unchanged, looked up in the background (by the
// listing's lstat, no file opened) while the deploy connects to the
// target and lists the live directory: with many files that is most of
// the local work of an unchanged redeploy.
type knownSums struct {
	done chan struct{}
	hc   *cache.FileHashes // nil without a cache directory
	sums map[string]string // relative path → SHA-256
}

// lookUpKnownSums starts looking up the recorded checksum of every file
// of tree in the cache in cacheDir (none without a cache directory).
func lookUpKnownSums(cacheDir string, tree *localTree) *knownSums {
	k := &knownSums{done: make(chan struct{}), sums: map[string]string{}}
	if cacheDir == "" || tree == nil {
		close(k.done)
		return k
	}
	go func() {
		defer close(k.done)
		k.hc = cache.OpenFileHashes(cache.Open(cacheDir), tree.root)
		for _, f := range tree.files {
			if sum, ok := recordedSum(f, k.hc); ok {
				k.sums[f.rel] = sum
			}
		}
	}()
	return k
}

// wait returns the cache and the checksums found, once looked up.
func (k *knownSums) wait() (*cache.FileHashes, map[string]string) {
	<-k.done
	return k.hc, k.sums
}

// save prunes the cache to the files of tree and writes it, if there is
// one: a hint for the next deploy (without it, files are read again), so
// a failure is not an error.
func (k *knownSums) save(tree *localTree) {
	hc, _ := k.wait()
	if hc == nil {
		return
	}
	keep := make(map[string]bool, len(tree.files))
	for _, f := range tree.files {
		keep[f.rel] = true
	}
	hc.Prune(func(name string) bool { return keep[name] })
	_ = hc.Save()
}

// recordedSum returns the checksum hc recorded for f, if f's identity
// when it was listed is the one recorded. Nothing is opened: the listing's
// lstat is the file's identity (a file replaced since is as likely to be
// replaced after an fstat here; either way the live copy was compared
// with what the file held when it was recorded).
func recordedSum(f localFile, hc *cache.FileHashes) (string, bool) {
	if f.stat == nil {
		return "", false
	}
	return hc.Lookup(f.rel, f.stat)
}

// openStat opens a file of the tree (openLocal) and returns its fstat.
func openStat(f localFile) (*os.File, *syscall.Stat_t, error) {
	file, err := openLocal(f.path)
	if err != nil {
		return nil, nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, &st, nil
}

// sameRemoteFile reports whether name on fsys holds exactly data (any
// error, a missing file included, is "no").
func sameRemoteFile(fsys targets.FS, name string, data []byte) bool {
	got, err := targets.ReadFile(fsys, name, int64(len(data)))
	return err == nil && string(got) == string(data)
}
