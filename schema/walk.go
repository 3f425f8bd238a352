package schema

// Converting an evaluated workflow to its Go type by looking its fields
// up, without CUE's JSON export: cue.Value.MarshalJSON (and Fields) sort
// the fields of every struct topologically, a fifth of the CPU of a
// compile of 1,000 workflows (docs/benchmarks.md, "vet without the JSON
// export"). The walker looks up, by name, the fields each shape of the
// schema has; it answers only for the ordinary case and leaves everything
// else (a value of another kind, an integer out of range, a size it cannot
// read, a string that is not UTF-8, a start time that is not RFC 3339, a
// type it does not know) to the conversion through JSON, which reports
// the error at its position as before. The schema is closed, so a
// workflow that got this far has no field the shapes lack. The tests
// check every compiled workflow against the conversion through JSON
// (walkCheck), the shapes against the schema (TestWalkerFieldsMatchSchema)
// and against the Go types (TestWalkerKnowsEveryField).

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
)

// walkCheck, when set (by the tests), is called with every workflow the
// walker converted and what the conversion through JSON makes of it.
var walkCheck func(id string, walked workflow.Workflow, decoded workflow.Workflow, decodedOK bool)

// The fields the walker looks up: a field absent from the value costs
// more to look up than one that is there (CUE builds an error), so the
// walker asks, for each shape the schema allows, only for the fields that
// shape has (type included). TestWalkerFieldsMatchSchema compares these
// lists with the schema's definitions, TestWalkerKnowsEveryField their
// union with the Go types' json fields.
var (
	workflowFields = []string{"id", "schedule", "trigger", "schedulingStrategy", "externalService", "startTime", "maxRetryCount", "waitTimeoutSeconds", "url", "contacts",
		"constraints", "pool", "priority", "sla", "notify"}
	contactFields  = []string{"name", "email"}
	strategyFields = []string{"type", "concurrency"}
	// by the value of type
	scheduleFields = map[string][]string{
		workflow.ScheduleCron:      {"type", "cron", "timeZone"},
		workflow.ScheduleDependent: {"type", "workflow"},
	}
	triggerFields = map[string][]string{
		workflow.TriggerHDFSCheck:  {"type", "path", "fs"},
		workflow.TriggerSuccess:    {"type", "workflow"},
		workflow.TriggerAnd:        {"type", "triggers"},
		workflow.TriggerOr:         {"type", "triggers"},
		workflow.TriggerNot:        {"type", "trigger"},
		workflow.TriggerOffset:     {"type", "trigger", "seconds"},
		workflow.TriggerDelay:      {"type", "seconds"},
		workflow.TriggerAlways:     {"type"},
		workflow.TriggerDataVolume: {"type", "path", "fs", "minFiles", "minBytes"},
		workflow.TriggerFailure:    {"type", "workflow"},
		workflow.TriggerSinceLast:  {"type", "seconds", "workflow"},
		workflow.TriggerEvent:      {"type", "bucket", "key"},
	}
	serviceFields = map[string][]string{
		workflow.ServiceOozie:   {"type", "properties", "url"},
		workflow.ServiceCommand: {"type", "command", "env", "dir", "timeoutSeconds"},
	}
)

// paths caches the one-selector paths the walker looks up.
var paths = map[string]cue.Path{}

func init() {
	add := func(names []string) {
		for _, n := range names {
			paths[n] = cue.MakePath(cue.Str(n))
		}
	}
	add(workflowFields)
	add(contactFields)
	add(strategyFields)
	for _, m := range []map[string][]string{scheduleFields, triggerFields, serviceFields} {
		for _, names := range m {
			add(names)
		}
	}
}

// walk is walkWorkflow, checked against decodeWorkflow when the tests
// ask for it (walkCheck).
func (c *compiler) walk(id string, v cue.Value) (workflow.Workflow, bool) {
	w, ok := walkWorkflow(id, v)
	if walkCheck != nil && ok {
		quiet := *c
		quiet.diags = nil
		decoded, decodedOK := quiet.decodeWorkflow(id, v)
		walkCheck(id, w, decoded, decodedOK)
	}
	return w, ok
}

// walker converts one workflow; ok turns false at the first value it
// leaves to the conversion through JSON.
type walker struct {
	ok bool
}

