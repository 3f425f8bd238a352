package cluster

// Command jobs across instances, RJM-style (docs/ha.md): a command job runs
// as a process on the host of the instance that submitted it; a row in
// cluster_jobs names that instance and carries the job's state as that
// instance last published it, so that whichever instance steps the
// workflow later can report on the job. A job whose instance stopped
// heart-beating for longer than the grace is declared lost (a failure: the
// slot follows its retry rules); if that instance comes back, it kills the
// job's process.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// LocalJobs is the command service of this host (scheduler/command).
type LocalJobs interface {
	external.Service
	external.Recoverer
	// SubmitAt starts the slot's job under the ID command.JobID(id,
	// started), the one Jobs recorded before asking for it.
	SubmitAt(ctx context.Context, w *workflow.Workflow, id slot.ID, started time.Time) (string, error)
}

// Jobs is the command service of an instance in a cluster. It implements
// external.Service and external.Recoverer.
type Jobs struct {
	c     *Cluster
	local LocalJobs
	grace time.Duration
	now   func() time.Time
	log   *slog.Logger

	mu sync.Mutex
	// starting: jobs whose row is recorded and whose local start is under
	// way (Publish leaves them alone).
	starting map[string]bool
}

// DefaultGrace is JobsOptions.Grace when 0: at least a minute, and four
// leases.
func DefaultGrace(lease time.Duration) time.Duration { return max(time.Minute, 4*lease) }

// JobsOptions configure NewJobs.
type JobsOptions struct {
	// Grace is how long an instance may miss heartbeats before its
	// running jobs are declared lost (DefaultGrace if 0).
	Grace time.Duration
	// Clock is the instance's wall clock, the one its submit intents use
	// (nil: time.Now).
	Clock func() time.Time
}

// NewJobs returns the cluster's command service over this host's.
func NewJobs(c *Cluster, local LocalJobs, opts JobsOptions) *Jobs {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace(c.lease)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Jobs{c: c, local: local, grace: opts.Grace, now: opts.Clock, log: c.log, starting: make(map[string]bool)}
}

// Grace is the configured grace.
func (j *Jobs) Grace() time.Duration { return j.grace }

// Submit records the job's row, then runs the slot on this host. The row
// comes first so that an instance that dies as the job starts leaves a
// record naming it: the instance that takes the workflow over finds the
// job (Recover) and waits for this host's heartbeat, or for the grace,
// instead of starting the slot a second time. If the row cannot be
// written nothing starts (the slot stays READY, its intent resolved next
// step); if the job does not start, the next step's Recover withdraws its
// row (a row of this instance's without a job this host started is a job
// that never started). While the start is under way, Publish and Status
// leave the job alone (startingHere).
func (j *Jobs) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	submitted := j.now()
	ext := command.JobID(id, submitted)
	// Marked before the row exists: Publish must not take the row of a
	// job about to start for one that never will.
	j.mu.Lock()
	j.starting[ext] = true
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		delete(j.starting, ext)
		j.mu.Unlock()
	}()
	if err := j.insert(ctx, ext, id, submitted); err != nil {
		return "", fmt.Errorf("%w: recording command job %s before starting it: %v", external.ErrUnavailable, ext, err)
	}
	got, err := j.local.SubmitAt(ctx, w, id, submitted)
	if err != nil {
		// The job was abandoned (it never runs) unless its supervisor
		// claimed it; Recover tells, and withdraws the row if not.
		return "", err
	}
	if got != ext {
		return "", fmt.Errorf("command job of %s started as %s, recorded as %s", id, got, ext)
	}
	return ext, nil
}

func (j *Jobs) insert(ctx context.Context, ext string, id slot.ID, submitted time.Time) error {
	_, err := j.c.pool.Exec(ctx, `INSERT INTO cluster_jobs (external_id, workflow, slot, instance, state, submitted, updated)
VALUES ($1, $2, $3, $4, 'running', $5, clock_timestamp()) ON CONFLICT (external_id) DO NOTHING`,
		ext, id.Workflow, id.Time, j.c.id, submitted)
	if err != nil {
		return schemaErr("recording command job "+ext, err)
	}
	return nil
}

