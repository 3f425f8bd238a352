// Package ooziefake is a protocol-faithful fake Oozie server for tests: an
// HTTP server on 127.0.0.1 that follows the Oozie Web Services API
// (WebServicesAPI.md, and the servlets JsonRestServlet, BaseJobsServlet,
// V1JobServlet, VersionServlet of apache/oozie): the same paths, verbs,
// content types, JSON keys, status codes and oozie-error-code /
// oozie-error-message headers. Jobs move PREP → RUNNING → SUCCEEDED,
// FAILED or KILLED on a script the test controls; every submitted
// configuration is recorded; the server can be told to go down, to answer
// 500, to answer garbage or to be slow.
//
// It is a test double: production code never imports it.
package ooziefake

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Job statuses.
const (
	Prep      = "PREP"
	Running   = "RUNNING"
	Suspended = "SUSPENDED"
	Succeeded = "SUCCEEDED"
	Killed    = "KILLED"
	Failed    = "FAILED"
)

// Mode is how the server answers.
type Mode int

// Modes for fault tests.
const (
	// Normal follows the protocol.
	Normal Mode = iota
	// Error500 answers every request 500 with Oozie's error headers
	// (E0603, an internal database error).
	Error500
	// SafeMode answers GETs and refuses every other request with 503 E0002
	// (systemMode SAFEMODE), as Oozie does.
	SafeMode
	// Garbage answers 200 with an HTML page instead of JSON (a proxy's
	// error page, say).
	Garbage
)

// Job is what the fake knows of one workflow job.
type Job struct {
	ID      string
	AppPath string
	AppName string
	User    string
	Status  string
	// Conf is the submitted configuration (after the authenticated user
	// replaced user.name, as Oozie does); ConfXML the body as received.
	Conf    map[string]string
	ConfXML string
	// Plan is the statuses still to come: each info request moves the job
	// to the next one (once it has been started).
	Plan    []string
	Created time.Time
	Started time.Time
	Ended   time.Time
	Killed  bool // a kill request reached it while it was not final
	// KillRequests counts kill requests, including those for finished jobs.
	KillRequests int
}

// Request is one request the fake received.
type Request struct {
	Method, Path, RawQuery, ContentType string
}

// Server is a running fake Oozie. Its methods are safe for concurrent use.
type Server struct {
	// URL is the Oozie base URL, http://127.0.0.1:port/oozie.
	URL  string
	addr string

	mu          sync.Mutex
	srv         *http.Server
	ln          net.Listener
	mode        Mode
	delay       time.Duration
	versions    []int
	requireUser bool
	plan        func(conf map[string]string) []string
	checkApp    func(appPath string) error
	appName     func(conf map[string]string) string
	started     time.Time
	seq         int
	jobs        map[string]*Job
	order       []string
	requests    []Request
}

// Option configures a Server.
type Option func(*Server)

// WithVersions sets what GET /versions lists (default [0, 1, 2]).
func WithVersions(v ...int) Option { return func(s *Server) { s.versions = v } }

// RequireUser makes requests without user.name fail with 401, as an Oozie
// that does not allow anonymous requests.
func RequireUser() Option { return func(s *Server) { s.requireUser = true } }

// Start starts a fake Oozie on a free loopback port.
func Start(opts ...Option) (*Server, error) {
	s := &Server{
		versions: []int{0, 1, 2},
		started:  time.Now().UTC(),
		jobs:     make(map[string]*Job),
	}
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ooziefake: %w", err)
	}
	s.addr = ln.Addr().String()
	s.URL = "http://" + s.addr + "/oozie"
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	s.srv, s.ln = srv, ln
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed
}

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Down stops listening (clients get "connection refused") and drops open
// connections, keeping every job; Up listens again on the same address.
func (s *Server) Down() { s.Close() }

