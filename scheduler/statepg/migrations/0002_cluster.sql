-- 0002_cluster: several celos server instances on one database (owned by
-- scheduler/cluster; see docs/ha.md). Every time below is the database's
-- clock (clock_timestamp()), never an instance's.

-- One row per instance id: who runs it, its current incarnation (a random
-- number per process start, so that a process that was replaced under the
-- same id cannot renew anything) and its heartbeat. An instance is live
-- while its heartbeat is younger than its lease and it has not stopped.
CREATE TABLE cluster_instances (
    id          text        PRIMARY KEY,
    incarnation bigint      NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    lease_ms    bigint      NOT NULL CHECK (lease_ms > 0),
    started     timestamptz NOT NULL,
    heartbeat   timestamptz NOT NULL,
    stopped     boolean     NOT NULL DEFAULT false
);

-- Fencing tokens: every acquisition of a lease takes the next number, so a
-- token is never reused and a later holder always has a larger one.
CREATE SEQUENCE cluster_lease_token AS bigint;

-- One row per leased workflow. Only the holder's incarnation may write the
-- workflow's state, and only while token matches and expires is ahead.
CREATE TABLE cluster_leases (
    workflow    text        PRIMARY KEY,
    holder      text        NOT NULL,
    incarnation bigint      NOT NULL,
    token       bigint      NOT NULL,
    expires     timestamptz NOT NULL,
    acquired    timestamptz NOT NULL,
    renewed     timestamptz NOT NULL
);
CREATE INDEX cluster_leases_holder ON cluster_leases (holder, incarnation);

-- Command-service jobs (RJM-style): the instance whose host runs the
-- process, its state as that instance last published it. A job whose
-- instance stopped heart-beating for longer than the grace is declared
-- lost by whoever looks at it; its process is killed if the host returns
-- (reaped). kill asks the host to kill it (an operator's kill served by
-- another instance). submitted is the submitting instance's clock (the
-- clock of its submit intents); updated is the database's.
CREATE TABLE cluster_jobs (
    external_id text        PRIMARY KEY,
    workflow    text        NOT NULL,
    slot        timestamptz NOT NULL,
    instance    text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('running', 'success', 'failure', 'lost')),
    detail      text        NOT NULL DEFAULT '',
    kill        boolean     NOT NULL DEFAULT false,
    reaped      boolean     NOT NULL DEFAULT false,
    submitted   timestamptz NOT NULL,
    updated     timestamptz NOT NULL
);
CREATE INDEX cluster_jobs_slot ON cluster_jobs (workflow, slot);
CREATE INDEX cluster_jobs_instance ON cluster_jobs (instance) WHERE state = 'running' OR (state = 'lost' AND NOT reaped);
