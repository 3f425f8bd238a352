// Package notify delivers the slot engine's events (scheduler.Event) to
// the workflows' webhook targets. It has its own queue and goroutines: Send
// never blocks the step that calls it (a full queue drops the delivery,
// counted and logged). Each delivery is one HTTP POST of a JSON Body,
// signed with HMAC-SHA256 when the target names a secret file, retried
// with exponential backoff on network errors, 429 and 5xx answers; every
// outcome is reported to OnResult (the server's metrics) and failures are
// logged. An event whose deliveries the engine recorded in the state
// database's outbox (scheduler.Event.Deliveries) is not lost when the
// sender cannot keep it: what it could not finish (a full queue, a stop, a
// workflow now another instance's) is released to the Outbox, which
// offers it again later with the same delivery id (outbox.go).
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Body is the JSON body of a webhook delivery (documented in openapi.json's
// description, which a test checks against this type).
type Body struct {
	// Event is failure, slaMissed, waitTimeout or successAfterRetries.
	Event    string `json:"event"`
	Workflow string `json:"workflow"`
	// Slot is the slot time (2026-11-24T10:00:00.000Z); SlotID is
	// workflow@slot, as the API names slots.
	Slot   string `json:"slot"`
	SlotID string `json:"slotId"`
	// Status, ExternalID and RetryCount are the slot's state.
	Status     string `json:"status"`
	ExternalID string `json:"externalId,omitempty"`
	RetryCount int    `json:"retryCount"`
	// At is the time of the scheduler step that saw the event.
	At string `json:"at"`
	// Detail says more (the service's reason, the SLA's deadline).
	Detail string `json:"detail,omitempty"`
	// Delivery identifies the delivery; retries repeat it (deduplicate on it).
	Delivery string `json:"delivery"`
}

// Results reported to OnResult.
const (
	Delivered = "delivered" // the target answered 2xx
	Retried   = "retried"   // an attempt failed; another follows
	Failed    = "failed"    // given up: attempts exhausted, a 4xx answer, an unreadable secret
	Dropped   = "dropped"   // the queue was full or the sender closed (a delivery without an outbox entry), or the outbox's bounds removed it
	Kept      = "kept"      // the sender let go of a delivery the outbox keeps: sent later (a full queue, a stop)
)

// MaxSecretSize bounds a secret file.
const MaxSecretSize = 64 << 10

// Options configure a Sender.
type Options struct {
	// Client posts the deliveries; default: an http.Client with a
	// 10-second timeout (a slow target is an attempt that failed). Its
	// redirects are never followed (a copy is used, whose CheckRedirect
	// refuses them): a redirect is an answer that is not a delivery.
	Client *http.Client
	// Logger receives failures (and drops); default slog.Default().
	Logger *slog.Logger
	// QueueSize bounds the deliveries waiting; default 1000.
	QueueSize int
	// Workers post in parallel; default 2.
	Workers int
	// MaxAttempts per delivery; default 5.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff; defaults 1 s and 5 min.
	Backoff, MaxBackoff time.Duration
	// OnResult, if set, hears of every attempt's outcome (metrics).
	OnResult func(event, result string)
	// Outbox, if set, keeps the deliveries of events that carry ids
	// (scheduler.Event.Deliveries); SetOutbox sets it later.
	Outbox Outbox
	// DrainTimeout bounds how long Close goes on delivering what is
	// queued; default 5 s (DefaultDrainTimeout).
	DrainTimeout time.Duration
}

// Sender delivers events. Its zero value is not usable; see New.
type Sender struct {
	opts  Options
	queue chan *delivery
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup // workers
	mu    sync.Mutex     // guards closed and timers
	// closed: Send and retries drop (or release); timers are the pending
	// retries; closing is closed by Close (the workers drain the queue).
	closed  bool
	timers  map[*time.Timer]*delivery
	closing chan struct{}
	outbox  Outbox
	// down are the targets (by URL) whose last attempt timed out or could
	// not connect, and until when they are not tried (coolDown).
	down map[string]time.Time
}

// delivery is one event for one target.
type delivery struct {
	target   workflow.Notification
	workflow string
	event    string
	body     []byte
	id       string
	attempt  int  // attempts made so far
	durable  bool // the outbox holds it (its id came with the event)
}

// New starts a sender's workers; Close stops them.
func New(opts Options) *Sender {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	// Following a redirect would turn the POST into a GET without the
	// event (301, 302, 303), or send the signed body and its signature to
	// wherever the target points, an address inside the network included
	// (307, 308). A copy: the caller's client is left as it is.
	c := *opts.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &c
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1000
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Sender{opts: opts, queue: make(chan *delivery, opts.QueueSize), ctx: ctx, stop: stop, timers: make(map[*time.Timer]*delivery),
		closing: make(chan struct{}), outbox: opts.Outbox, down: make(map[string]time.Time)}
	for range opts.Workers {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

// Send queues ev for each of its targets and returns at once. A target
// whose delivery id the event carries (Deliveries) is delivered under
// that id and reported to the Outbox; the others get a new id.
func (s *Sender) Send(ev scheduler.Event) {
	for i, t := range ev.Targets {
		id, durable := newID(), false
		if i < len(ev.Deliveries) && ev.Deliveries[i] != "" {
			id, durable = ev.Deliveries[i], true
		}
		body, err := json.Marshal(BodyOf(ev, id))
		if err != nil { // cannot happen: strings and ints
			s.opts.Logger.Error("notification not sent: encode", "workflow", ev.Workflow, "error", err)
			continue
		}
		s.enqueue(&delivery{target: t, workflow: ev.Workflow, event: ev.Kind, body: body, id: id, durable: durable})
	}
}

// BodyOf is the body of event ev's delivery id.
func BodyOf(ev scheduler.Event, id string) Body {
	sid := slot.ID{Workflow: ev.Workflow, Time: ev.Slot}
	return Body{Event: ev.Kind, Workflow: ev.Workflow, Slot: slot.FormatTime(ev.Slot), SlotID: sid.String(),
		Status: string(ev.Status), ExternalID: ev.ExternalID, RetryCount: ev.RetryCount, At: slot.FormatTime(ev.At),
		Detail: ev.Detail, Delivery: id}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// enqueue queues d without blocking; a full queue or a closed sender
// drops it, or releases it to the outbox that keeps it.
func (s *Sender) enqueue(d *delivery) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		select {
		case s.queue <- d:
			s.mu.Unlock()
			return
		default:
		}
	}
	s.mu.Unlock()
	s.letGo(map[bool]string{true: "the sender is closed", false: "the queue is full"}[closed], d)
}

func (s *Sender) result(event, r string) {
	if s.opts.OnResult != nil {
		s.opts.OnResult(event, r)
	}
}

// work attempts the queued deliveries until the sender stops; once Close
// began, it attempts what is queued and returns when the queue is empty.
// Once stopped it takes no delivery more (a select with the queue ready
// too may pick either): Close lets what is queued go, together.
func (s *Sender) work() {
	defer s.wg.Done()
	for s.ctx.Err() == nil {
		select {
		case <-s.ctx.Done():
			return
		case d := <-s.queue:
			s.attempt(d)
		case <-s.closing:
			for s.ctx.Err() == nil {
				select {
				case <-s.ctx.Done():
					return
				case d := <-s.queue:
					s.attempt(d)
				default:
					return
				}
			}
		}
	}
}

// errCoolingDown is the outcome of an attempt not made: the target's last
// attempt (another delivery's) timed out or could not connect, and its
// retry time has not come.
type errCoolingDown struct{ until time.Time }

func (e errCoolingDown) Error() string {
	return "not attempted: an earlier delivery to the target timed out or could not connect; next try after " + e.until.UTC().Format(time.RFC3339)
}

// attempt posts d once and decides what follows. A target that hangs or
// cannot be reached costs a worker once per retry time, not once per
// delivery: while it cools down (coolDown), its deliveries count an
// attempt without being posted and wait for the end of it, so that the
// other targets' deliveries are not held back behind its timeouts.
func (s *Sender) attempt(d *delivery) {
	if d.durable && !s.mine(d.workflow) {
		s.release("the workflow is now another instance's, which sends it", d)
		return
	}
	d.attempt++
	var retry bool
	var err error
	var wait time.Duration
	if until, cooling := s.coolingUntil(d.target.URL); cooling {
		retry, err, wait = true, errCoolingDown{until}, time.Until(until)
	} else {
		retry, err = s.post(d)
	}
	if err == nil {
		s.coolDown(d.target.URL, 0)
		s.result(d.event, Delivered)
		s.finished(d)
		return
	}
	if s.ctx.Err() != nil { // stopped by Close: not an outcome
		s.letGo("the server stopped during the attempt", d)
		return
	}
	if !retry || d.attempt >= s.opts.MaxAttempts {
		s.opts.Logger.Warn("notification failed", "event", d.event, "url", redact(d.target.URL), "delivery", d.id,
			"attempts", d.attempt, "error", err)
		s.result(d.event, Failed)
		s.finished(d)
		return
	}
	backoff := s.opts.Backoff << (d.attempt - 1)
	if backoff > s.opts.MaxBackoff || backoff <= 0 {
		backoff = s.opts.MaxBackoff
	}
	var status errStatus
	if _, cooling := err.(errCoolingDown); !cooling && !errors.As(err, &status) {
		s.coolDown(d.target.URL, backoff) // timed out or could not connect
	}
	wait = max(wait, backoff)
	s.opts.Logger.Info("notification attempt failed; retrying", "event", d.event, "url", redact(d.target.URL), "delivery", d.id,
		"attempt", d.attempt, "retryIn", wait.String(), "error", err)
	s.result(d.event, Retried)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.letGo("the sender is closed", d)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
		s.mu.Lock()
		_, pending := s.timers[t]
		delete(s.timers, t)
		s.mu.Unlock()
		if pending { // (else Close took it)
			s.enqueue(d)
		}
	})
	s.timers[t] = d
	s.mu.Unlock()
}

