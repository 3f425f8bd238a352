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
// manifest. The only Oozie directory it removes is HDFS_ROOT/NAME, when
// the manifest names it or there is no manifest (a project deployed by
// Celos CI, say), and only when it was deployed through this workflows
// directory (its owner record; see OwnerFile). Slot state on the server
// is not touched.
func Undeploy(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	s, err := openSession(ctx, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Project: o.Project, Target: s.target.Source, WorkflowsFile: s.wfURL()}
	s.undeploy = true

	s.begin("check target")
	if err := s.checkDirs(ctx, false, false); err != nil {
		return nil, s.fail(err, true)
	}
	if err := s.checkOverlap(ctx, s.hdfsDir()); err != nil {
		return nil, s.fail(err, true)
	}

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
	s.atRisk = s.deployed(m)
	// The only Oozie directory undeploy ever removes is HDFS_ROOT/NAME:
	// without a manifest (Celos CI) or when the manifest names it.
	hdfsDir := s.hdfsDir()
	if m != nil {
		res.Workflows = len(m.Workflows)
		if m.HDFS == nil && !s.manifestDirDropped {
			hdfsDir = "" // the project had no Oozie directory
		} else if m.HDFS != nil {
			res.Files, res.Bytes = len(m.HDFS.Files), m.HDFS.Bytes
		}
	}
	// Check the HDFS side before anything is removed: an Oozie directory
	// overlapping the workflows directory, or deployed through another
	// workflows directory, is refused.
	var hfs targets.FS
	var connErr error
	if hdfsDir != "" {
		s.begin("check HDFS directory")
		if err := s.checkOverlap(ctx, hdfsDir); err != nil {
			return nil, s.fail(err, true)
		}
		s.begin("connect to HDFS")
		if hfs, connErr = s.openHDFS(ctx); connErr == nil {
			s.begin("check HDFS directory")
			if err := s.checkOwner(hfs, hdfsDir, m); errors.Is(err, errUnrecorded) {
				// Not recorded as this project's: left alone.
				s.warn("%v", err)
				hdfsDir = ""
			} else if err != nil {
				return nil, s.fail(err, true)
			}
		}
	}

	s.begin("remove workflows file")
	if err := s.wf.Remove(s.wfFile); err == nil {
		res.Removed = append(res.Removed, s.wfURL())
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, s.fail(fmt.Errorf("%s: %w", s.wfURL(), err), true)
	}
	if hdfsDir != "" {
		if connErr != nil {
			s.begin("connect to HDFS")
			return nil, &StepError{Step: s.step, Err: connErr, Note: "The workflows file is removed, so the server no longer schedules the project; its Oozie directory is still there: rerun the undeploy."}
		}
		if m != nil && m.HDFS != nil && m.HDFS.FS != s.hdfsName {
			s.warn("the project was deployed to %s, the target now names %s; removing %s there", shown(m.HDFS.FS), s.hdfsName, hdfsDir)
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
