package statepg

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

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
	if d := cmp.Diff(map[string]string{"kept": "0"}, storetest.Contents(t, db, "b")); d != "" {
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
	if d := cmp.Diff(map[string]string{"kept": "0", "other": "1"}, storetest.Contents(t, db, "b")); d != "" {
		t.Errorf("bucket after a failed removal (-want +got):\n%s", d)
	}
}
