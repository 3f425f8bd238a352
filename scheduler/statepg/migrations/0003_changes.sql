-- 0003_changes: which workflows changed since an instance last looked
-- (Refresh, docs/postgres.md). Every row of celos_workflows carries the id
-- of the transaction that last wrote it, stamped by a trigger, so that
-- every writer stamps it: this celos, an older one still running during a
-- rolling upgrade, an operator's SQL. A Refresh reads only the rows whose
-- transaction its previous snapshot could not see (changed_by at or above
-- that snapshot's xmin), not every workflow's.
--
-- Transaction ids, not a sequence: a sequence value is taken when a
-- transaction writes, not when it commits, so a reader that has seen
-- value 101 commit could pass over value 100, committed later. Every
-- transaction a snapshot does not see has an id at or above its xmin.
--
-- Rows written before this migration keep 0: they were committed before
-- it (ALTER TABLE waits for every writer of the table), so before any
-- snapshot of an instance that knows the column.
ALTER TABLE celos_workflows ADD COLUMN changed_by xid8 NOT NULL DEFAULT '0';

CREATE FUNCTION celos_workflows_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_by := pg_current_xact_id();
    RETURN NEW;
END
$$;

CREATE TRIGGER celos_workflows_stamp BEFORE INSERT OR UPDATE ON celos_workflows
    FOR EACH ROW EXECUTE FUNCTION celos_workflows_stamp();

CREATE INDEX celos_workflows_changed ON celos_workflows (changed_by);
