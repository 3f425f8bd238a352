package targets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"

	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// inChild runs body in a child process limited to 2 GiB and deadline
// (package child).
func inChild(t *testing.T, deadline time.Duration, body func() error) {
	t.Helper()
	child.Run(t, deadline, 2<<30, body)
}

// makeSpecial replaces p with a FIFO, a symlink to a device or a
// directory.
func makeSpecial(kind, p string) error {
	os.Remove(p)
	switch kind {
	case "fifo":
		return syscall.Mkfifo(p, 0o644)
	case "devzero":
		return os.Symlink("/dev/zero", p)
	case "devnull":
		return os.Symlink("/dev/null", p)
	case "dir":
		return os.Mkdir(p, 0o755)
	}
	return fmt.Errorf("kind %q", kind)
}

var specialKinds = []string{"fifo", "devzero", "devnull", "dir"}

// TestTargetFilesNonRegular: a target file, or a Hadoop XML file it names,
// that is a FIFO, a device (or a symlink to one) or a directory is refused
// at once with an error naming it, read from a file: URL, a local path or
// over SFTP.
func TestTargetFilesNonRegular(t *testing.T) {
	for _, kind := range specialKinds {
		for _, which := range []string{"target", "hdfs-site", "sftp"} {
			t.Run(kind+"-"+which, func(t *testing.T) {
				inChild(t, time.Minute, func() error {
					dir := t.TempDir()
					target := filepath.Join(dir, "target.json")
					site := filepath.Join(dir, "hdfs-site.xml")
					for _, f := range []string{"core-site.xml", "hdfs-site.xml"} {
						if err := os.WriteFile(filepath.Join(dir, f), []byte("<configuration/>"), 0o644); err != nil {
							return err
						}
					}
					err := os.WriteFile(target, []byte(`{"hadoop.hdfs-site.xml": "file:hdfs-site.xml", "hadoop.core-site.xml": "file:core-site.xml", "workflows.dir.uri": "file:///w"}`), 0o644)
					if err != nil {
						return err
					}
					c := NewConnector(SSHOptions{}, hadoopconf.Options{})
					defer c.Close()
					ctx := context.Background()
					switch which {
					case "target":
						if err := makeSpecial(kind, target); err != nil {
							return err
						}
						for _, arg := range []string{target, "file://" + target} {
							_, err := Load(ctx, c, arg, ParseOptions{})
							if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "not a regular file") {
								return fmt.Errorf("Load(%s): want an error naming it as not a regular file, got %v", arg, err)
							}
						}
					case "hdfs-site":
						tg, err := Load(ctx, c, target, ParseOptions{})
						if err != nil {
							return err
						}
						if err := makeSpecial(kind, site); err != nil {
							return err
						}
						_, err = tg.HadoopConf(ctx, c)
						if err == nil || !strings.Contains(err.Error(), site) || !strings.Contains(err.Error(), "not a regular file") {
							return fmt.Errorf("HadoopConf: want an error naming %s as not a regular file, got %v", site, err)
						}
					case "sftp":
						s, err := NewSFTPClient("sftp://inprocess", sshtest.InProcess(t, dir))
						if err != nil {
							return err
						}
						if err := makeSpecial(kind, target); err != nil {
							return err
						}
						_, err = readRegular(s, filepath.ToSlash(target), MaxTargetFileSize)
						if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "not a regular file") {
							return fmt.Errorf("over SFTP: want an error naming %s as not a regular file, got %v", target, err)
						}
					}
					return nil
				})
			})
		}
	}
}

// TestLocalOpenNonRegular: the local file system's Open refuses what is
// not a regular file without blocking (every upload and read of a file:
// location goes through it).
func TestLocalOpenNonRegular(t *testing.T) {
	inChild(t, time.Minute, func() error {
		dir := t.TempDir()
		for _, kind := range []string{"fifo", "devzero"} {
			p := filepath.Join(dir, kind)
			if err := makeSpecial(kind, p); err != nil {
				return err
			}
			f, err := Local{}.Open(filepath.ToSlash(p))
			if err == nil {
				f.Close()
				return fmt.Errorf("Open(%s) of a %s: no error", p, kind)
			}
			if !strings.Contains(err.Error(), "not a regular file") {
				return fmt.Errorf("Open(%s): %v", p, err)
			}
		}
		return nil
	})
}
