package ui

// Rows grouped by project: the workflows file that defines each workflow
// (as `celos deploy` names it: PROJECT.json), with the deploy that wrote
// it in the group's header.

import (
	"sort"
	"strings"
	"time"
)

// fileLister is implemented by the slot engine: the workflows file that
// defines a workflow (a name inside the workflows directory).
type fileLister interface {
	WorkflowFile(id string) (string, error)
}

// Deployment is what the UI shows of the deploy that wrote a workflows
// file (from the deploy manifest `celos deploy` keeps beside it).
type Deployment struct {
	// Commit is the project's git commit at the deploy, Dirty whether its
	// tree had uncommitted changes.
	Commit string
	Dirty  bool
	At     time.Time
	User   string
	// Changed is true when the file is no longer the one the deploy
	// wrote (edited or replaced by hand since).
	Changed bool
}

// DeploymentFunc returns the deploy of a workflows file (a name inside
// the workflows directory); false when no deploy manifest names it (a
// file put there by hand, or by Celos's deployer).
type DeploymentFunc func(file string) (Deployment, bool)

// projectGroups groups ids by the workflows file that defines them,
// sorted by project name; ok is false when the service cannot say which
// file a workflow comes from.
func (h *handler) projectGroups(ids []string) (groups []*groupView, ok bool) {
	fl, ok := h.svc.(fileLister)
	if !ok {
		return nil, false
	}
	byFile := map[string]*groupView{}
	for _, id := range ids {
		file, err := fl.WorkflowFile(id)
		if err != nil || file == "" {
			file = ""
		}
		g := byFile[file]
		if g == nil {
			g = &groupView{Name: projectName(file), File: file}
			if file == "" {
				g.Name = "(no workflows file)"
			}
			byFile[file] = g
			groups = append(groups, g)
		}
		g.Rows = append(g.Rows, &rowView{ID: id})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	if h.opts.Deployment != nil {
		for _, g := range groups {
			if d, ok := h.opts.Deployment(g.File); ok && g.File != "" {
				g.Deploy = &d
			}
		}
	}
	return groups, true
}

// projectName is the project of a workflows file: its name without
// ".json" (deploy writes PROJECT.json).
func projectName(file string) string {
	return strings.TrimSuffix(file, ".json")
}

// ShortCommit is the commit as git abbreviates it.
func (d *Deployment) ShortCommit() string {
	if len(d.Commit) > 7 {
		return d.Commit[:7]
	}
	return d.Commit
}