// jobRow is a job's row, with whether its instance is alive (heartbeat
// within the grace) and how long ago it last beat.
type jobRow struct {
	instance, state, detail, host string
	alive                         bool
	kill                          bool // killed through celos (asked, or by its instance: publish)
	silence                       time.Duration
}

func (j *Jobs) row(ctx context.Context, ext string) (jobRow, bool, error) {
	var r jobRow
	var silenceMS float64
	err := j.c.pool.QueryRow(ctx, `
SELECT j.instance, j.state, j.detail, j.kill, coalesce(i.host, ''),
    coalesce(i.heartbeat > clock_timestamp() - $2 * interval '1 millisecond', false),
    coalesce(extract(epoch FROM clock_timestamp() - i.heartbeat) * 1000, 0)
FROM cluster_jobs j LEFT JOIN cluster_instances i ON i.id = j.instance
WHERE j.external_id = $1`, ext, ms(j.grace)).Scan(&r.instance, &r.state, &r.detail, &r.kill, &r.host, &r.alive, &silenceMS)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("reading command job "+ext, err))
	}
	r.silence = time.Duration(silenceMS) * time.Millisecond
	return r, true, nil
}

// Status reports on a job: from this host for its own jobs (publishing
// their end), from the row for another instance's; a running job whose
// instance has been silent for longer than the grace, while this instance
// has been connected to the database for the grace (an outage of the
// database silences every instance), is declared lost. A
// job without a row (run before the cluster) is asked of this host.
func (j *Jobs) Status(ctx context.Context, w *workflow.Workflow, ext string) (external.Status, error) {
	r, found, err := j.row(ctx, ext)
	if err != nil {
		return external.Status{}, err
	}
	if !found {
		return j.local.Status(ctx, w, ext)
	}
	if r.instance == j.c.id {
		return j.own(ctx, w, ext, r)
	}
	switch r.state {
	case "success":
		return external.Status{Success: true, Detail: r.detail}, nil
	case "unstarted":
		return external.Status{NeverStarted: true, Detail: r.detail}, nil
	case "failure", "lost":
		// Killed through celos: the slot is KILLED, not a failure to
		// retry, even when the instance that killed it stopped before
		// writing so (external.Status.Killed).
		return external.Status{Detail: r.detail, Killed: r.kill}, nil
	}
	if r.alive {
		return external.Status{Running: true, Detail: "running on instance " + r.instance}, nil
	}
	if up := j.c.connectedFor(); up < j.grace {
		// This instance has not been connected for the grace itself
		// (it started, or the database was down for everyone): the
		// other's silence may be the database's.
		return external.Status{Running: true, Detail: fmt.Sprintf("running on instance %s, not heard from for %s; declared lost if still silent once this instance has been connected to the database for the grace (%s)",
			r.instance, r.silence.Round(time.Second), j.grace)}, nil
	}
	detail := fmt.Sprintf("lost: instance %s (host %s) has not heart-beaten for %s, longer than the grace of %s",
		r.instance, r.host, r.silence.Round(time.Second), j.grace)
	tag, err := j.c.pool.Exec(ctx, `UPDATE cluster_jobs SET state = 'lost', detail = $2, updated = clock_timestamp()
WHERE external_id = $1 AND state = 'running'`, ext, detail)
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("declaring command job "+ext+" lost", err))
	}
	if tag.RowsAffected() == 0 { // its instance published meanwhile: read again
		return j.Status(ctx, w, ext)
	}
	j.log.Warn("command job declared lost", "job", ext, "on", r.instance, "silence", r.silence.String())
	return external.Status{Detail: detail, Killed: r.kill}, nil
}

// own reports on a job of this instance and publishes its end; a job
// declared lost while this instance was away is killed.
func (j *Jobs) own(ctx context.Context, w *workflow.Workflow, ext string, r jobRow) (external.Status, error) {
	if r.state == "lost" {
		j.reap(ctx, w, ext, r.detail)
		return external.Status{Detail: r.detail}, nil
	}
	if j.startingHere(ext) {
		// Half made: what this host holds of it says nothing yet.
		return external.Status{Running: true, Detail: "starting"}, nil
	}
	st, err := j.local.Status(ctx, w, ext)
	if errors.Is(err, command.ErrNoJob) {
		st, err = neverStarted, nil
	}
	if err != nil || st.Running || r.state != "running" {
		return st, err
	}
	j.publish(ctx, ext, st)
	return st, nil
}

