package deploy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/celos-go/celos/targets"
)

// Undeploy removes a project from the target: the workflows file first
// (so the server stops scheduling it), then its Oozie directory, then the
// manifest. With a manifest it removes exactly what the last deploy wrote;
// without one (a project deployed by Celos CI, say) it removes NAME.json
// and $HDFS_ROOT/NAME. Slot state on the server is not touched.
func Undeploy(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	s, err := openSession(ctx, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Project: o.Project, Target: s.target.Source, WorkflowsFile: s.wfURL()}

	s.begin("lock")
	lk, err := s.acquireLock(ctx, "undeploy")
	if err != nil {
		return nil, s.fail(err, true)
	}
	defer lk.release()

	s.begin("read manifest")
	m, err := s.readManifest()
	if err != nil {
		return nil, s.fail(err, true)
	}
	hdfsDir := s.hdfsDir()
	if m != nil {
		res.Workflows = len(m.Workflows)
		hdfsDir = ""
		if m.HDFS != nil {
			hdfsDir = m.HDFS.Dir
			res.Files, res.Bytes = len(m.HDFS.Files), m.HDFS.Bytes
		}
	}

	s.begin("remove workflows file")
	if err := s.wf.Remove(s.wfFile); err == nil {
		res.Removed = append(res.Removed, s.wfURL())
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, s.fail(fmt.Errorf("%s: %w", s.wfURL(), err), true)
	}
	if hdfsDir != "" {
		s.begin("connect to HDFS")
		hfs, err := s.openHDFS(ctx)
		if err != nil {
			return nil, &StepError{Step: s.step, Err: err, Note: "The workflows file is removed, so the server no longer schedules the project; its Oozie directory is still there: rerun the undeploy."}
		}
		if m != nil && m.HDFS != nil && m.HDFS.FS != s.hdfsName {
			s.warn("the project was deployed to %s, the target now names %s; removing %s there", m.HDFS.FS, s.hdfsName, hdfsDir)
		}
		s.begin("remove HDFS directory")
		if ok, err := targets.Exists(hfs, hdfsDir); err != nil {
			return nil, &StepError{Step: s.step, Err: err, Note: "The workflows file is removed; the Oozie directory may remain: rerun the undeploy."}
		} else if ok {
			if err := hfs.RemoveAll(hdfsDir); err != nil {
				return nil, &StepError{Step: s.step, Err: err, Note: "The workflows file is removed; the Oozie directory may be partly removed: rerun the undeploy."}
			}
			res.HDFSDir = s.hdfsURL(hdfsDir)
			res.Removed = append(res.Removed, res.HDFSDir)
		}
		if err := s.cleanDir(hfs, s.hdfsRoot, o.Project, nil); err != nil {
			s.warn("%v", err)
		}
	}
	s.begin("remove manifest")
	if err := s.cleanDir(s.wf, s.wfDir, o.Project+".json", nil); err != nil {
		s.warn("%v", err)
	}
	if err := s.cleanDir(s.wf, s.stateDir, o.Project+".manifest.json", nil); err != nil {
		s.warn("%v", err)
	}
	if err := s.wf.Remove(s.manifestPath()); err == nil {
		res.Removed = append(res.Removed, s.target.WorkflowsDir.Join(StateDir, o.Project+".manifest.json").String())
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, &StepError{Step: s.step, Err: err, Note: "The project is undeployed; only its manifest remains."}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
