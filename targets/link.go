package targets

import (
	"context"
	"errors"
	"fmt"
	"os"
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
