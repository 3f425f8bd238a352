-- 0005_unstarted_jobs: a command job's row is written before the job
-- starts (scheduler/cluster, docs/ha.md), so a row may name a job that
-- never started (its instance stopped in between, or the start was
-- abandoned). Its instance publishes it as 'unstarted': nothing of it
-- ran, so the slot is submitted again rather than failed, and the other
-- instances' Recover skips the row.
ALTER TABLE cluster_jobs DROP CONSTRAINT cluster_jobs_state_check;
ALTER TABLE cluster_jobs ADD CONSTRAINT cluster_jobs_state_check
    CHECK (state IN ('running', 'success', 'failure', 'lost', 'unstarted'));
