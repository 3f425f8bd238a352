package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/celos-go/celos/targets"
)

// ManifestFormat is the format field of a deploy manifest.
const ManifestFormat = "celos.dev/deploy-manifest/v1"

// Manifest records what a deploy wrote, next to the project's lock in the
// workflows directory's StateDir: undeploy removes exactly that, and plan
// compares against it.
type Manifest struct {
	Format       string    `json:"format"`
	Project      string    `json:"project"`
	DeployedAt   time.Time `json:"deployedAt"`
	User         string    `json:"user,omitempty"`
	Host         string    `json:"host,omitempty"`
	GitCommit    string    `json:"gitCommit,omitempty"`
	GitDirty     bool      `json:"gitDirty,omitempty"`
	CelosVersion string    `json:"celosVersion,omitempty"`
	Target       string    `json:"target"`
	WorkflowsDir string    `json:"workflowsDir,omitempty"`
	// WorkflowsFile is the URL of the compiled workflows file.
	WorkflowsFile   string   `json:"workflowsFile"`
	WorkflowsSHA256 string   `json:"workflowsSHA256"`
	Workflows       []string `json:"workflows"`
	// HDFS is the Oozie directory, when the project has one.
	HDFS *HDFSManifest `json:"hdfs,omitempty"`
}

// HDFSManifest describes a deployed Oozie directory.
type HDFSManifest struct {
	// FS names the file system (hdfs://nn:8020, or the installation's
	// file:// or sftp:// when fs.defaultFS is file:///).
	FS string `json:"fs"`
	// Dir is the directory's absolute path on FS.
	Dir   string         `json:"dir"`
	Bytes int64          `json:"bytes"`
	Files []ManifestFile `json:"files"`
}

// ManifestFile is one uploaded file; ModTime is as the target listed it
// right after the deploy, so plan can trust SHA256 while size and time
// are unchanged.
type ManifestFile struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256"`
	ModTime time.Time `json:"modTime"`
}

func (s *session) manifestPath() string { return path.Join(s.stateDir, s.o.Project+".manifest.json") }

// readManifest returns the project's manifest, or nil when there is none.
// An unreadable manifest is reported as a warning and treated as absent.
func (s *session) readManifest() (*Manifest, error) {
	data, err := targets.ReadFile(s.wf, s.manifestPath(), 64<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, targets.ErrTooLarge) {
		return nil, err
	}
	var m Manifest
	if err != nil || json.Unmarshal(data, &m) != nil || m.Format != ManifestFormat || m.Project != s.o.Project {
		// Not "no manifest": checkOwner then takes over no Oozie
		// directory without an owner record, which this manifest might
		// have said another tool wrote.
		s.manifestUnreadable = true
		s.warn("ignoring the unreadable deploy manifest %s", s.manifestPath())
		return nil, nil
	}
	// A manifest written through another workflows directory (copied
	// along with it) describes another installation. Manifests of older
	// celos versions have no workflowsDir and are trusted as before.
	if m.WorkflowsDir != "" && m.WorkflowsDir != s.wfKey() {
		s.warn("ignoring the deploy manifest %s: it was written through the workflows directory %s, not this one (%s)", s.manifestPath(), shown(m.WorkflowsDir), s.wfKey())
		return nil, nil
	}
	// Deploy writes only HDFS_ROOT/NAME: a manifest naming another
	// directory (edited, or from a deploy to another HDFS root) must not
	// make undeploy or the stale clean-up of deploy remove it.
	if m.HDFS != nil {
		if dir := path.Clean(m.HDFS.Dir); dir == s.hdfsDir() {
			m.HDFS.Dir = dir
		} else {
			s.warn("the deploy manifest %s names the Oozie directory %q, not HDFS_ROOT/%s (%s): it is left alone; "+
				"if an earlier deploy used another HDFS root, undeploy with --hdfs-root set to that root, or remove it by hand",
				s.manifestPath(), m.HDFS.Dir, s.o.Project, s.hdfsDir())
			m.HDFS = nil
			s.manifestDirDropped = true
		}
	}
	return &m, nil
}

// writeManifest replaces the manifest with m, atomically. With durable
// false it is not synced to the server's disk (a deploy that changed
// nothing: a manifest lost in a crash leaves the previous one, which
// describes the same files).
func (s *session) writeManifest(ctx context.Context, m *Manifest, durable bool) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := s.wf.MkdirAll(s.stateDir); err != nil {
		return err
	}
	p := s.manifestPath()
	if durable {
		err = targets.WriteFileAtomic(ctx, s.wf, p, data)
	} else {
		tmp := targets.TempName(p, "tmp")
		if err = s.wf.WriteNew(ctx, tmp, bytes.NewReader(data), int64(len(data)), false); err == nil {
			if err = s.wf.Rename(tmp, p); err != nil {
				_ = s.wf.Remove(tmp)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("write manifest %s: %w", p, err)
	}
	return nil
}