// walkWorkflow converts the concrete workflow v, declared as id. When it
// answers false, w is to be ignored.
func walkWorkflow(id string, v cue.Value) (w workflow.Workflow, ok bool) {
	k := &walker{ok: true}
	w.ID, _ = k.str(v, "id")
	if s, ok := k.field(v, "schedule", cue.StructKind); ok {
		k.schedule(&w.Schedule, s)
	}
	if t, ok := k.field(v, "trigger", cue.StructKind); ok {
		k.trigger(&w.Trigger, t, id, 1)
	}
	if s, ok := k.field(v, "schedulingStrategy", cue.StructKind); ok {
		w.SchedulingStrategy.Type, _ = k.str(s, "type")
		w.SchedulingStrategy.Concurrency, _ = k.goInt(s, "concurrency")
	}
	if s, ok := k.field(v, "externalService", cue.StructKind); ok {
		k.service(&w.ExternalService, s)
	}
	if s, ok := k.str(v, "startTime"); ok {
		if err := w.StartTime.UnmarshalText([]byte(s)); err != nil {
			k.ok = false
		}
	}
	w.MaxRetryCount, _ = k.goInt(v, "maxRetryCount")
	w.WaitTimeoutSeconds, _ = k.int(v, "waitTimeoutSeconds")
	w.URL, _ = k.str(v, "url")
	if l, ok := k.field(v, "contacts", cue.ListKind); ok {
		w.Contacts = []workflow.Contact{}
		k.list(l, cue.StructKind, func(c cue.Value) {
			var ct workflow.Contact
			ct.Name, _ = k.str(c, "name")
			ct.Email, _ = k.str(c, "email")
			w.Contacts = append(w.Contacts, ct)
		})
	}
	w.Pool, _ = k.str(v, "pool")
	w.Priority, _ = k.goInt(v, "priority")
	// The run constraints, the SLA and the notification targets are
	// small, rare and nested: they are decoded through JSON, each alone.
	k.decode(v, "constraints", cue.StructKind, &w.Constraints)
	k.decode(v, "sla", cue.StructKind, &w.SLA)
	k.decode(v, "notify", cue.ListKind, &w.Notify)
	if !k.ok {
		return workflow.Workflow{}, false
	}
	return w, true
}

// decode converts the field name of v, when it is there, through its JSON
// export into dst (a pointer); a field that does not convert exactly (an
// unknown field, a number that does not fit) stops the walk.
func (k *walker) decode(v cue.Value, name string, want cue.Kind, dst any) {
	f, ok := k.field(v, name, want)
	if !ok {
		return
	}
	data, err := f.MarshalJSON()
	if err != nil {
		k.ok = false
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		k.ok = false
	}
}

// shape reads the type of v and returns the fields that type has in
// byType; a type it does not know stops the walk.
func (k *walker) shape(v cue.Value, byType map[string][]string) (string, []string) {
	typ, _ := k.str(v, "type")
	names, known := byType[typ]
	if !known {
		k.ok = false
	}
	return typ, names
}

// schedule converts the schedule v into s.
func (k *walker) schedule(s *workflow.Schedule, v cue.Value) {
	var names []string
	s.Type, names = k.shape(v, scheduleFields)
	for _, n := range names {
		switch n {
		case "cron":
			s.Cron, _ = k.str(v, n)
		case "timeZone":
			s.TimeZone, _ = k.str(v, n)
		case "workflow":
			s.Workflow, _ = k.str(v, n)
		}
	}
}

// trigger converts the trigger v at the given depth (the workflow's is 1)
// into t, making explicit what explicitTriggers makes explicit: sizes in
// bytes, the workflow of a sinceLast. What explicitTriggers reports as a
// problem is left to it.
func (k *walker) trigger(t *workflow.Trigger, v cue.Value, id string, depth int) {
	if depth > workflow.MaxTriggerDepth {
		k.ok = false
		return
	}
	var names []string
	t.Type, names = k.shape(v, triggerFields)
	hasWorkflow := false
	for _, n := range names {
		switch n {
		case "path":
			t.Path, _ = k.str(v, n)
		case "fs":
			t.FS, _ = k.str(v, n)
		case "workflow":
			t.Workflow, hasWorkflow = k.str(v, n)
		case "minFiles":
			if m, ok := k.int(v, n); ok {
				t.MinFiles = &m
			}
		case "minBytes":
			k.minBytes(t, v)
		case "bucket":
			t.Bucket, _ = k.str(v, n)
		case "key":
			t.Key, _ = k.str(v, n)
		case "triggers":
			if l, ok := k.field(v, n, cue.ListKind); ok {
				t.Triggers = []workflow.Trigger{}
				k.list(l, cue.StructKind, func(c cue.Value) {
					t.Triggers = append(t.Triggers, workflow.Trigger{})
					k.trigger(&t.Triggers[len(t.Triggers)-1], c, id, depth+1)
				})
			}
		case "trigger":
			if c, ok := k.field(v, n, cue.StructKind); ok {
				t.Trigger = &workflow.Trigger{}
				k.trigger(t.Trigger, c, id, depth+1)
			}
		case "seconds":
			t.Seconds, _ = k.int(v, n)
		}
	}
	if t.Type == workflow.TriggerSinceLast && !hasWorkflow {
		t.Workflow = id
	}
	if t.Type == workflow.TriggerDataVolume && t.Path != "" {
		if _, _, err := workflow.GlobDir(t.Path); err != nil {
			k.ok = false
		}
	}
}

