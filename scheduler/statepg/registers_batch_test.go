package statepg

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// registerContents reads every key of bucket.
func registerContents(t *testing.T, db *DB, bucket string) map[string]string {
	t.Helper()
	keys, err := db.RegisterKeys(bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := db.GetRegister(bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		got[k] = string(v)
	}
	return got
}

// TestPutRegistersParity: PutRegisters leaves the bucket as PutRegister
// of each key would (new keys, a key replaced, the bytes as given), and
// refuses a bad key or value by itself, writing the others; so do
// DeleteRegisters and DeleteRegister.
func TestPutRegistersParity(t *testing.T) {
	one, _ := openTest(t)
	batch, _ := openTest(t)
	for _, db := range []*DB{one, batch} {
		if err := db.PutRegister("b", "old", json.RawMessage(`{"v": 0}`)); err != nil {
			t.Fatal(err)
		}
	}
	kv := map[string]json.RawMessage{"old": json.RawMessage(`{"v": 1}`), "k1": json.RawMessage(`[1, 2]`), "k2": json.RawMessage(`"x é"`)}
	for k, v := range kv {
		if err := one.PutRegister("b", k, v); err != nil {
			t.Fatal(err)
		}
	}
	all := map[string]json.RawMessage{"bad.key": json.RawMessage(`1`), "badvalue": json.RawMessage(`{`), "nul": json.RawMessage(`"\u0000"`)}
	for k, v := range kv {
		all[k] = v
	}
	failed := batch.PutRegisters("b", all)
	if len(failed) != 3 || !errors.Is(failed["bad.key"], store.ErrBadName) || !errors.Is(failed["badvalue"], store.ErrBadName) || !errors.Is(failed["nul"], store.ErrBadName) {
		t.Fatalf("failed: %v", failed)
	}
	if d := cmp.Diff(registerContents(t, one, "b"), registerContents(t, batch, "b")); d != "" {
		t.Errorf("bucket after PutRegister each (-) and PutRegisters (+):\n%s", d)
	}
	if failed := batch.PutRegisters("b", nil); failed != nil {
		t.Errorf("an empty batch: %v", failed)
	}
	for _, k := range []string{"old", "k2", "missing"} {
		if err := one.DeleteRegister("b", k); err != nil {
			t.Fatal(err)
		}
	}
	failed = batch.DeleteRegisters("b", []string{"old", "k2", "missing", "bad/key"})
	if len(failed) != 1 || !errors.Is(failed["bad/key"], store.ErrBadName) {
		t.Fatalf("DeleteRegisters failed: %v", failed)
	}
	if d := cmp.Diff(registerContents(t, one, "b"), registerContents(t, batch, "b")); d != "" {
		t.Errorf("bucket after DeleteRegister each (-) and DeleteRegisters (+):\n%s", d)
	}
}

// TestPutRegistersAllOrNothing: a batch is one statement: a row the
// server refuses (here a key a constraint added to this test's database
// forbids) fails every key of it, each naming the error, and writes
// none; so does a removal batch.
func TestPutRegistersAllOrNothing(t *testing.T) {
	db, _ := openTest(t)
	ctx, cancel := db.ctx()
	defer cancel()
	if err := db.PutRegister("b", "kept", json.RawMessage(`0`)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `ALTER TABLE celos_registers ADD CONSTRAINT test_no_poison CHECK (key <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	failed := db.PutRegisters("b", map[string]json.RawMessage{"a": json.RawMessage(`1`), "poison": json.RawMessage(`2`), "c": json.RawMessage(`3`)})
	if len(failed) != 3 || !strings.Contains(failed["a"].Error(), "put register b/a (one of 3)") || !strings.Contains(failed["c"].Error(), "test_no_poison") {
		t.Fatalf("failed: %v", failed)
	}
	if d := cmp.Diff(map[string]string{"kept": "0"}, registerContents(t, db, "b")); d != "" {
		t.Errorf("bucket after a failed batch (-want +got):\n%s", d)
	}
	// A removal refused by the server: a trigger that fails on one key.
	if _, err := db.pool.Exec(ctx, `CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF OLD.key = 'kept' THEN RAISE EXCEPTION 'test: kept stays'; END IF; RETURN OLD; END $$;
CREATE TRIGGER test_refuse BEFORE DELETE ON celos_registers FOR EACH ROW EXECUTE FUNCTION test_refuse()`); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRegister("b", "other", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	failed = db.DeleteRegisters("b", []string{"other", "kept"})
	if len(failed) != 2 || !strings.Contains(failed["other"].Error(), "kept stays") {
		t.Fatalf("DeleteRegisters failed: %v", failed)
	}
	if d := cmp.Diff(map[string]string{"kept": "0", "other": "1"}, registerContents(t, db, "b")); d != "" {
		t.Errorf("bucket after a failed removal (-want +got):\n%s", d)
	}
}

// TestRegisterBatchesOnAClosedStore: a closed store fails every key.
func TestRegisterBatchesOnAClosedStore(t *testing.T) {
	db, _ := openTest(t)
	db.Close()
	if failed := db.PutRegisters("b", map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`)}); len(failed) != 2 || failed["a"] == nil {
		t.Errorf("PutRegisters: %v", failed)
	}
	if failed := db.DeleteRegisters("b", []string{"a"}); failed["a"] == nil {
		t.Errorf("DeleteRegisters: %v", failed)
	}
}
