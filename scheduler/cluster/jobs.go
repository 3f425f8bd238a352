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
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// LocalJobs is the command service of this host (scheduler/command).
type LocalJobs interface {
	external.Service
	external.Recoverer
}

// Jobs is the command service of an instance in a cluster. It implements
// external.Service and external.Recoverer.
type Jobs struct {
	c     *Cluster
	local LocalJobs
	grace time.Duration
	now   func() time.Time
	log   *slog.Logger
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
	return &Jobs{c: c, local: local, grace: opts.Grace, now: opts.Clock, log: c.log}
}

// Grace is the configured grace.
func (j *Jobs) Grace() time.Duration { return j.grace }

// Submit runs the slot on this host and records the job's row. If the row
// cannot be written the job is killed and the submission fails as
// unavailable (the slot stays READY; its intent is resolved next step).
func (j *Jobs) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	submitted := j.now()
	ext, err := j.local.Submit(ctx, w, id)
	if err != nil {
		return "", err
	}
	if err := j.insert(ctx, ext, id, submitted); err != nil {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if kerr := j.local.Kill(kctx, w, ext); kerr != nil {
			j.log.Error("command job started but not recorded, and not killed", "job", ext, "error", kerr)
		}
		return "", fmt.Errorf("%w: recording command job %s: %v", external.ErrUnavailable, ext, err)
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
	silence                       time.Duration
}

func (j *Jobs) row(ctx context.Context, ext string) (jobRow, bool, error) {
	var r jobRow
	var silenceMS float64
	err := j.c.pool.QueryRow(ctx, `
SELECT j.instance, j.state, j.detail, coalesce(i.host, ''),
    coalesce(i.heartbeat > clock_timestamp() - $2 * interval '1 millisecond', false),
    coalesce(extract(epoch FROM clock_timestamp() - i.heartbeat) * 1000, 0)
FROM cluster_jobs j LEFT JOIN cluster_instances i ON i.id = j.instance
WHERE j.external_id = $1`, ext, ms(j.grace)).Scan(&r.instance, &r.state, &r.detail, &r.host, &r.alive, &silenceMS)
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
// instance has been silent for longer than the grace is declared lost. A
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
	case "failure", "lost":
		return external.Status{Detail: r.detail}, nil
	}
	if r.alive {
		return external.Status{Running: true, Detail: "running on instance " + r.instance}, nil
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
	return external.Status{Detail: detail}, nil
}

// own reports on a job of this instance and publishes its end; a job
// declared lost while this instance was away is killed.
func (j *Jobs) own(ctx context.Context, w *workflow.Workflow, ext string, r jobRow) (external.Status, error) {
	if r.state == "lost" {
		j.reap(ctx, w, ext, r.detail)
		return external.Status{Detail: r.detail}, nil
	}
	st, err := j.local.Status(ctx, w, ext)
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
	if _, err := j.c.pool.Exec(ctx, `UPDATE cluster_jobs SET state = $2, detail = $3, updated = clock_timestamp()
WHERE external_id = $1 AND state = 'running'`, ext, state, st.Detail); err != nil {
		j.log.Warn("command job end not published (next time)", "job", ext, "error", err)
	}
}

// reap kills the process of a job of this instance that was declared lost.
func (j *Jobs) reap(ctx context.Context, w *workflow.Workflow, ext, detail string) {
	if err := j.local.Kill(ctx, w, ext); err != nil {
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

// Recover finds a job of slot id submitted at or after since: a row (by
// any instance), else a job of this host without a row (this instance
// died between starting it and recording it), which is recorded then.
func (j *Jobs) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	var ext string
	err := j.c.pool.QueryRow(ctx, `SELECT external_id FROM cluster_jobs
WHERE workflow = $1 AND slot = $2 AND submitted >= $3 ORDER BY submitted DESC LIMIT 1`,
		id.Workflow, id.Time, since).Scan(&ext)
	if err == nil {
		return ext, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", false, fmt.Errorf("%w: %v", external.ErrUnavailable, schemaErr("looking up the command jobs of "+id.String(), err))
	}
	ext, found, err := j.local.Recover(ctx, w, id, since)
	if err != nil || !found {
		return ext, found, err
	}
	if err := j.insert(ctx, ext, id, since); err != nil {
		return "", false, fmt.Errorf("%w: %v", external.ErrUnavailable, err)
	}
	return ext, true, nil
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
		switch {
		case jb.state == "lost":
			j.reap(ctx, nil, jb.ext, jb.detail)
		case jb.kill:
			if err := j.local.Kill(ctx, nil, jb.ext); err != nil {
				j.log.Warn("killing a command job another instance asked to kill", "job", jb.ext, "error", err)
				continue
			}
			j.publish(ctx, jb.ext, external.Status{Detail: "killed (asked by another instance)"})
		default:
			st, err := j.local.Status(ctx, nil, jb.ext)
			if err == nil && !st.Running {
				j.publish(ctx, jb.ext, st)
			}
		}
	}
	return nil
}

// Run publishes every Lease/3 until ctx ends.
func (j *Jobs) Run(ctx context.Context) {
	t := time.NewTicker(j.c.lease / 3)
	defer t.Stop()
	for {
		if err := j.Publish(ctx); err != nil && ctx.Err() == nil {
			j.log.Warn("command jobs not published; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
