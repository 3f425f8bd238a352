package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// LogFile is the current log file's name under --logs; at the first write
// of a new UTC day it is renamed to celos-YYYY-MM-DD.log (the day it
// covers) and a new one is started, as Celos's log4j DailyRollingFileAppender
// did.
const LogFile = "celos.log"

// dailyFile is an io.Writer appending to <dir>/celos.log, rolled daily.
type dailyFile struct {
	dir string
	now func() time.Time

	mu  sync.Mutex
	f   *os.File
	day string // the UTC day (2006-01-02) the open file covers
}

const dayLayout = "2006-01-02"

// openDailyFile opens (creating the directory if needed) the log file. A
// celos.log left from an earlier day is rolled at the first write.
func openDailyFile(dir string, now func() time.Time) (*dailyFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("logs directory: %w", err)
	}
	d := &dailyFile{dir: dir, now: now}
	path := filepath.Join(dir, LogFile)
	f, info, err := openLogFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	d.f = f
	d.day = now().UTC().Format(dayLayout)
	if info.Size() > 0 {
		d.day = info.ModTime().UTC().Format(dayLayout)
	}
	return d, nil
}

// openLogFile opens path for appending, creating it, without following a
// symbolic link (O_NOFOLLOW) or blocking on a FIFO (O_NONBLOCK): a link or
// anything but a regular file is refused, naming it. flag adds O_EXCL.
func openLogFile(path string, flag int) (*os.File, fs.FileInfo, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, nil, notRegular(path, fi.Mode())
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func notRegular(path string, mode fs.FileMode) error {
	if mode&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link (not followed; remove it)", path)
	}
	kind := "a directory"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case !mode.IsDir():
		kind = "of an unknown type"
	}
	return fmt.Errorf("%s is not a regular file but %s (remove it)", path, kind)
}

func (d *dailyFile) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return 0, errors.New("log file closed")
	}
	if today := d.now().UTC().Format(dayLayout); today != d.day {
		// A failed roll keeps writing to the current file and tries again
		// at the next write.
		_ = d.roll(today)
	}
	return d.f.Write(p)
}

// roll renames celos.log to celos-<day>.log (celos-<day>.1.log, ... if that
// exists already) and starts a new celos.log.
func (d *dailyFile) roll(today string) error {
	cur := filepath.Join(d.dir, LogFile)
	target := filepath.Join(d.dir, "celos-"+d.day+".log")
	for i := 1; ; i++ {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			break
		}
		target = filepath.Join(d.dir, fmt.Sprintf("celos-%s.%d.log", d.day, i))
	}
	if err := os.Rename(cur, target); err != nil {
		return err
	}
	// A new file, never an existing one (a link planted since the rename).
	f, _, err := openLogFile(cur, os.O_EXCL)
	if err != nil {
		return err
	}
	d.f.Close()
	d.f, d.day = f, today
	return nil
}

func (d *dailyFile) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// NewLogger returns a logger writing text lines (UTC times with
// milliseconds) to stderr and, when dir is not empty, to the daily-rolled
// celos.log under dir. Close the returned closer at exit.
func NewLogger(stderr io.Writer, dir string, level slog.Level) (*slog.Logger, io.Closer, error) {
	var w io.Writer = stderr
	var closer io.Closer = nopCloser{}
	if dir != "" {
		f, err := openDailyFile(dir, time.Now)
		if err != nil {
			return nil, nil, err
		}
		w = &teeWriter{a: stderr, b: f}
		closer = f
	}
	h := slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
				a.Value = slog.StringValue(slot.FormatTime(a.Value.Time()))
			}
			return a
		},
	})
	return slog.New(h), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// teeWriter writes to both writers; unlike io.MultiWriter a failure of the
// first (a closed stderr) does not stop the second.
type teeWriter struct{ a, b io.Writer }

func (t *teeWriter) Write(p []byte) (int, error) {
	_, errA := t.a.Write(p)
	_, errB := t.b.Write(p)
	if errB != nil {
		return 0, errB
	}
	if errA != nil {
		return 0, errA
	}
	return len(p), nil
}
