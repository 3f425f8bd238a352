// Package ui is the web UI of `celos server`: the slot grid (one row per
// workflow, one column per time bucket, newest on the left), slot details
// with the trigger-status tree, and the operator's actions (rerun, kill,
// pause), all rendered on the server with html/template from an
// scheduler.Service. The page's small script only opens details and posts
// actions to the same HTTP API endpoints the CLI uses (/rerun, /kill,
// /pause); everything it needs is embedded, nothing is fetched from the
// internet, and the grid never makes a request per cell.
package ui

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// LogFunc opens the output of one slot's local run (the command external
// service's per-slot log). It returns an error wrapping fs.ErrNotExist when
// the slot has no log.
type LogFunc func(ctx context.Context, w *workflow.Workflow, st slot.State) (io.ReadCloser, error)

// Options configure the UI handler. The zero value works: the UI at /ui, the
// API at the server root, UTC wall clock, no Hue links, one group.
type Options struct {
	// HueURL, when set, links the external ID of Oozie slots to
	// <HueURL>/oozie/list_oozie_workflow/<external ID>/.
	HueURL string
	// Config groups the workflows (the --ui-config file).
	Config Config
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// TokenRequired makes the page ask for an API token before the first
	// action. A token the operator enters is kept in the browser's local
	// storage and sent as "Authorization: Bearer <token>" with every action,
	// whether or not this is set.
	TokenRequired bool
	// BasePath is where the handler is mounted ("/ui" when empty). The
	// handler serves BasePath (the grid), BasePath/slot, BasePath/workflow,
	// BasePath/log and BasePath/static/.
	BasePath string
	// APIBase is the URL prefix of the HTTP API as the browser sees it (""
	// when the API is at the server root, as in `celos server`).
	APIBase string
	// SlotLog gives access to the command service's log of a local run; nil
	// means logs are not available on this server.
	SlotLog LogFunc
	// Attempts lists every attempt of a slot for its details (the
	// server's external services); nil shows only the slot's last one.
	Attempts scheduler.AttemptLister
	// Deployment tells, for a project's group, the deploy that wrote its
	// workflows file (commit, time, user); nil shows none.
	Deployment DeploymentFunc
	// Version is shown in the footer.
	Version string
	// Instance, when set, is named in the footer: the id of the instance
	// that served the page, when several share one database (docs/ha.md).
	Instance string
	// Logger receives the detail of a page that fails on the server's
	// side (a 500 shows only a reference to it); nil discards it.
	Logger *slog.Logger
	// Title is the page title ("celos" when empty), e.g. the installation name.
	Title string
	// Workers bounds the concurrent Slots calls while building the grid
	// (GOMAXPROCS when zero).
	Workers int
	// State, when set, is the state store's background load after a
	// start (statedb.DB): the grid does not wait for the workflows it has
	// still to read (see StateLoader). Nil: every workflow is read when a
	// view needs it.
	State StateLoader
}

// StateLoader is a state store that reads the state of its workflows in
// the background after a start (statedb.DB: LoadInBackground), and reads
// a workflow not read yet on its first use.
type StateLoader interface {
	// Unread returns those of wfs whose state the background load has
	// still to read (nil when none runs).
	Unread(wfs []string) map[string]bool
	// Preload reads the state of wfs now, workers at a time.
	Preload(wfs []string, workers int)
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// handler is the UI.
type handler struct {
	svc    scheduler.Service
	opts   Options
	tmpl   *template.Template
	static map[string]staticFile
	// assetVersion changes whenever an embedded asset does (cache busting).
	assetVersion string
	gzPool       sync.Pool
	zoom         zoomChooser
	agg          aggCache
}

type staticFile struct {
	data        []byte
	contentType string
}

// New returns the UI handler. Mount it at opts.BasePath and below it, e.g.
//
//	mux.Handle("/ui", h)
//	mux.Handle("/ui/", h)
func New(svc scheduler.Service, opts Options) (http.Handler, error) {
	if svc == nil {
		return nil, errors.New("ui: nil service")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BasePath == "" {
		opts.BasePath = "/ui"
	}
	opts.BasePath = "/" + strings.Trim(opts.BasePath, "/")
	opts.APIBase = strings.TrimRight(opts.APIBase, "/")
	opts.HueURL = strings.TrimRight(opts.HueURL, "/")
	if opts.Title == "" {
		opts.Title = "celos"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := opts.Config.validate(); err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	h := &handler{svc: svc, opts: opts, static: map[string]staticFile{}}
	sum := sha256.New()
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		ct := "application/octet-stream"
		switch path.Ext(p) {
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		h.static[strings.TrimPrefix(p, "static/")] = staticFile{data: data, contentType: ct}
		sum.Write(data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: embedded assets: %w", err)
	}
	h.assetVersion = hex.EncodeToString(sum.Sum(nil))[:12]
	h.tmpl, err = template.New("ui").Funcs(h.funcs()).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	h.gzPool.New = func() any {
		w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
		return w
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.opts.BasePath)
	if !ok || (rest != "" && rest[0] != '/') {
		h.httpError(w, r, http.StatusNotFound, "not found")
		return
	}
	rest = strings.TrimPrefix(rest, "/")
	if strings.HasPrefix(rest, "static/") {
		h.serveStatic(w, r, strings.TrimPrefix(rest, "static/"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.httpError(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: the UI only reads; actions go to the API")
		return
	}
	securityHeaders(w.Header())
	switch rest {
	case "":
		h.serveGrid(w, r)
	case "slot":
		h.serveSlot(w, r)
	case "workflow":
		h.serveWorkflow(w, r)
	case "log":
		h.serveLog(w, r)
	default:
		h.httpError(w, r, http.StatusNotFound, "not found")
	}
}

func securityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
}

func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.httpError(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	f, ok := h.static[name]
	if !ok {
		h.httpError(w, r, http.StatusNotFound, "not found")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("v") == h.assetVersion {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	hd.Set("ETag", `"`+h.assetVersion+`"`)
	if r.Header.Get("If-None-Match") == `"`+h.assetVersion+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.write(w, r, http.StatusOK, f.data)
}

// write sends a body with status code, gzipped when the client accepts it
// and it is worth it.
func (h *handler) write(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	hd := w.Header()
	hd.Add("Vary", "Accept-Encoding")
	if len(body) < 4096 || !acceptsGzip(r) {
		hd.Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(code)
		if r.Method != http.MethodHead {
			w.Write(body)
		}
		return
	}
	hd.Set("Content-Encoding", "gzip")
	w.WriteHeader(code)
	if r.Method == http.MethodHead {
		return
	}
	gz := h.gzPool.Get().(*gzip.Writer)
	gz.Reset(w)
	gz.Write(body)
	gz.Close()
	h.gzPool.Put(gz)
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip
// (listed, and not with q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q := strings.TrimSpace(params)
		if v, ok := strings.CutPrefix(q, "q="); ok && strings.Trim(v, "0.") == "" {
			return false
		}
		return true
	}
	return false
}