func (j *Jobs) publish(ctx context.Context, ext string, st external.Status) {
	state := "failure"
	if st.Success {
		state = "success"
	}
	if st.NeverStarted && !st.Success {
		state = "unstarted" // nothing ran: the slot is submitted again (0005)
	}
	// A job its own service killed (an operator's kill through this
	// instance) is marked as a kill asked for: the others read it so.
	if _, err := j.c.pool.Exec(ctx, `UPDATE cluster_jobs SET state = $2, detail = $3, kill = kill OR $4, updated = clock_timestamp()
WHERE external_id = $1 AND state = 'running'`, ext, state, st.Detail, st.Killed); err != nil {
		j.log.Warn("command job end not published (next time)", "job", ext, "error", err)
	}
}

// reap kills the process of a job of this instance that was declared lost.
func (j *Jobs) reap(ctx context.Context, w *workflow.Workflow, ext, detail string) {
	if err := j.local.Kill(ctx, w, ext); err != nil && !errors.Is(err, command.ErrNoJob) {
		j.log.Warn("killing a command job declared lost", "job", ext, "error", err)
		return
	}
	if _, err := j.c.pool.Exec(ctx, `UPDATE cluster_jobs SET reaped = true, updated = clock_timestamp()
WHERE external_id = $1`, ext); err != nil {
		j.log.Warn("command job reaped but not recorded", "job", ext, "error", err)
		return
	}
	j.log.Warn("killed a command job declared lost while this instance was away", "job", ext, "reason", detail)
}

// Kill kills a job: on this host for its own jobs (or one without a row),
// else it asks the job's instance to (the kill flag, acted on by Publish).
func (j *Jobs) Kill(ctx context.Context, w *workflow.Workflow, ext string) error {
	r, found, err := j.row(ctx, ext)
	if err != nil {
		return err
	}
	if !found || r.instance == j.c.id {
		return j.local.Kill(ctx, w, ext)
	}
	if _, err := j.c.pool.Exec(ctx, `UPDATE cluster_jobs SET kill = true, updated = clock_timestamp()
WHERE external_id = $1`, ext); err != nil {
		return fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("asking for the kill of command job "+ext, err))
	}
	return nil
}

// Recover finds a job of slot id submitted at or after since, newest
// first: a row of another instance (the job may run on its host), a row of
// this instance whose job this host started, else a job of this host
// without a row (submitted before the cluster), which is recorded then. A
// row of this instance whose job this host never started (it stopped
// between the row and the start, or the start was abandoned) is withdrawn:
// nothing of it can run, so the slot is submitted again.
func (j *Jobs) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	type row struct{ ext, instance, state, detail string }
	rows, err := j.c.pool.Query(ctx, `SELECT external_id, instance, state, detail FROM cluster_jobs
WHERE workflow = $1 AND slot = $2 AND submitted >= $3 ORDER BY submitted DESC`, id.Workflow, id.Time, since)
	var found []row
	if err == nil {
		var r row
		_, err = pgx.ForEachRow(rows, []any{&r.ext, &r.instance, &r.state, &r.detail}, func() error {
			found = append(found, r)
			return nil
		})
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("looking up the command jobs of "+id.String(), err))
	}
	// What this host started for the slot (asked once, when needed).
	var local struct {
		asked, found bool
		ext          string
	}
	askLocal := func() error {
		if local.asked {
			return nil
		}
		local.asked = true
		var lerr error
		local.ext, local.found, lerr = j.local.Recover(ctx, w, id, since)
		return lerr
	}
	for _, r := range found {
		if r.state == "unstarted" {
			continue // its instance found it never started: nothing ran
		}
		if r.instance != j.c.id {
			return r.ext, true, nil
		}
		if err := askLocal(); err != nil {
			return "", false, err
		}
		if local.found && local.ext == r.ext {
			return r.ext, true, nil
		}
		if err := j.withdraw(ctx, r.ext); err != nil {
			return "", false, err
		}
	}
	if err := askLocal(); err != nil || !local.found {
		return "", false, err
	}
	if err := j.insert(ctx, local.ext, id, since); err != nil {
		return "", false, fmt.Errorf("%w: %v", external.ErrUnavailable, err)
	}
	return local.ext, true, nil
}