// Up listens again after Down.
func (s *Server) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("ooziefake: listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// SetMode changes how the server answers.
func (s *Server) SetMode(m Mode) { s.mu.Lock(); s.mode = m; s.mu.Unlock() }

// SetDelay makes every answer wait d (0 for none), or until the client
// gives up.
func (s *Server) SetDelay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// SetPlan decides, for every job started from now on, the statuses that
// successive info requests see: the job takes the first when it starts
// and moves to the next after each info request; the last one stays. The
// default is []string{RUNNING}: the job runs until the test calls
// SetStatus (or a kill arrives).
func (s *Server) SetPlan(f func(conf map[string]string) []string) {
	s.mu.Lock()
	s.plan = f
	s.mu.Unlock()
}

// SetCheckApp makes submissions fail with 400 E0307 ("XML file [...]
// does not exist", as Oozie 5.2.1 answers) when f returns an
// error for the application path (e.g. a test that looks in HDFS for the
// deployed workflow.xml).
func (s *Server) SetCheckApp(f func(appPath string) error) {
	s.mu.Lock()
	s.checkApp = f
	s.mu.Unlock()
}

// SetAppName decides the application name of jobs submitted from now on
// (in Oozie, the name attribute of workflow.xml's workflow-app). The
// default is the conf's celosWorkflowName, as a Celos project's
// workflow.xml declares name="${celosWorkflowName}", else the last
// element of the application path.
func (s *Server) SetAppName(f func(conf map[string]string) string) {
	s.mu.Lock()
	s.appName = f
	s.mu.Unlock()
}

// SetStatus sets a job's status now, dropping what is left of its plan.
func (s *Server) SetStatus(id, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("ooziefake: no job %s", id)
	}
	j.Plan = nil
	s.setStatus(j, status)
	return nil
}

// Jobs returns a copy of every job, in submission order.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.order))
	for _, id := range s.order {
		j := *s.jobs[id]
		j.Conf = maps.Clone(j.Conf)
		j.Plan = slices.Clone(j.Plan)
		out = append(out, j)
	}
	return out
}

// Job returns a copy of one job.
func (s *Server) Job(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	c := *j
	c.Conf = maps.Clone(j.Conf)
	c.Plan = slices.Clone(j.Plan)
	return c, true
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func final(status string) bool {
	return status == Succeeded || status == Killed || status == Failed
}

func (s *Server) setStatus(j *Job, status string) {
	now := time.Now().UTC()
	if j.Started.IsZero() && status != Prep {
		j.Started = now
	}
	if final(status) && j.Ended.IsZero() {
		j.Ended = now
	}
	j.Status = status
}

// oozieError is an error the servlets send: status, code and message.
type oozieError struct {
	status  int
	code    string
	message string
}

// sendError is JsonRestServlet.sendErrorResponse: the two headers, then
// the container's HTML error page (not JSON). The message header starts
// with the code, as the real server's does (an XException's message is
// "E0604: Job does not exist [...]").
func sendError(w http.ResponseWriter, e oozieError) {
	msg := e.code + ": " + e.message
	w.Header().Set("oozie-error-code", e.code)
	w.Header().Set("oozie-error-message", msg)
	w.Header().Set("Content-Type", "text/html;charset=iso-8859-1")
	w.WriteHeader(e.status)
	fmt.Fprintf(w, "<html><head><title>Error %d </title></head><body><h2>HTTP ERROR: %d</h2><p>Reason:<pre>    %s</pre></p></body></html>\n",
		e.status, e.status, html.EscapeString(msg))
}

func sendJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", `application/json; charset="UTF-8"`)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type")})
	mode, delay := s.mode, s.delay
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch mode {
	case Error500:
		sendError(w, oozieError{500, "E0603", "SQL error in operation, org.apache.openjpa.persistence.PersistenceException: connection refused"})
		return
	case Garbage:
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>502 Bad Gateway (proxy)</body></html>") //nolint:errcheck
		return
	case SafeMode:
		if r.Method != http.MethodGet {
			sendError(w, oozieError{503, "E0002", "Oozie in safe mode"})
			return
		}
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/oozie")
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	if s.requireUser && q.Get("user.name") == "" && path != "/versions" {
		w.Header().Set("WWW-Authenticate", "PseudoAuth")
		sendError(w, oozieError{401, "E0002", "Authentication required: no user.name"})
		return
	}
	switch {
	case path == "/versions":
		s.versionsHandler(w, r)
	case path == "/v1/admin/status" || path == "/v2/admin/status":
		s.adminStatus(w, r, mode)
	case path == "/v1/jobs" || path == "/v2/jobs":
		switch r.Method {
		case http.MethodPost:
			s.submit(w, r)
		case http.MethodGet:
			s.list(w, r)
		default:
			methodNotAllowed(w, r)
		}
	case strings.HasPrefix(path, "/v1/job/") || strings.HasPrefix(path, "/v2/job/"):
		id := path[len("/v1/job/"):]
		switch r.Method {
		case http.MethodGet:
			s.info(w, r, id, path[:3] == "/v2")
		case http.MethodPut:
			s.action(w, r, id)
		default:
			methodNotAllowed(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	w.WriteHeader(http.StatusMethodNotAllowed)
	fmt.Fprintf(w, "<html><body>HTTP method %s is not supported by this URL</body></html>\n", r.Method)
}

func (s *Server) versionsHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r)
		return
	}
	s.mu.Lock()
	v := slices.Clone(s.versions)
	s.mu.Unlock()
	sendJSON(w, http.StatusOK, v)
}

