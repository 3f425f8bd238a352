-- 0006_runs: the recent submissions of the workflows with run constraints
-- (minInterval, maxRuns; store.Run), so that the instance that takes a
-- workflow over, or a restarted one, counts them at the times they were
-- made rather than at their slot times (docs/authoring.md). The owner
-- replaces a workflow's rows, fenced like its other writes, after a step
-- submitted for it; only its look-back period is kept.
CREATE TABLE celos_runs (
    workflow     text        NOT NULL,
    slot_time    timestamptz NOT NULL,
    attempt      integer     NOT NULL CHECK (attempt >= 0),
    submitted_at timestamptz NOT NULL,
    PRIMARY KEY (workflow, slot_time, attempt)
);