// withdraw deletes the row of a job of this instance that never started
// on this host.
func (j *Jobs) withdraw(ctx context.Context, ext string) error {
	if _, err := j.c.pool.Exec(ctx, `DELETE FROM cluster_jobs WHERE external_id = $1 AND instance = $2 AND state = 'running'`, ext, j.c.id); err != nil {
		return fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("withdrawing command job "+ext+", which never started", err))
	}
	j.log.Warn("command job recorded but never started on this host; withdrawn, the slot is submitted once more", "job", ext)
	return nil
}

// neverStarted is the status of a job of this instance's that has a row
// but no job on this host, and is not starting. Published, its row's
// state is 'unstarted' (publish): the other instances' Recover skips such
// a row, so the slot is submitted again, and an instance that had taken
// the job on reads it as never started too. (A job killed before it
// started is a failure.)
var neverStarted = external.Status{NeverStarted: true, Detail: "never started: its instance stopped between recording the job and starting it"}

// startingHere says whether this instance is starting job ext right now.
func (j *Jobs) startingHere(ext string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.starting[ext]
}

// Publish brings this instance's rows up to date: the end of its running
// jobs, the kills other instances asked for, and the processes of jobs
// declared lost while it was away (killed). The server calls it every
// Lease/3 (Run).
func (j *Jobs) Publish(ctx context.Context) error {
	rows, err := j.c.pool.Query(ctx, `SELECT external_id, state, detail, kill FROM cluster_jobs
WHERE instance = $1 AND (state = 'running' OR (state = 'lost' AND NOT reaped))`, j.c.id)
	if err != nil {
		return schemaErr("listing this instance's command jobs", err)
	}
	type job struct {
		ext, state, detail string
		kill               bool
	}
	var jobs []job
	var r job
	if _, err := pgx.ForEachRow(rows, []any{&r.ext, &r.state, &r.detail, &r.kill}, func() error {
		jobs = append(jobs, r)
		return nil
	}); err != nil {
		return schemaErr("listing this instance's command jobs", err)
	}
	for _, jb := range jobs {
		if jb.state == "running" && j.startingHere(jb.ext) {
			// Being started by this process: its directory may be half
			// made (no job.json yet), which the command service reports
			// as never started. The next Publish sees it whole.
			continue
		}
		switch {
		case jb.state == "lost":
			j.reap(ctx, nil, jb.ext, jb.detail)
		case jb.kill:
			if err := j.local.Kill(ctx, nil, jb.ext); errors.Is(err, command.ErrNoJob) {
				j.publish(ctx, jb.ext, external.Status{Detail: "killed (asked by another instance) before it started", Killed: true})
				continue
			} else if err != nil {
				j.log.Warn("killing a command job another instance asked to kill", "job", jb.ext, "error", err)
				continue
			}
			j.publish(ctx, jb.ext, external.Status{Detail: "killed (asked by another instance)", Killed: true})
		default:
			st, err := j.local.Status(ctx, nil, jb.ext)
			if errors.Is(err, command.ErrNoJob) {
				st, err = neverStarted, nil
			}
			if err == nil && !st.Running {
				j.publish(ctx, jb.ext, st)
			}
		}
	}
	return nil
}

// Run publishes every Lease/3 until ctx ends, each round bounded (see
// Cluster.round): a hung connection fails a round, not every later one.
func (j *Jobs) Run(ctx context.Context) {
	t := time.NewTicker(j.c.lease / 3)
	defer t.Stop()
	for {
		pctx, cancel := j.c.round(ctx)
		err := j.Publish(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			j.log.Warn("command jobs not published; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