// minBytes sets the minBytes of t: an integer, or in a dataVolume trigger
// a size such as "1GB" in bytes.
func (k *walker) minBytes(t *workflow.Trigger, v cue.Value) {
	f, ok := k.field(v, "minBytes", cue.TopKind)
	if !ok {
		return
	}
	var n int64
	switch {
	case f.Kind() == cue.IntKind:
		n, ok = k.int(v, "minBytes")
		ok = ok && (n >= 0 || t.Type != workflow.TriggerDataVolume)
	case f.Kind() == cue.StringKind && t.Type == workflow.TriggerDataVolume:
		s, _ := k.str(v, "minBytes")
		var err error
		n, err = ParseSize(s)
		ok = err == nil
	default:
		ok = false
	}
	if !ok {
		k.ok = false
		return
	}
	t.MinBytes = &n
}

// service converts the external service v into s.
func (k *walker) service(s *workflow.ExternalService, v cue.Value) {
	var names []string
	s.Type, names = k.shape(v, serviceFields)
	for _, n := range names {
		switch n {
		case "properties":
			s.Properties = k.strMap(v, n)
		case "url":
			s.URL, _ = k.str(v, n)
		case "command":
			if l, ok := k.field(v, n, cue.ListKind); ok {
				s.Command = []string{}
				k.list(l, cue.StringKind, func(c cue.Value) {
					s.Command = append(s.Command, k.text(c))
				})
			}
		case "env":
			s.Env = k.strMap(v, n)
		case "dir":
			s.Dir, _ = k.str(v, n)
		case "timeoutSeconds":
			s.TimeoutSeconds, _ = k.int(v, n)
		}
	}
}

// field looks up the regular field name of v (optional fields not set are
// absent, as in CUE's JSON) with its default applied. A field of another
// kind than want (cue.TopKind: any) stops the walk.
func (k *walker) field(v cue.Value, name string, want cue.Kind) (cue.Value, bool) {
	if !k.ok {
		return cue.Value{}, false
	}
	p, known := paths[name]
	if !known {
		k.ok = false
		return cue.Value{}, false
	}
	f := v.LookupPath(p)
	if !f.Exists() {
		return cue.Value{}, false
	}
	f, _ = f.Default()
	if want != cue.TopKind && f.Kind() != want {
		k.ok = false
		return cue.Value{}, false
	}
	return f, true
}

// str is the string field name of v, and whether it is there.
func (k *walker) str(v cue.Value, name string) (string, bool) {
	f, ok := k.field(v, name, cue.StringKind)
	if !ok {
		return "", false
	}
	return k.text(f), k.ok
}

// text is the string f; one that is not UTF-8 (which JSON would have
// changed) stops the walk.
func (k *walker) text(f cue.Value) string {
	s, err := f.String()
	if err != nil || !utf8.ValidString(s) {
		k.ok = false
		return ""
	}
	return s
}

// int is the integer field name of v, and whether it is there; one that
// does not fit an int64 stops the walk.
func (k *walker) int(v cue.Value, name string) (int64, bool) {
	f, ok := k.field(v, name, cue.IntKind)
	if !ok {
		return 0, false
	}
	n, err := f.Int64()
	if err != nil {
		k.ok = false
		return 0, false
	}
	return n, true
}

// goInt is int for a field of Go type int.
func (k *walker) goInt(v cue.Value, name string) (int, bool) {
	n, ok := k.int(v, name)
	if !ok {
		return 0, false
	}
	if strconv.IntSize == 32 && int64(int32(n)) != n {
		k.ok = false
		return 0, false
	}
	return int(n), true
}

// list calls each for every element of the list l, which must be of kind
// want.
func (k *walker) list(l cue.Value, want cue.Kind, each func(cue.Value)) {
	it, err := l.List()
	if err != nil {
		k.ok = false
		return
	}
	for k.ok && it.Next() {
		e, _ := it.Value().Default()
		if e.Kind() != want {
			k.ok = false
			return
		}
		each(e)
	}
}

// strMap is the struct of strings field name of v (nil when it is absent,
// empty but not nil when it is {}).
func (k *walker) strMap(v cue.Value, name string) map[string]string {
	f, ok := k.field(v, name, cue.StructKind)
	if !ok {
		return nil
	}
	it, err := f.Fields()
	if err != nil {
		k.ok = false
		return nil
	}
	m := map[string]string{}
	for k.ok && it.Next() {
		e, _ := it.Value().Default()
		if e.Kind() != cue.StringKind {
			k.ok = false
			return nil
		}
		key := it.Selector().Unquoted()
		if !utf8.ValidString(key) {
			k.ok = false
			return nil
		}
		m[key] = k.text(e)
	}
	return m
}
