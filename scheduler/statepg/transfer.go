package statepg

// Copying a whole state between the file store and this one (celos db
// migrate and celos db export).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
)

// Records are everything a store holds of one workflow.
type Records struct {
	States  []slot.State
	Marks   []store.RerunMark
	Intents map[time.Time]store.Intent
	Paused  bool
	Owner   *store.Owner
	Runs    []store.Run // the record of submissions (run constraints)
}

// Counts says how many records of each kind a copy holds.
type Counts struct {
	Workflows, States, Marks, Intents, Paused, Owners, Registers int
	Runs                                                         int // submissions recorded (store.Run)
}

func (c Counts) String() string {
	return fmt.Sprintf("%d workflows: %d slot states, %d rerun marks, %d submit intents, %d paused, %d owners, %d submissions recorded; %d registers",
		c.Workflows, c.States, c.Marks, c.Intents, c.Paused, c.Owners, c.Runs, c.Registers)
}

// Summary is what Migrate and Export report: the counts and the checksum
// of the copy, equal in the source and the destination, and how many
// workflows were already there.
type Summary struct {
	Counts   Counts
	Checksum string // sha256 of the canonical listing (see digest)
	Copied   int    // workflows written
	Skipped  int    // workflows already equal in the destination
}

// side is one store seen whole.
type side struct {
	workflows func() ([]string, error)
	owners    func() (map[string]store.Owner, error)
	records   func(wf string, owners map[string]store.Owner) (Records, error)
	buckets   func() ([]string, error)
	regs      interface {
		RegisterKeys(bucket, prefix string) ([]string, error)
		GetRegister(bucket, key string) (json.RawMessage, error)
	}
}

