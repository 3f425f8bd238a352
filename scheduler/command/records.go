package command

// The job records (job.json, exit.json), the job directory an external ID
// names, and the job's output log.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/schema/workflow"
)

// jobRecord is job.json.
type jobRecord struct {
	Workflow string    `json:"workflow"`
	Slot     string    `json:"slot"`
	Argv     []string  `json:"argv"`
	Dir      string    `json:"dir,omitempty"`
	PID      int       `json:"pid"`
	Boot     uint64    `json:"procStartTime,omitempty"` // /proc/<pid>/stat field 22, against PID reuse
	Started  time.Time `json:"started"`
	Timeout  int64     `json:"timeoutSeconds,omitempty"`
	// Supervised is true for jobs run by a supervisor (claim.json); false
	// in records of an older celos, which ran the command itself (PID, Boot).
	Supervised bool `json:"supervised,omitempty"`
}

// ExitRecord is exit.json: how a job ended.
type ExitRecord struct {
	ExitCode int       `json:"exitCode"`
	Signal   string    `json:"signal,omitempty"`
	TimedOut bool      `json:"timedOut,omitempty"`
	Killed   bool      `json:"killed,omitempty"`
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished"`
}

func (r ExitRecord) success() bool {
	return r.ExitCode == 0 && r.Signal == "" && !r.TimedOut && !r.Killed && r.Error == ""
}

func (r ExitRecord) detail() string {
	switch {
	case r.Killed:
		return "killed"
	case r.TimedOut:
		return "timed out"
	case r.Error != "":
		return r.Error
	case r.Signal != "":
		return "signal " + r.Signal
	}
	return "exit " + strconv.Itoa(r.ExitCode)
}

// maxRecord bounds a job record: job.json holds the command's argv, which
// the kernel bounds (ARG_MAX, a few MiB) before JSON's escapes.
const maxRecord = 16 << 20

// readRecord reads the record name of a job directory. The service wrote
// it: a symbolic link, FIFO, device or directory in its place is refused
// (never followed, never read, so a FIFO cannot block a step), and so is
// a file larger than any record; the error names the file. A missing file
// gives an error wrapping fs.ErrNotExist.
func readRecord(dir, name string) ([]byte, error) {
	return regfile.ReadFileNoFollow(filepath.Join(dir, name), maxRecord)
}

func readJob(dir string) (jobRecord, error) {
	var r jobRecord
	data, err := readRecord(dir, "job.json")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %v", filepath.Join(dir, "job.json"), err)
	}
	return r, nil
}

func readExit(dir string) (ExitRecord, bool, error) {
	var r ExitRecord
	data, err := readRecord(dir, "exit.json")
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, false, fmt.Errorf("%s: %v", filepath.Join(dir, "exit.json"), err)
	}
	return r, true, nil
}

// writeJSON writes dir/name atomically and durably.
func writeJSON(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name), append(data, '\n'), 0o644, true)
}

// LogPath returns the path of a job's output log.
func (s *Service) LogPath(externalID string) (string, error) {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "output.log"), nil
}

// ReadLog returns the last max bytes (all if max ≤ 0) of a job's output.
func (s *Service) ReadLog(externalID string, max int64) ([]byte, error) {
	p, err := s.LogPath(externalID)
	if err != nil {
		return nil, err
	}
	// A FIFO or device in its place is refused, never opened for
	// reading; a symbolic link is not followed.
	f, fi, err := regfile.OpenNoFollow(p)
	if err != nil {
		return nil, fmt.Errorf("command service: log of %s: %w", externalID, err)
	}
	defer f.Close()
	if max > 0 {
		if fi.Size() > max {
			if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
				return nil, err
			}
		}
	}
	return io.ReadAll(f)
}

// jobDir maps an external ID to its directory, refusing anything that is
// not an ID this service made.
func (s *Service) jobDir(externalID string) (string, error) {
	i := strings.LastIndexByte(externalID, '@')
	if i <= 0 {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	wf, job := externalID[:i], externalID[i+1:]
	if !workflow.IDPattern.MatchString(wf) || wf == "." || wf == ".." {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	if _, _, err := parseJobName(job); err != nil {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	return filepath.Join(s.dir, wf, job), nil
}

func parseJobName(name string) (slotTime time.Time, started int64, err error) {
	dot := strings.IndexByte(name, '.')
	if dot < 0 {
		return time.Time{}, 0, errors.New("no dot")
	}
	slotTime, err = time.Parse(slotLayout, name[:dot])
	if err != nil {
		return time.Time{}, 0, err
	}
	started, err = strconv.ParseInt(name[dot+1:], 10, 64)
	if err != nil || started < 0 || strconv.FormatInt(started, 10) != name[dot+1:] {
		return time.Time{}, 0, errors.New("bad start")
	}
	return slotTime, started, nil
}
