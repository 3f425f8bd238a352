package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets"
)

// maxFixtureFile bounds one file of a fixture or of hdfs/.
const maxFixtureFile = 1 << 30

// copyLocal copies the local file or directory src to dst on fsys
// (created, with its parents), as deploy copies hdfs/: regular files and
// directories, and symbolic links to regular files whose real path is
// inside root (the project's directory); anything else (a link leaving
// the project, a link to a directory, a FIFO) is an error.
func copyLocal(ctx context.Context, fsys targets.FS, src, dst, root string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if err := fsys.MkdirAll(path.Dir(dst)); err != nil {
			return err
		}
		return copyEntry(ctx, fsys, src, dst, fi.Mode(), root)
	}
	if err := fsys.MkdirAll(dst); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), path.Join(dst, e.Name())
		if e.IsDir() {
			if err := copyLocal(ctx, fsys, s, d, root); err != nil {
				return err
			}
			continue
		}
		if err := copyEntry(ctx, fsys, s, d, e.Type(), root); err != nil {
			return err
		}
	}
	return nil
}

// copyEntry copies one entry that is not a directory.
func copyEntry(ctx context.Context, fsys targets.FS, src, dst string, mode fs.FileMode, root string) error {
	switch {
	case mode.IsRegular():
		return copyFile(ctx, fsys, src, dst)
	case mode&fs.ModeSymlink != 0:
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return fmt.Errorf("%s: broken symbolic link: %w", src, err)
		}
		base, err := filepath.EvalSymlinks(root)
		if err != nil || root == "" || (real != base && !strings.HasPrefix(real, base+string(filepath.Separator))) {
			return fmt.Errorf("%s is a symbolic link that leaves the project directory; refused (copy the file into the project instead)", src)
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: a symbolic link to something other than a regular file (links to directories are not supported)", src)
		}
		return copyFile(ctx, fsys, real, dst)
	}
	return fmt.Errorf("%s is neither a regular file nor a directory (a %s)", src, regfile.Kind(mode.Type()))
}

func copyFile(ctx context.Context, fsys targets.FS, src, dst string) error {
	f, fi, err := regfile.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() > maxFixtureFile {
		return fmt.Errorf("%s is larger than %d bytes", src, maxFixtureFile)
	}
	return fsys.WriteNew(ctx, dst, f, fi.Size(), false)
}

// writeFiles writes inline files (relative name → content) under dir.
func writeFiles(ctx context.Context, fsys targets.FS, files map[string]string, dir string) error {
	names := slices.Sorted(maps.Keys(files))
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for _, n := range names {
		dst := path.Join(dir, n)
		if err := fsys.MkdirAll(path.Dir(dst)); err != nil {
			return err
		}
		data := files[n]
		if err := fsys.WriteNew(ctx, dst, strings.NewReader(data), int64(len(data)), false); err != nil {
			return err
		}
	}
	return nil
}
