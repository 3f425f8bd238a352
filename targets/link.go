package targets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"
)

// Linker is a file system that can make hard links: deploy links the
// unchanged files of the live Oozie directory into the new one instead of
// uploading them again. A file system without hard links (HDFS) does not
// implement it; one that may or may not (an SFTP server without
// hardlink@openssh.com) returns an error wrapping errors.ErrUnsupported.
type Linker interface {
	// Link makes newname (which must not exist) a hard link of the
	// regular file oldname.
	Link(oldname, newname string) error
}

// TimeSetter is a file system that can set a file's modification time:
// deploy stamps what it uploads with a time no later write can produce,
// so that a listing tells a file changed behind its back.
type TimeSetter interface {
	SetModTime(name string, mtime time.Time) error
}

// Link makes newname a hard link of oldname.
func (Local) Link(oldname, newname string) error {
	return os.Link(filepath.FromSlash(oldname), filepath.FromSlash(newname))
}

// SetModTime sets name's modification (and access) time.
func (Local) SetModTime(name string, mtime time.Time) error {
	return os.Chtimes(filepath.FromSlash(name), mtime, mtime)
}

// Link makes newname a hard link of oldname with OpenSSH's
// hardlink@openssh.com; without it the error wraps errors.ErrUnsupported.
// Links are spread over the upload sessions, as files are.
func (s *SFTP) Link(oldname, newname string) error {
	if !s.hardlink {
		return fmt.Errorf("link %s%s: the server does not offer hardlink@openssh.com: %w", s.name, newname, errors.ErrUnsupported)
	}
	c, done := s.session()
	defer done()
	return s.wrap("link", newname, c.Link(oldname, newname))
}

// SetModTime sets name's modification (and access) time (SFTP setstat,
// whole seconds).
func (s *SFTP) SetModTime(name string, mtime time.Time) error {
	c, done := s.session()
	defer done()
	return s.wrap("setstat", name, c.Chtimes(name, mtime, mtime))
}

// SetModTime sets name's modification (and access) time (HDFS setTimes,
// milliseconds).
func (h *HDFS) SetModTime(name string, mtime time.Time) error {
	return h.do(context.Background(), "settimes", name, func(c *hdfsConn) error {
		return who(c, c.client.Chtimes(name, mtime, mtime))
	})
}

// RealPather is a file system that resolves symbolic links: deploy
// compares the real paths of the Oozie directory and the workflows
// directory, so that a link on the server (a home directory that links
// elsewhere) does not hide that they are the same.
type RealPather interface {
	// RealPath returns name with every symbolic link resolved; name
	// must exist.
	RealPath(name string) (string, error)
}

// RealPath resolves name's symbolic links on the local disk.
func (Local) RealPath(name string) (string, error) {
	p, err := filepath.EvalSymlinks(filepath.FromSlash(name))
	return filepath.ToSlash(p), err
}

// RealPath resolves name's symbolic links on the server (SFTP realpath,
// which OpenSSH answers with realpath(3)).
func (s *SFTP) RealPath(name string) (string, error) {
	p, err := s.c.RealPath(name)
	return p, s.wrap("realpath", name, err)
}

// ResolvePath returns the absolute path name with the symbolic links of
// its longest resolvable prefix resolved on fsys, the rest appended (the
// last components may not exist yet). On a file system that is not a
// RealPather it returns name cleaned. A lost connection is an error; a
// prefix that cannot be resolved otherwise counts as missing. An
// existing path costs one round trip over SFTP.
func ResolvePath(fsys FS, name string) (string, error) {
	name = path.Clean(name)
	rp, ok := fsys.(RealPather)
	if !ok {
		return name, nil
	}
	rest := ""
	for cur := name; ; {
		r, err := rp.RealPath(cur)
		if err == nil && path.IsAbs(r) {
			return path.Join(r, rest), nil
		}
		if errors.Is(err, ErrConnectionLost) {
			return "", err
		}
		parent := path.Dir(cur)
		if parent == cur {
			return name, nil
		}
		rest = path.Join(path.Base(cur), rest)
		cur = parent
	}
}
