-- 0001: the slot engine's state (docs/postgres.md). One row per record of
-- the Celos file layout: a slot state, a rerun marker, a submit intent, a
-- paused flag, a workflow owner, a register.

-- Every workflow that has state, with a version bumped by every write
-- transaction that touches it: an instance's in-memory cache of a
-- workflow is current while its version is the row's.
CREATE TABLE celos_workflows (
    workflow text PRIMARY KEY,
    version  bigint NOT NULL DEFAULT 1
);

CREATE TABLE celos_slots (
    workflow    text        NOT NULL,
    slot_time   timestamptz NOT NULL,
    status      text        NOT NULL CHECK (status IN ('WAITING', 'READY', 'RUNNING', 'SUCCESS', 'FAILURE', 'WAIT_TIMEOUT', 'KILLED')),
    external_id text        NOT NULL DEFAULT '',
    retry_count integer     NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    PRIMARY KEY (workflow, slot_time)
);
-- The slots a step may still change.
CREATE INDEX celos_slots_active ON celos_slots (workflow, slot_time)
    WHERE status IN ('WAITING', 'READY', 'RUNNING');

CREATE TABLE celos_rerun_marks (
    workflow  text        NOT NULL,
    slot_time timestamptz NOT NULL,
    marked_at timestamptz NOT NULL,
    PRIMARY KEY (workflow, slot_time)
);

CREATE TABLE celos_intents (
    workflow    text        NOT NULL,
    slot_time   timestamptz NOT NULL,
    attempt     integer     NOT NULL,
    intended_at timestamptz NOT NULL,
    PRIMARY KEY (workflow, slot_time)
);

CREATE TABLE celos_paused (
    workflow text PRIMARY KEY
);

CREATE TABLE celos_owners (
    workflow text PRIMARY KEY,
    project  text NOT NULL,
    file     text NOT NULL
);

-- json (not jsonb): the value is kept byte for byte as it was put.
CREATE TABLE celos_registers (
    bucket text NOT NULL,
    key    text NOT NULL,
    value  json NOT NULL,
    PRIMARY KEY (bucket, key)
);
