package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/external"
)

// TestHostileJobRecords: a job's records (job.json, exit.json,
// claim.json) replaced by a FIFO, a directory, a symbolic link or a file
// far larger than a record are refused, naming the file, by Status,
// Recover and Attempts: never read from a FIFO (which would block the
// step for ever), never followed, never read without bound.
func TestHostileJobRecords(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(`{"exitCode":0,"finished":"2026-01-01T00:00:00Z","pid":1,"run":true,"workflow":"SECRET"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]func(t *testing.T, p string){
		"fifo": func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			// Whatever blocked in an open of the FIFO is let go at the
			// end, so that a failing run ends.
			t.Cleanup(func() {
				if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			})
		},
		"dir": func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func(t *testing.T, p string) {
			if err := os.Symlink(secret, p); err != nil {
				t.Fatal(err)
			}
		},
		"huge": func(t *testing.T, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			// A sparse file of 64 MiB of zero bytes, read whole before.
			if err := f.Truncate(64 << 20); err != nil {
				t.Fatal(err)
			}
			f.Close()
		},
	}
	// The records each call must refuse (Attempts reads the claim only
	// to say more, Recover never reads exit.json).
	reads := map[string]map[string]bool{
		"Status":   {"job.json": true, "exit.json": true, "claim.json": true},
		"Recover":  {"job.json": true, "claim.json": true},
		"Attempts": {"job.json": true, "exit.json": true},
	}
	for _, file := range []string{"job.json", "exit.json", "claim.json"} {
		for kind, plant := range kinds {
			t.Run(file+"/"+kind, func(t *testing.T) {
				dir := t.TempDir()
				s := newService(t, dir)
				w := newWorkflow("true")
				ext, jobDir := plantJob(t, dir, 0, "true")
				os.Remove(filepath.Join(jobDir, file))
				plant(t, filepath.Join(jobDir, file))
				calls := map[string]func() error{
					"Status": func() error {
						_, err := s.Status(context.Background(), w, ext)
						return err
					},
					"Recover": func() error {
						_, _, err := s.Recover(context.Background(), w, sid, time.Time{})
						return err
					},
					"Attempts": func() error {
						as, err := s.Attempts(context.Background(), w, sid)
						if err != nil {
							return err
						}
						if len(as) != 1 {
							t.Errorf("Attempts: %d attempts, want 1", len(as))
							return nil
						}
						if !strings.HasPrefix(as[0].Status, "unreadable") {
							return nil
						}
						return errors.New(as[0].Status)
					},
				}
				for name, call := range calls {
					done := make(chan error, 1)
					go func() { done <- call() }()
					var err error
					select {
					case err = <-done:
					case <-time.After(20 * time.Second):
						t.Fatalf("%s with %s a %s: still blocked after 20 s", name, file, kind)
					}
					if !reads[name][file] {
						continue // not read by this call; it must not block either
					}
					if err == nil {
						t.Errorf("%s with %s a %s: no error", name, file, kind)
						continue
					}
					if !strings.Contains(err.Error(), filepath.Join(jobDir, file)) {
						t.Errorf("%s with %s a %s: error does not name the file: %v", name, file, kind, err)
					}
					if strings.Contains(err.Error(), "SECRET") {
						t.Errorf("%s with %s a %s: error quotes the file's content: %v", name, file, kind, err)
					}
					if name != "Attempts" && !errors.Is(err, external.ErrUnavailable) {
						t.Errorf("%s with %s a %s: error is not ErrUnavailable: %v", name, file, kind, err)
					}
				}
			})
		}
	}
}

// TestReadLogRefusesWhatIsNotARegularFile: a FIFO or symbolic link in
// place of a job's output.log is refused by ReadLog, naming it, never
// opened for reading (a FIFO would block) nor followed.
func TestReadLogRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	ext, jobDir := plantJob(t, dir, 0, "true")
	p := filepath.Join(jobDir, "output.log")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := s.ReadLog(ext, 400)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("ReadLog of a FIFO: %v, want an error naming %s as a named pipe", err, p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ReadLog of a FIFO: still blocked after 20 s")
	}
}