func (s *Server) adminStatus(w http.ResponseWriter, r *http.Request, mode Mode) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r)
		return
	}
	m := "NORMAL"
	if mode == SafeMode {
		m = "SAFEMODE"
	}
	sendJSON(w, http.StatusOK, map[string]string{"systemMode": m})
}

// submit is BaseJobsServlet.doPost for workflow jobs.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "application/xml" {
		sendError(w, oozieError{400, "E0300", fmt.Sprintf("Invalid content-type [%s]", ct)})
		return
	}
	q := r.URL.Query()
	action := q.Get("action")
	if action != "" && action != "start" && action != "dryrun" {
		sendError(w, oozieError{400, "E0303", fmt.Sprintf("Invalid parameter value, [action] = [%s]", action)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		sendError(w, oozieError{400, "E0307", "Runtime error [" + err.Error() + "]"})
		return
	}
	conf, err := parseConf(body)
	if err != nil {
		sendError(w, oozieError{400, "E0307", "Runtime error [Could not parse configuration: " + err.Error() + "]"})
		return
	}
	// The authenticated user overrides user.name in the conf.
	if u := q.Get("user.name"); u != "" {
		conf["user.name"] = u
	}
	if conf["user.name"] == "" {
		sendError(w, oozieError{400, "E0401", "Missing configuration property [user.name]"})
		return
	}
	appPath := conf["oozie.wf.application.path"]
	if appPath == "" {
		if conf["oozie.coord.application.path"] != "" || conf["oozie.bundle.application.path"] != "" {
			sendError(w, oozieError{400, "E0307", "Runtime error [the fake only runs workflow jobs]"})
			return
		}
		// Oozie 5 takes a submission without an application path for one
		// of its fluent job API, and finds no workflow.xml for it.
		sendError(w, oozieError{400, "E0307", fmt.Sprintf("Runtime error [XML file [/user/%s/oozie-fluent-job-api-generated/gen_app_%d/workflow.xml] does not exist and app definition cannot be created because of missing config value [oozie.jobs.api.generated.xml]]", conf["user.name"], time.Now().UnixMilli())})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checkApp != nil {
		if err := s.checkApp(appPath); err != nil {
			xmlPath := appPath
			if !strings.HasSuffix(xmlPath, ".xml") {
				xmlPath = strings.TrimRight(xmlPath, "/") + "/workflow.xml"
			}
			sendError(w, oozieError{400, "E0307", fmt.Sprintf("Runtime error [XML file [%s] does not exist and app definition cannot be created because of missing config value [oozie.jobs.api.generated.xml]]", xmlPath)})
			return
		}
	}
	if action == "dryrun" {
		sendJSON(w, http.StatusOK, map[string]string{"id": "OK"})
		return
	}
	id := fmt.Sprintf("%07d-%s-oozie-oozi-W", s.seq, s.started.Format("060102150405000"))
	s.seq++
	name := appPath[strings.LastIndexByte(strings.TrimRight(appPath, "/"), '/')+1:]
	if strings.HasSuffix(name, ".xml") || name == "" {
		name = "wf"
	}
	if n := conf["celosWorkflowName"]; n != "" {
		name = n
	}
	if s.appName != nil {
		name = s.appName(maps.Clone(conf))
	}
	j := &Job{
		ID: id, AppPath: appPath, AppName: name, User: conf["user.name"], Status: Prep,
		Conf: conf, ConfXML: string(body), Created: time.Now().UTC(),
	}
	if action == "start" {
		s.start(j)
	}
	s.jobs[id] = j
	s.order = append(s.order, id)
	sendJSON(w, http.StatusCreated, map[string]string{"id": id})
}

// start moves a PREP job to the first status of its plan.
func (s *Server) start(j *Job) {
	plan := []string{Running}
	if s.plan != nil {
		if p := s.plan(maps.Clone(j.Conf)); len(p) > 0 {
			plan = p
		}
	}
	s.setStatus(j, plan[0])
	j.Plan = plan[1:]
}

// parseConf reads a Hadoop <configuration> body. It is deliberately the
// fake's own parser, not the client's (oozie.ParseConfiguration): a test
// double that decoded with the code under test would hide its bugs.
func parseConf(body []byte) (map[string]string, error) {
	var doc struct {
		XMLName    xml.Name `xml:"configuration"`
		Properties []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	conf := make(map[string]string, len(doc.Properties))
	for _, p := range doc.Properties {
		conf[p.Name] = p.Value
	}
	return conf, nil
}

func (s *Server) unknownJob(w http.ResponseWriter, id string) {
	sendError(w, oozieError{400, "E0604", fmt.Sprintf("Job does not exist [%s]", id)})
}

// info is V1JobServlet/V2JobServlet GET: show=info (default) or, on v2,
// show=status.
func (s *Server) info(w http.ResponseWriter, r *http.Request, id string, v2 bool) {
	show := r.URL.Query().Get("show")
	if show == "" {
		show = "info"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		s.unknownJob(w, id)
		return
	}
	switch show {
	case "info":
	case "status":
		if !v2 {
			sendError(w, oozieError{400, "E0302", "Invalid parameter [show=status]"})
			return
		}
	default:
		sendError(w, oozieError{400, "E0302", fmt.Sprintf("Invalid parameter [%s]", show)})
		return
	}
	var out map[string]any
	if show == "status" {
		out = map[string]any{"status": j.Status}
	} else {
		out = jobJSON(j, true)
	}
	// Each info request sees one step of the plan (a suspended job waits).
	if j.Status != Suspended && len(j.Plan) > 0 {
		s.setStatus(j, j.Plan[0])
		j.Plan = j.Plan[1:]
	}
	sendJSON(w, http.StatusOK, out)
}

// action is V1JobServlet PUT: start, kill, suspend, resume.
func (s *Server) action(w http.ResponseWriter, r *http.Request, id string) {
	action := r.URL.Query().Get("action")
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		// Oozie 5.2.1 answers a PUT on an unknown job with this E0605,
		// naming the query that found nothing.
		sendError(w, oozieError{400, "E0605", "Action does not exist [select w.id, w.user, w.group, w.appName, w.appPath, w.statusStr, w.parentId, w.startTimestamp, w.endTimestamp, w.logToken, w.wfInstance, w.slaXml, w.protoActionConf from WorkflowJobBean w where w.id = :id]"})
		return
	}
	switch action {
	case "start":
		if j.Status == Prep {
			s.start(j)
		}
	case "kill":
		j.KillRequests++
		// Killing a SUCCEEDED or KILLED job fails a precondition (E0725)
		// that Oozie only logs: the reply is 200 all the same.
		if j.Status != Succeeded && j.Status != Killed {
			j.Killed = true
			j.Plan = nil
			s.setStatus(j, Killed)
		}
	case "suspend":
		if j.Status == Running || j.Status == Prep {
			j.Status = Suspended
		}
	case "resume":
		if j.Status == Suspended {
			j.Status = Running
		}
	case "":
		sendError(w, oozieError{400, "E0305", "Missing parameter [action]"})
		return
	default:
		sendError(w, oozieError{400, "E0303", fmt.Sprintf("Invalid parameter value, [action] = [%s]", action)})
		return
	}
	w.WriteHeader(http.StatusOK)
}

// list is BaseJobsServlet GET: jobtype=wf, filter, offset (1-based), len.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if jt := q.Get("jobtype"); jt != "" && jt != "wf" {
		sendJSON(w, http.StatusOK, map[string]any{"total": 0, "offset": 1, "len": 50, "coordinatorjobs": []any{}})
		return
	}
	filters := map[string][]string{}
	if f := q.Get("filter"); f != "" {
		for _, term := range strings.Split(f, ";") {
			k, v, ok := strings.Cut(term, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if !ok || !slices.Contains([]string{"name", "user", "group", "status", "id"}, k) {
				sendError(w, oozieError{400, "E0420", fmt.Sprintf("Invalid jobs filter [%s], invalid parameter [%s]", f, k)})
				return
			}
			filters[k] = append(filters[k], v)
		}
	}
	offset, len_ := atoiDefault(q.Get("offset"), 1), atoiDefault(q.Get("len"), 50)
	if offset < 1 {
		offset = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []map[string]any
	for i := len(s.order) - 1; i >= 0; i-- { // newest first
		j := s.jobs[s.order[i]]
		if !matches(filters["name"], j.AppName) || !matches(filters["user"], j.User) ||
			!matches(filters["status"], j.Status) || !matches(filters["id"], j.ID) {
			continue
		}
		match = append(match, jobJSON(j, false))
	}
	total := len(match)
	lo := min(offset-1, total)
	hi := min(lo+len_, total)
	sendJSON(w, http.StatusOK, map[string]any{"total": total, "offset": offset, "len": len_, "workflows": match[lo:hi]})
}

func matches(want []string, v string) bool { return len(want) == 0 || slices.Contains(want, v) }

func atoiDefault(s string, d int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return d
}

func date(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")
}

// jobJSON is WorkflowJobBean.toJSONObject; listed jobs carry no conf and
// no actions.
func jobJSON(j *Job, full bool) map[string]any {
	m := map[string]any{
		"appPath":     j.AppPath,
		"appName":     j.AppName,
		"id":          j.ID,
		"externalId":  nil,
		"parentId":    nil,
		"conf":        nil,
		"status":      j.Status,
		"lastModTime": date(time.Now()),
		"createdTime": date(j.Created),
		"startTime":   date(j.Started),
		"endTime":     date(j.Ended),
		"user":        j.User,
		"group":       nil,
		"acl":         nil,
		"run":         0,
		"consoleUrl":  "http://localhost:11000/oozie?job=" + j.ID,
		"actions":     []any{},
		"toString":    fmt.Sprintf("Workflow id[%s] status[%s]", j.ID, j.Status),
	}
	if full {
		m["conf"] = confJSON(j)
		if j.Status == Failed {
			m["actions"] = []any{map[string]any{
				"id": j.ID + "@main", "name": "main", "type": "map-reduce", "status": "ERROR",
				"errorCode": "JA018", "errorMessage": "Output directory exists", "transition": "fail",
				"startTime": date(j.Started), "endTime": date(j.Ended), "retries": 0,
				"externalId": nil, "externalStatus": "FAILED/KILLED", "externalChildIDs": nil,
				"trackerUri": nil, "consoleUrl": nil, "conf": nil, "data": nil, "stats": nil, "cred": nil,
			}}
		}
	}
	return m
}

// confJSON is the configuration Oozie shows for a job: not the body as
// received but its own serialization of the job's configuration, with the
// authenticated user.name, mapreduce.job.user.name added, and ${name}
// references to other properties expanded (Hadoop's Configuration.get).
func confJSON(j *Job) string {
	conf := maps.Clone(j.Conf)
	conf["mapreduce.job.user.name"] = j.User
	var b strings.Builder
	b.WriteString("<configuration>\r\n")
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		v := varRef.ReplaceAllStringFunc(conf[k], func(ref string) string {
			if x, ok := conf[ref[2:len(ref)-1]]; ok {
				return x
			}
			return ref
		})
		b.WriteString("  <property>\r\n    <name>")
		xml.EscapeText(&b, []byte(k))
		b.WriteString("</name>\r\n    <value>")
		xml.EscapeText(&b, []byte(v))
		b.WriteString("</value>\r\n  </property>\r\n")
	}
	b.WriteString("</configuration>")
	return b.String()
}

var varRef = regexp.MustCompile(`\$\{[^}$ ]+\}`)
