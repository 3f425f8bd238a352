package sandbox

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets"
)

// maxFixtureFile bounds one file of a fixture or of hdfs/.
const maxFixtureFile = 1 << 30

// copyLocal copies the local file or directory src to dst on fsys
// (created, with its parents). Only regular files and directories are
// copied; anything else (a symbolic link, a FIFO) is an error.
func copyLocal(ctx context.Context, fsys targets.FS, src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if err := fsys.MkdirAll(path.Dir(dst)); err != nil {
			return err
		}
		return copyFile(ctx, fsys, src, dst)
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
		switch {
		case e.IsDir():
			if err := copyLocal(ctx, fsys, s, d); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if err := copyFile(ctx, fsys, s, d); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is neither a regular file nor a directory (%s)", s, e.Type())
		}
	}
	return nil
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
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
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
