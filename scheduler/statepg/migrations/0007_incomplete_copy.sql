-- 0007_incomplete_copy: celos db migrate records here, before its first
-- write, the directory it copies, and deletes the row once the copy is
-- verified. A row left by a migrate that was interrupted makes a server's
-- Open fail (the database holds part of a state: the missing workflows'
-- slots would run again) until a migrate completes it.
CREATE TABLE celos_incomplete_copy (
    one     boolean     PRIMARY KEY DEFAULT true CHECK (one),
    source  text        NOT NULL,
    started timestamptz NOT NULL DEFAULT clock_timestamp()
);
