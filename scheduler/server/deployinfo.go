package server

// What the UI shows of each project's deploy: the deploy manifest
// `celos deploy` keeps in the workflows directory's state directory
// (.celos-deploy/PROJECT.manifest.json), checked against the workflows
// file it names.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/deploy"
	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler/ui"
)

// deployRecheck is how long a file's deploy is trusted before its files
// are looked at again (a page of 10,000 projects must not stat 20,000
// files each time).
const deployRecheck = 5 * time.Second

// maxManifest bounds the bytes read from a manifest (its HDFS file list
// can be long) and from a workflows file hashed against it.
const maxManifest = 64 << 20

// deployments reads the deploy manifests of the workflows directory dir.
type deployments struct {
	dir string
	now func() time.Time

	mu    sync.Mutex
	cache map[string]*deployEntry // by workflows file name
}

type deployEntry struct {
	checked  time.Time
	manifest fileStamp
	file     fileStamp
	info     ui.Deployment
	ok       bool
}

// fileStamp identifies a version of a file well enough to skip reading it
// again: size and modification time.
type fileStamp struct {
	size int64
	mod  time.Time
}

func stamp(path string) (fileStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStamp{}, false
	}
	return fileStamp{fi.Size(), fi.ModTime()}, true
}

func newDeployments(dir string) *deployments {
	return &deployments{dir: dir, now: time.Now, cache: map[string]*deployEntry{}}
}

// Deployment is a ui.DeploymentFunc: the deploy that wrote the workflows
// file named file, if a manifest of the project names it.
func (d *deployments) Deployment(file string) (ui.Deployment, bool) {
	project, ok := strings.CutSuffix(file, ".json")
	if !ok || project == "" || strings.ContainsAny(file, `/\`) {
		return ui.Deployment{}, false
	}
	now := d.now()
	d.mu.Lock()
	e := d.cache[file]
	d.mu.Unlock()
	if e != nil && now.Sub(e.checked) < deployRecheck {
		return e.info, e.ok
	}
	mpath := filepath.Join(d.dir, deploy.StateDir, project+".manifest.json")
	fpath := filepath.Join(d.dir, file)
	ms, mok := stamp(mpath)
	fs, fok := stamp(fpath)
	if e == nil || ms != e.manifest || fs != e.file {
		e = &deployEntry{manifest: ms, file: fs}
		if mok && fok {
			e.info, e.ok = readDeployment(mpath, fpath, project)
		}
	}
	e.checked = now
	d.mu.Lock()
	if len(d.cache) > 100_000 {
		clear(d.cache)
	}
	d.cache[file] = e
	d.mu.Unlock()
	return e.info, e.ok
}

// readDeployment reads a project's manifest and checks the workflows file
// against the SHA-256 it recorded. A manifest that does not parse, is of
// another format or names another project is no deployment.
func readDeployment(mpath, fpath, project string) (ui.Deployment, bool) {
	data, err := regfile.ReadFile(mpath, maxManifest)
	if err != nil {
		return ui.Deployment{}, false
	}
	var m deploy.Manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Format != deploy.ManifestFormat || m.Project != project {
		return ui.Deployment{}, false
	}
	info := ui.Deployment{Commit: m.GitCommit, Dirty: m.GitDirty, At: m.DeployedAt, User: m.User}
	if content, err := regfile.ReadFile(fpath, maxManifest); err == nil {
		sum := sha256.Sum256(content)
		info.Changed = !strings.EqualFold(hex.EncodeToString(sum[:]), m.WorkflowsSHA256)
	}
	return info, true
}
