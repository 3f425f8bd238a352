-- 0004_problems: the problems an instance met stepping the workflows it
-- owns (trigger and submission errors, held slots, missed SLAs), so that
-- every instance's API and UI show them, whichever instance met them
-- (docs/ha.md, docs/postgres.md). One row per workflow: the owner
-- replaces the whole set (a JSON array of scheduler.Problem, bounded by
-- the writer) when it changes, fenced like its other writes; an empty set
-- is '[]', not a deleted row, so that readers see the change.
--
-- changed_by is stamped by a trigger as celos_workflows.changed_by is
-- (0003): a Refresh reads only the rows written since its previous one.
CREATE TABLE celos_problems (
    workflow   text  PRIMARY KEY,
    problems   jsonb NOT NULL CHECK (jsonb_typeof(problems) = 'array'),
    changed_by xid8  NOT NULL DEFAULT '0'
);

CREATE FUNCTION celos_problems_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_by := pg_current_xact_id();
    RETURN NEW;
END
$$;

CREATE TRIGGER celos_problems_stamp BEFORE INSERT OR UPDATE ON celos_problems
    FOR EACH ROW EXECUTE FUNCTION celos_problems_stamp();

CREATE INDEX celos_problems_changed ON celos_problems (changed_by);