// coolingUntil reports whether target url cools down, and until when.
func (s *Sender) coolingUntil(url string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.down[url]
	if ok && !time.Now().Before(until) {
		delete(s.down, url)
		return time.Time{}, false
	}
	return until, ok
}

// coolDown makes target url cool down for d (0: no more).
func (s *Sender) coolDown(url string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.down, url)
		return
	}
	if s.down != nil {
		s.down[url] = time.Now().Add(d)
	}
}

// errStatus is an answer that is not 2xx.
type errStatus struct{ code int }

func (e errStatus) Error() string {
	msg := "the target answered " + strconv.Itoa(e.code) + " " + http.StatusText(e.code)
	if e.code >= 300 && e.code < 400 {
		// (Where it points is not quoted: it may hold a token.)
		msg += " (a redirect, not followed: give the URL the target redirects to)"
	}
	return msg
}

// post makes one attempt; retry says whether another may succeed.
func (s *Sender) post(d *delivery) (retry bool, err error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, d.target.URL, bytes.NewReader(d.body))
	if err != nil {
		return false, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "celos-webhook")
	req.Header.Set("X-Celos-Event", d.event)
	req.Header.Set("X-Celos-Delivery", d.id)
	req.Header.Set("X-Celos-Attempt", strconv.Itoa(d.attempt))
	if d.target.SecretFile != "" {
		key, err := readSecret(d.target.SecretFile)
		if err != nil {
			return false, err
		}
		req.Header.Set("X-Celos-Signature", Sign(key, d.body))
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return true, fmt.Errorf("post: %w", unwrapURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		return true, errStatus{resp.StatusCode}
	}
	return false, errStatus{resp.StatusCode}
}

// Sign is the X-Celos-Signature header of body under key:
// "sha256=" and the hex HMAC-SHA256.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// readSecret reads a secret file (a regular file, bounded) without its
// trailing newlines. Its errors never quote the file.
func readSecret(path string) ([]byte, error) {
	b, err := regfile.ReadFile(path, MaxSecretSize)
	if err != nil {
		return nil, fmt.Errorf("read the secret file: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return nil, fmt.Errorf("the secret file %s is empty", path)
	}
	return b, nil
}

// unwrapURL drops the *url.Error wrapper, whose message repeats the URL
// (which may hold a token in its query).
func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// redact is a URL for the log: scheme, host and path, without a query or
// user information (tokens live there).
func redact(raw string) string {
	for i, c := range raw {
		if c == '?' || c == '#' {
			raw = raw[:i]
			break
		}
	}
	if at := bytes.LastIndexByte([]byte(raw), '@'); at >= 0 {
		if scheme := bytes.Index([]byte(raw), []byte("://")); scheme >= 0 && at > scheme {
			raw = raw[:scheme+3] + raw[at+1:]
		}
	}
	return raw
}
