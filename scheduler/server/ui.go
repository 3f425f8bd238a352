package server

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/ui"
	"github.com/celos-go/celos/schema/workflow"
)

// uiOptions are what the UI is given: its groups file (--ui-config, empty:
// none), the Hue URL of Oozie jobs, the version shown, and whether its
// actions need the API token.
type uiOptions struct {
	configFile    string
	workflowsDir  string // where the deploy manifests are
	hueURL        string
	version       string
	tokenRequired bool
	instance      string         // named in the footer when several instances share the database
	state         ui.StateLoader // the store's background load after the start (nil: none)
	log           *slog.Logger   // where a page's server-side failure is logged
}

// mountUI serves the web UI at /ui and redirects / to it.
func mountUI(mux *http.ServeMux, o uiOptions, svc scheduler.Service, svcs map[string]external.Service) error {
	opts := ui.Options{HueURL: o.hueURL, Version: o.version, TokenRequired: o.tokenRequired, Attempts: attemptLister(svcs), Instance: o.instance, State: o.state, Logger: o.log}
	if o.configFile != "" {
		c, err := ui.LoadConfig(o.configFile)
		if err != nil {
			return err
		}
		opts.Config = c
	}
	if o.workflowsDir != "" {
		opts.Deployment = newDeployments(o.workflowsDir).Deployment
	}
	if cmd, ok := svcs[workflow.ServiceCommand].(*command.Service); ok {
		opts.SlotLog = commandLog(cmd)
	}
	h, err := ui.New(svc, opts)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	mux.Handle("/ui", h)
	mux.Handle("/ui/", h)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui", http.StatusFound)
	})
	return nil
}

// commandLog opens the output log of a slot run by the command service.
func commandLog(cmd *command.Service) ui.LogFunc {
	return func(_ context.Context, w *workflow.Workflow, st slot.State) (io.ReadCloser, error) {
		if w.ExternalService.Type != workflow.ServiceCommand || st.ExternalID == "" {
			return nil, fmt.Errorf("slot %s has no local run: %w", st.ID, fs.ErrNotExist)
		}
		p, err := cmd.LogPath(st.ExternalID)
		if err != nil {
			return nil, err
		}
		// The server wrote the log: a symbolic link, FIFO or device in
		// its place is refused, never followed or read.
		f, _, err := regfile.OpenNoFollow(p)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
}