var (
	beginning = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	end       = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// fileSide reads the file store.
func fileSide(db *statedb.DB) side {
	return side{
		workflows: db.AllWorkflows,
		owners:    db.Owners,
		records: func(wf string, owners map[string]store.Owner) (r Records, err error) {
			if r.States, err = db.Range(wf, beginning, end); err != nil {
				return r, err
			}
			if r.Marks, err = db.RerunMarks(wf); err != nil {
				return r, err
			}
			if r.Intents, err = db.Intents(wf); err != nil {
				return r, err
			}
			if r.Runs, err = db.Runs(wf); err != nil {
				return r, err
			}
			r.Paused = db.Paused(wf)
			if o, ok := owners[wf]; ok {
				r.Owner = &o
			}
			return r, nil
		},
		buckets: db.RegisterBuckets,
		regs:    db,
	}
}

// pgSide reads this store.
func pgSide(db *DB) side {
	return side{
		workflows: db.AllWorkflows,
		owners:    db.Owners,
		records: func(wf string, owners map[string]store.Owner) (r Records, err error) {
			if r.States, err = db.Range(wf, beginning, end); err != nil {
				return r, err
			}
			if r.Marks, err = db.RerunMarks(wf); err != nil {
				return r, err
			}
			if r.Runs, err = db.Runs(wf); err != nil {
				return r, err
			}
			err = db.read(wf, func(ix *wfIndex) {
				r.Intents = make(map[time.Time]store.Intent, len(ix.intents))
				for k, in := range ix.intents {
					r.Intents[keyTime(k)] = in
				}
			})
			r.Paused = db.Paused(wf)
			if o, ok := owners[wf]; ok {
				r.Owner = &o
			}
			return r, err
		},
		buckets: db.RegisterBuckets,
		regs:    db,
	}
}

// AllWorkflows lists, sorted, every workflow with a record of any kind.
func (db *DB) AllWorkflows() ([]string, error) {
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT w FROM (SELECT workflow FROM celos_workflows UNION SELECT workflow FROM celos_paused
UNION SELECT workflow FROM celos_owners UNION SELECT workflow FROM celos_runs) AS u(w) ORDER BY w COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list workflows: %w", pgError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RegisterBuckets lists the register buckets, sorted by byte.
func (db *DB) RegisterBuckets() ([]string, error) {
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT bucket COLLATE "C" FROM celos_registers ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list register buckets: %w", pgError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// writeRecords writes one workflow's records.
type writeRecords func(wf string, r Records) error

// copyAll makes dst hold what src holds: every workflow whose records
// differ is written (one transaction per workflow in PostgreSQL), the
// registers are copied, and then both sides are listed again and their
// counts and checksums compared. A destination holding a workflow,
// register bucket or any record the source lacks or holds otherwise is
// refused before anything is written (plan).
func copyAll(src, dst side, write writeRecords, putReg func(b, k string, v json.RawMessage) error, progress io.Writer) (Summary, error) {
	var sum Summary
	wfs, dwfs, err := readBoth("list", "workflows", src.workflows, dst.workflows)
	if err != nil {
		return sum, err
	}
	if extra := missingFrom(dwfs, wfs); len(extra) > 0 {
		return sum, fmt.Errorf("nothing copied: the destination holds workflows the source does not (%s): copy into an empty database", strings.Join(first(extra, 5), ", "))
	}
	sbs, dbs, err := readBoth("list", "registers", src.buckets, dst.buckets)
	if err != nil {
		return sum, err
	}
	if extra := missingFrom(dbs, sbs); len(extra) > 0 {
		return sum, fmt.Errorf("nothing copied: the destination holds register buckets the source does not (%s): copy into an empty database", strings.Join(first(extra, 5), ", "))
	}
	sown, down, err := readBoth("read", "owner records", src.owners, dst.owners)
	if err != nil {
		return sum, err
	}
	todo, err := plan(src, dst, wfs, sown, down, dbs)
	if err != nil {
		return sum, err
	}
	for i, wf := range wfs {
		if !todo[i] {
			sum.Skipped++
			continue
		}
		r, err := src.records(wf, sown)
		if err != nil {
			return sum, fmt.Errorf("read workflow %s from the source: %w", wf, err)
		}
		if err := write(wf, r); err != nil {
			return sum, fmt.Errorf("write workflow %s (%d of %d; run again to resume): %w", wf, i+1, len(wfs), err)
		}
		sum.Copied++
		if progress != nil && sum.Copied%100 == 0 {
			fmt.Fprintf(progress, "%d of %d workflows\n", i+1, len(wfs))
		}
	}
	for _, b := range sbs {
		keys, err := src.regs.RegisterKeys(b, "")
		if err != nil {
			return sum, fmt.Errorf("list registers of %s: %w", b, err)
		}
		for _, k := range keys {
			v, err := src.regs.GetRegister(b, k)
			if err != nil {
				return sum, fmt.Errorf("read register %s/%s: %w", b, k, err)
			}
			if err := putReg(b, k, v); err != nil {
				return sum, fmt.Errorf("write register %s/%s: %w", b, k, err)
			}
		}
	}
	sc, sd, err := digest(src)
	if err != nil {
		return sum, fmt.Errorf("verify: the source: %w", err)
	}
	dc, dd, err := digest(dst)
	if err != nil {
		return sum, fmt.Errorf("verify: the destination: %w", err)
	}
	sum.Counts, sum.Checksum = sc, sd
	if sc != dc || sd != dd {
		return sum, fmt.Errorf("verify: the copy differs from the source: source %v, checksum %s; destination %v, checksum %s", sc, short(sd), dc, short(dd))
	}
	return sum, nil
}

// plan reads every workflow on both sides and says which to write (those
// whose records differ). Before anything is written it refuses a
// destination holding a record the source does not hold as it is —
// another server's state, an old directory, a database that ran on after
// a first copy — since writing would overwrite or keep it: only an empty
// destination, or one holding part of the source (an interrupted copy),
// is copied into.
func plan(src, dst side, wfs []string, sown, down map[string]store.Owner, dbuckets []string) ([]bool, error) {
	todo := make([]bool, len(wfs))
	var l lister
	for i, wf := range wfs {
		r, err := src.records(wf, sown)
		if err != nil {
			return nil, fmt.Errorf("read workflow %s from the source: %w", wf, err)
		}
		d, err := dst.records(wf, down)
		if err != nil {
			return nil, fmt.Errorf("read workflow %s from the destination: %w", wf, err)
		}
		if l.same(wf, r, d) {
			continue
		}
		if c := notIn(d, r); c != "" {
			return nil, fmt.Errorf("nothing copied: the destination's workflow %s holds records the source does not (%s): copy into an empty database or directory", wf, c)
		}
		todo[i] = true
	}
	for _, b := range dbuckets {
		keys, err := dst.regs.RegisterKeys(b, "")
		if err != nil {
			return nil, fmt.Errorf("list the destination's registers of %s: %w", b, err)
		}
		for _, k := range keys {
			dv, err := dst.regs.GetRegister(b, k)
			if err != nil {
				return nil, fmt.Errorf("read the destination's register %s/%s: %w", b, k, err)
			}
			sv, err := src.regs.GetRegister(b, k)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("read the source's register %s/%s: %w", b, k, err)
			}
			if err != nil || !bytes.Equal(sv, dv) {
				return nil, fmt.Errorf("nothing copied: the destination's register %s/%s is not the source's (%d bytes there, %d in the source): copy into an empty database or directory", b, k, len(dv), len(sv))
			}
		}
	}
	return todo, nil
}

// notIn describes the first record of d that r does not hold as it is,
// by time and status only (never a file's content); "" if none.
func notIn(d, r Records) string {
	states := make(map[int64]slot.State, len(r.States))
	for _, st := range r.States {
		states[key(st.ID.Time)] = st
	}
	for _, st := range d.States {
		s, ok := states[key(st.ID.Time)]
		switch {
		case !ok:
			return fmt.Sprintf("slot %s, %s, is not in the source", slot.FormatTime(st.ID.Time), st.Status)
		case s.Status != st.Status || s.ExternalID != st.ExternalID || s.RetryCount != st.RetryCount:
			return fmt.Sprintf("slot %s is %s (retry %d) there, %s (retry %d) in the source", slot.FormatTime(st.ID.Time), st.Status, st.RetryCount, s.Status, s.RetryCount)
		}
	}
	marks := make(map[[2]int64]bool, len(r.Marks))
	for _, m := range r.Marks {
		marks[[2]int64{key(m.Slot), key(m.At)}] = true
	}
	for _, m := range d.Marks {
		if !marks[[2]int64{key(m.Slot), key(m.At)}] {
			return fmt.Sprintf("a rerun mark of slot %s", slot.FormatTime(m.Slot))
		}
	}
	for t, in := range d.Intents {
		if s, ok := r.Intents[t]; !ok || s.Attempt != in.Attempt || key(s.Time) != key(in.Time) {
			return fmt.Sprintf("a submit intent of slot %s", slot.FormatTime(t))
		}
	}
	if d.Paused && !r.Paused {
		return "paused"
	}
	if d.Owner != nil && (r.Owner == nil || *r.Owner != *d.Owner) {
		return "another owner"
	}
	return runsNotIn(d.Runs, r.Runs)
}

// readBoth reads the same thing from the source and then from the
// destination; an error says "<verb> the source's <what>" (or the
// destination's).
func readBoth[T any](verb, what string, src, dst func() (T, error)) (s, d T, err error) {
	if s, err = src(); err != nil {
		return s, d, fmt.Errorf("%s the source's %s: %w", verb, what, err)
	}
	if d, err = dst(); err != nil {
		return s, d, fmt.Errorf("%s the destination's %s: %w", verb, what, err)
	}
	return s, d, nil
}

func missingFrom(have, want []string) []string {
	in := make(map[string]bool, len(want))
	for _, w := range want {
		in[w] = true
	}
	var out []string
	for _, h := range have {
		if !in[h] {
			out = append(out, h)
		}
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// Migrate copies the file store src into db (celos db migrate): each
// workflow whose records differ is replaced in one transaction (its rows
// deleted, the source's copied in), the registers are upserted, and both
// are verified by counts and checksum. It is idempotent and resumable: a
// run that stopped part way is run again, and skips the workflows already
// copied. A source with files that do not parse is refused (Problems
// lists them), and so is a destination holding records the source does
// not hold as they are (plan): a database that ran on after a first
// migrate is never put back. The server must not be running on either.
func Migrate(ctx context.Context, src *statedb.DB, db *DB, progress io.Writer) (Summary, error) {
	if err := db.NotInUse(ctx); err != nil {
		return Summary{}, err
	}
	wfs, err := src.AllWorkflows()
	if err != nil {
		return Summary{}, err
	}
	src.Preload(wfs, 8)
	p, err := strays(src.Dir())
	if err != nil {
		return Summary{}, err
	}
	if p = append(p, src.Problems()...); len(p) > 0 {
		return Summary{}, fmt.Errorf("nothing copied: %d files of the source cannot be read (repair or remove them, then run again):\n  %s", len(p), strings.Join(first(p, 10), "\n  "))
	}
	db.Preload(wfs, 0)
	// The first write records the migrate (celos_incomplete_copy): a
	// server refuses the database until a verified copy clears it.
	marked := false
	mark := func() error {
		if !marked {
			if err := db.markCopy(ctx, src.Dir(), true); err != nil {
				return err
			}
			marked = true
		}
		return nil
	}
	sum, err := copyAll(fileSide(src), pgSide(db),
		func(wf string, r Records) error {
			if err := mark(); err != nil {
				return err
			}
			return db.replace(ctx, wf, r)
		},
		func(b, k string, v json.RawMessage) error {
			if err := mark(); err != nil {
				return err
			}
			return db.PutRegister(b, k, v)
		}, progress)
	if err != nil {
		return sum, err
	}
	return sum, db.markCopy(ctx, src.Dir(), false)
}

// strays lists the entries of a file store's record directories that it
// does not read as records and a copy would skip without a word: in
// state/, rerun/ and intent/ anything but a directory (a symbolic link, a
// file); in paused/, owner/ and run/ anything but a regular file; in register/
// anything but a directory of regular files. Names starting with a dot
// (temporary files) are not records and are left out.
func strays(root string) ([]string, error) {
	var out []string
	kinds := []struct {
		area string
		want fs.FileMode // fs.ModeDir or 0 (a regular file)
	}{{"state", fs.ModeDir}, {"rerun", fs.ModeDir}, {"intent", fs.ModeDir}, {"paused", 0}, {"owner", 0}, {"register", fs.ModeDir}, {"run", 0}}
	check := func(rel string, want fs.FileMode) ([]fs.DirEntry, error) {
		ents, err := os.ReadDir(filepath.Join(root, rel))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the source's %s: %w", rel, err)
		}
		var dirs []fs.DirEntry
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if e.Type() != want {
				out = append(out, fmt.Sprintf("%s/%s: %s", rel, e.Name(), kindOf(e.Type(), want)))
			} else if want == fs.ModeDir {
				dirs = append(dirs, e)
			}
		}
		return dirs, nil
	}
	for _, k := range kinds {
		if fi, err := os.Lstat(filepath.Join(root, k.area)); err == nil && !fi.IsDir() {
			out = append(out, fmt.Sprintf("%s: %s", k.area, kindOf(fi.Mode().Type(), fs.ModeDir)))
			continue
		}
		dirs, err := check(k.area, k.want)
		if err != nil {
			return nil, err
		}
		if k.area != "register" {
			continue
		}
		for _, b := range dirs {
			if _, err := check(path.Join("register", b.Name()), 0); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// kindOf says what an entry of type t is where want was expected.
func kindOf(t, want fs.FileMode) string {
	what := "a regular file"
	switch {
	case t&fs.ModeSymlink != 0:
		what = "a symbolic link (not followed)"
	case t.IsDir():
		what = "a directory"
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case t != 0:
		what = "not a regular file (" + t.String() + ")"
	}
	if want == fs.ModeDir {
		return what + ", not a directory: not copied"
	}
	return what + ", not a record file: not copied"
}

// Export copies db into the file store dst (celos db export), which
// should be a new directory: a destination holding records the source does
// not hold as they are is refused before anything is written (plan); one
// holding part of the source (an interrupted export) is completed.
func Export(ctx context.Context, db *DB, dst *statedb.DB, progress io.Writer) (Summary, error) {
	if err := db.NotInUse(ctx); err != nil {
		return Summary{}, err
	}
	wfs, err := db.AllWorkflows()
	if err != nil {
		return Summary{}, err
	}
	db.Preload(wfs, 0)
	sum, err := copyAll(pgSide(db), fileSide(dst), func(wf string, r Records) error { return writeFiles(dst, wf, r) },
		dst.PutRegister, progress)
	if err != nil {
		return sum, err
	}
	return sum, verifyOnDisk(db, dst, wfs, sum)
}

// verifyOnDisk reads the exported directory back from disk (the index
// copyAll compared was filled by the writes) and compares it with db
// again: a record written but not readable (a slot file past the file
// store's bound) fails the export, named.
func verifyOnDisk(db *DB, dst *statedb.DB, wfs []string, sum Summary) error {
	if err := dst.Reload(); err != nil {
		return fmt.Errorf("verify: read the directory again: %w", err)
	}
	dst.Preload(wfs, 8)
	if p := dst.Problems(); len(p) > 0 {
		return fmt.Errorf("verify: %d files written cannot be read back (the database holds what the file store cannot):\n  %s", len(p), strings.Join(first(p, 10), "\n  "))
	}
	dc, dd, err := digest(fileSide(dst))
	if err != nil {
		return fmt.Errorf("verify: the directory read again: %w", err)
	}
	if dc != sum.Counts || dd != sum.Checksum {
		return fmt.Errorf("verify: the directory read again differs from the source: source %v, checksum %s; directory %v, checksum %s", sum.Counts, short(sum.Checksum), dc, short(dd))
	}
	return nil
}

// writeFiles writes one workflow's records into the file store.
func writeFiles(dst *statedb.DB, wf string, r Records) error {
	b := dst.Batch()
	for _, st := range r.States {
		if err := b.Put(st); err != nil {
			return err
		}
	}
	for id, err := range b.Commit() {
		return fmt.Errorf("slot %s: %w", id, err)
	}
	for _, m := range r.Marks {
		if err := dst.MarkRerun(slot.ID{Workflow: wf, Time: m.Slot}, m.At); err != nil {
			return err
		}
	}
	for t, in := range r.Intents {
		if err := dst.PutIntent(slot.ID{Workflow: wf, Time: t}, in); err != nil {
			return err
		}
	}
	if r.Paused {
		if err := dst.SetPaused(wf, true); err != nil {
			return err
		}
	}
	if r.Owner != nil {
		if err := dst.SetOwner(wf, *r.Owner); err != nil {
			return err
		}
	}
	if len(r.Runs) > 0 {
		for _, err := range dst.PutRuns(map[string][]store.Run{wf: r.Runs}) {
			return err
		}
	}
	return nil
}

// replace makes workflow wf's rows r, in one transaction.
func (db *DB) replace(ctx context.Context, wf string, r Records) error {
	for _, st := range r.States {
		if err := checkState(st); err != nil {
			return err
		}
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	_, err := db.writeTx("copy workflow "+wf, []string{wf}, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		for _, t := range []string{"celos_slots", "celos_rerun_marks", "celos_intents", "celos_paused", "celos_owners", "celos_runs"} {
			if _, err := tx.Exec(ctx, "DELETE FROM "+t+" WHERE workflow = $1", wf); err != nil {
				return 0, err
			}
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"celos_slots"}, []string{"workflow", "slot_time", "status", "external_id", "retry_count"},
			pgx.CopyFromSlice(len(r.States), func(i int) ([]any, error) {
				st := r.States[i]
				return []any{wf, st.ID.Time, string(st.Status), st.ExternalID, int32(st.RetryCount)}, nil
			}))
		if err != nil {
			return 0, err
		}
		b := &pgx.Batch{}
		for _, m := range r.Marks {
			b.Queue("INSERT INTO celos_rerun_marks (workflow, slot_time, marked_at) VALUES ($1, $2, $3)", wf, m.Slot, m.At)
		}
		for t, in := range r.Intents {
			b.Queue("INSERT INTO celos_intents (workflow, slot_time, attempt, intended_at) VALUES ($1, $2, $3, $4)", wf, t, int32(in.Attempt), in.Time)
		}
		if r.Paused {
			b.Queue("INSERT INTO celos_paused (workflow) VALUES ($1)", wf)
		}
		if r.Owner != nil {
			b.Queue("INSERT INTO celos_owners (workflow, project, file) VALUES ($1, $2, $3)", wf, r.Owner.Project, r.Owner.File)
		}
		for _, run := range r.Runs {
			b.Queue("INSERT INTO celos_runs (workflow, slot_time, attempt, submitted_at) VALUES ($1, $2, $3, $4)", wf, run.Slot, int32(run.Attempt), run.At)
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return 0, err
			}
		}
		return n + int64(b.Len()), nil
	})
	// The index of wf is dropped either way (writeTx on error; here on
	// success): it is read again from the rows just written.
	db.forget([]string{wf})
	if err == nil {
		db.mu.Lock()
		if r.Paused {
			db.paused[wf] = true
		} else {
			delete(db.paused, wf)
		}
		db.mu.Unlock()
	}
	return err
}
