package deploy

// Listing what is deployed through a target: celos deployments.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/celos-go/celos/targets"
)

// Deployment is one project deployed through a target's workflows
// directory, as its deploy manifest records it.
type Deployment struct {
	Project string `json:"project"`
	// WorkflowsFile is the URL of the project's workflows file.
	WorkflowsFile string `json:"workflowsFile"`
	// Manifest is false for a workflows file without a (readable) deploy
	// manifest: deployed by Celos CI, by hand, or by a celos that failed
	// to write it. The fields below are then empty.
	Manifest     bool      `json:"manifest"`
	Workflows    int       `json:"workflows"`
	GitCommit    string    `json:"gitCommit,omitempty"`
	GitDirty     bool      `json:"gitDirty"`
	DeployedAt   time.Time `json:"deployedAt,omitzero"`
	User         string    `json:"user,omitempty"`
	Host         string    `json:"host,omitempty"`
	CelosVersion string    `json:"celosVersion,omitempty"`
	HDFSDir      string    `json:"hdfsDir,omitempty"`
}

// Deployments lists the projects deployed through the target's workflows
// directory: one per workflows file NAME.json, with what its manifest
// records (commit, dirty tree, time, who). Nothing is changed and no lock
// is taken. o.Project is ignored.
func Deployments(ctx context.Context, o Options) (target string, ds []Deployment, err error) {
	o.Project = ""
	s, err := openTarget(ctx, o)
	if err != nil {
		return "", nil, err
	}
	s.begin("list workflows directory")
	entries, err := s.wf.ReadDir(s.wfDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("the workflows directory %s (workflows.dir.uri in the target file %s) does not exist; is the target file right?", s.target.WorkflowsDir, s.target.Source)
		}
		return "", nil, s.fail(err, true)
	}
	for _, e := range entries {
		name := e.Name()
		project, ok := strings.CutSuffix(name, ".json")
		if !ok || ValidateProjectName(project) != nil {
			continue // a temporary file, the state directory, something else
		}
		if e.Mode()&fs.ModeSymlink != 0 {
			// The server loads a link to a regular file, as checkIDClash
			// reads it; a broken link gives it nothing.
			if e, err = s.wf.Stat(path.Join(s.wfDir, name)); err != nil {
				continue
			}
		}
		if !e.Mode().IsRegular() {
			continue
		}
		d := Deployment{Project: project, WorkflowsFile: s.target.WorkflowsDir.Join(name).String()}
		if m := s.listedManifest(project); m != nil {
			d.Manifest = true
			d.Workflows = len(m.Workflows)
			d.GitCommit, d.GitDirty = m.GitCommit, m.GitDirty
			d.DeployedAt, d.User, d.Host, d.CelosVersion = m.DeployedAt.UTC(), m.User, m.Host, m.CelosVersion
			if m.HDFS != nil {
				d.HDFSDir = m.HDFS.FS + m.HDFS.Dir
			}
		}
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Project < ds[j].Project })
	return s.target.Source, ds, nil
}

// listedManifest reads project's manifest for the listing: nil when there
// is none, or it is unreadable, of another project, or written through
// another workflows directory (each a warning, as readManifest).
func (s *session) listedManifest(project string) *Manifest {
	p := path.Join(s.stateDir, project+".manifest.json")
	data, err := targets.ReadFile(s.wf, p, 64<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var m Manifest
	if err != nil || json.Unmarshal(data, &m) != nil || m.Format != ManifestFormat || m.Project != project {
		s.warn("ignoring the unreadable deploy manifest %s", p)
		return nil
	}
	if m.WorkflowsDir != "" && m.WorkflowsDir != s.wfKey() {
		s.warn("ignoring the deploy manifest %s: it was written through the workflows directory %s, not this one (%s)", p, shown(m.WorkflowsDir), s.wfKey())
		return nil
	}
	return &m
}
