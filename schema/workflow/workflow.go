package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FormatVersion is the value of the "format" field of every compiled
// document this version of celos writes and accepts.
const FormatVersion = "celos.dev/workflows/v1"

// MaxTriggerDepth limits how deeply triggers may nest (an and inside an or
// inside a not counts three). Deeper trees are rejected by vet, export and
// the loader alike.
const MaxTriggerDepth = 16

// NeverTimeout is the explicit value of WaitTimeoutSeconds meaning that a
// slot waits forever (Celos's Integer.MAX_VALUE, about 68 years).
const NeverTimeout int64 = 2147483647

// MaxTriggerSeconds bounds the seconds of delay and offset triggers (100
// years), so that slot time plus seconds stays far inside time.Duration.
const MaxTriggerSeconds int64 = 100 * 366 * 24 * 3600

// DefaultStartTime is the start time of a workflow that names none.
var DefaultStartTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// Sentinel errors, wrapped with the details of what was wrong.
var (
	ErrFormat  = errors.New("not a celos compiled workflows document")
	ErrVersion = errors.New("unsupported format version")
	ErrInvalid = errors.New("invalid workflow")
)

// IDPattern is what a workflow id may look like.
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Project is the compiled form of one CUE project: the one contract between
// `celos export`, `celos deploy` and `celos server`.
type Project struct {
	// Format is always FormatVersion.
	Format string `json:"format"`
	// Project is the project name (the CUE package's `project` field, or
	// the package name).
	Project string `json:"project"`
	// Workflows are sorted by id.
	Workflows []Workflow `json:"workflows"`
}

// Workflow is one periodic workflow with every default made explicit.
type Workflow struct {
	ID                 string          `json:"id"`
	Schedule           Schedule        `json:"schedule"`
	Trigger            Trigger         `json:"trigger"`
	SchedulingStrategy Strategy        `json:"schedulingStrategy"`
	ExternalService    ExternalService `json:"externalService"`
	// StartTime is RFC 3339 in UTC; slots before it are never enumerated.
	StartTime time.Time `json:"startTime"`
	// MaxRetryCount is the number of extra attempts after a failure.
	MaxRetryCount int `json:"maxRetryCount"`
	// WaitTimeoutSeconds is measured from the slot's nominal time;
	// NeverTimeout means never.
	WaitTimeoutSeconds int64 `json:"waitTimeoutSeconds"`
	// URL and Contacts are informational (shown by /workflow-slots and the UI).
	URL      string    `json:"url,omitempty"`
	Contacts []Contact `json:"contacts,omitempty"`
	// Constraints, Pool, Priority, SLA and Notify: see constraints.go.
	// Constraints are checked before a READY slot is submitted.
	Constraints *Constraints `json:"constraints,omitempty"`
	// Pool names the installation's pool (celos server --pools) whose
	// limit the workflow's running slots count against; "" means none.
	Pool string `json:"pool,omitempty"`
	// Priority orders the slots waiting for a full pool: higher first.
	Priority int `json:"priority,omitempty"`
	// SLA, if set, is the objective every slot is checked against.
	SLA *SLA `json:"sla,omitempty"`
	// Notify are the targets of the workflow's events.
	Notify []Notification `json:"notify,omitempty"`
}

// Contact is a person responsible for a workflow.
type Contact struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// Schedule types.
const (
	ScheduleCron      = "cron"
	ScheduleDependent = "dependent"
)

// Schedule says at which times a workflow has slots. Hourly and minutely
// schedules are compiled to their cron expressions.
type Schedule struct {
	// Type is "cron" or "dependent".
	Type string `json:"type"`
	// Cron is a Quartz cron expression with seconds (type cron).
	Cron string `json:"cron,omitempty"`
	// TimeZone is an IANA zone name for the cron expression (type cron);
	// "UTC" when the author gave none.
	TimeZone string `json:"timeZone,omitempty"`
	// Workflow is the id of the workflow whose schedule is shared (type dependent).
	Workflow string `json:"workflow,omitempty"`
}

// Trigger types.
const (
	TriggerHDFSCheck = "hdfsCheck"
	TriggerSuccess   = "success"
	TriggerAnd       = "and"
	TriggerOr        = "or"
	TriggerNot       = "not"
	TriggerOffset    = "offset"
	TriggerDelay     = "delay"
	TriggerAlways    = "always"
	// TriggerDataVolume: files matching a glob add up to enough.
	TriggerDataVolume = "dataVolume"
	// TriggerFailure: another workflow's slot is FAILURE or WAIT_TIMEOUT.
	TriggerFailure = "failure"
	// TriggerSinceLast: enough time since a workflow's last SUCCESS.
	TriggerSinceLast = "sinceLast"
	// TriggerEvent: a register exists.
	TriggerEvent = "event"
)

// Trigger decides whether a slot's preconditions hold. Which fields are set
// depends on Type.
type Trigger struct {
	Type string `json:"type"`
	// Path (hdfsCheck, dataVolume) may hold ${year} ${month} ${day}
	// ${hour} ${minute} ${second}. For dataVolume it is a glob whose last
	// element may hold the wildcards * ? and [...] (see GlobDir).
	Path string `json:"path,omitempty"`
	// FS (hdfsCheck, dataVolume) is the file system URI (hdfs://nn:8020,
	// file:///); empty means the installation default.
	FS string `json:"fs,omitempty"`
	// Workflow (success, failure, sinceLast) is the id of the other
	// workflow; for sinceLast the compiler writes the workflow's own id
	// when the author named none.
	Workflow string `json:"workflow,omitempty"`
	// MinFiles and MinBytes (dataVolume, both always present) are how many
	// files must match and how many bytes they must hold together.
	MinFiles *int64 `json:"minFiles,omitempty"`
	MinBytes *int64 `json:"minBytes,omitempty"`
	// Bucket and Key (event) name the register that must exist; Key may
	// hold the slot-time variables of Path.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	// Triggers are the children of and/or.
	Triggers []Trigger `json:"triggers,omitempty"`
	// Trigger is the child of not/offset.
	Trigger *Trigger `json:"trigger,omitempty"`
	// Seconds is the offset (may be negative), the delay (≥ 0) or the
	// sinceLast interval (≥ 1).
	Seconds int64 `json:"seconds,omitempty"`
}

// Strategy types.
const StrategySerial = "serial"

// Strategy says which ready slots run.
type Strategy struct {
	Type        string `json:"type"`
	Concurrency int    `json:"concurrency"`
}

// External service types.
const (
	ServiceOozie   = "oozie"
	ServiceCommand = "command"
)

// ExternalService runs a slot.
type ExternalService struct {
	Type string `json:"type"`
	// Properties (oozie) are passed to Oozie after ${...} substitution.
	Properties map[string]string `json:"properties,omitempty"`
	// URL (oozie) is the Oozie URL; empty means the installation default.
	URL string `json:"url,omitempty"`
	// Command (command) is the argv of the process, ${...} substituted.
	Command []string `json:"command,omitempty"`
	// Env (command) is added to the process environment, ${...} substituted.
	Env map[string]string `json:"env,omitempty"`
	// Dir (command) is the working directory; empty means the server's.
	Dir string `json:"dir,omitempty"`
	// TimeoutSeconds (command) kills the process after so many seconds; 0 means none.
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// Load reads a compiled document, rejecting unknown fields, other format
// versions and invalid workflows.
//
// Its errors name the problem and where it is (line and column, the JSON
// path of a field), never the bytes of the document: a file that is not a
// celos document (a symlink to /etc/shadow) must not show up in load errors
// served to anyone. Only once the document declares this celos's format do
// errors quote it, and then only workflow ids, field names and the values
// validation rejects (a cron expression, a time zone).
func Load(r io.Reader) (*Project, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxDocumentSize+1))
	if err != nil {
		return nil, fmt.Errorf("read compiled workflows: %w", err)
	}
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrFormat, MaxDocumentSize)
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: the document must be a JSON object (%s)", ErrFormat, describeStart(trimmed))
	}
	var head struct {
		Format json.RawMessage `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrFormat, describeJSONError(data, err))
	}
	if head.Format == nil {
		return nil, fmt.Errorf("%w: no \"format\" field", ErrFormat)
	}
	var format string
	if err := json.Unmarshal(head.Format, &format); err != nil {
		return nil, fmt.Errorf("%w: the \"format\" field is %s, not a string", ErrFormat, JSONKind(head.Format))
	}
	if format != FormatVersion {
		return nil, versionError(format)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Project
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrFormat, describeJSONError(data, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the document", ErrFormat)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// celosFormat is what a format name of some celos version looks like; only
// such a name is quoted in an error.
var celosFormat = regexp.MustCompile(`^celos\.dev/workflows/v[0-9]{1,4}$`)

// versionError reports a format field that is not FormatVersion, quoting
// it only if it is the format name of another celos version.
func versionError(format string) error {
	if celosFormat.MatchString(format) {
		return fmt.Errorf("%w %q (this celos reads %q)", ErrVersion, format, FormatVersion)
	}
	return fmt.Errorf("%w: the \"format\" field is not a celos format name (this celos reads %q)", ErrVersion, FormatVersion)
}

// fieldName is what an unknown field's name must look like to be quoted.
var fieldName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// describeJSONError rewrites an error of encoding/json about data so that
// it says what is wrong and where (line, column, field path) without the
// values encoding/json quotes: "cannot unmarshal number 31415926 into Go
// struct field ..." becomes "line 3, column 20: workflows.maxRetryCount
// must be an integer, not a number".
func describeJSONError(data []byte, err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		pe *time.ParseError
	)
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Sprintf("JSON syntax error at line %d, column %d: %s", line, col, quotedChar.ReplaceAllString(se.Error(), "invalid character"))
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		got, _, _ := strings.Cut(te.Value, " ") // "number 1.5": the kind only
		field := te.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Sprintf("line %d, column %d: %s must be %s, not %s", line, col, field, describeType(te.Type), article(got))
	case errors.As(err, &pe):
		// The only time in a document (encoding/json does not say where).
		return "startTime is not an RFC 3339 time such as 2015-09-13T00:00:00Z"
	case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		return "startTime must be a string such as \"2015-09-13T00:00:00Z\""
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if uerr == nil && fieldName.MatchString(name) {
			return fmt.Sprintf("unknown field %q", name)
		}
		return "an unknown field whose name is not an identifier"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "the document ends too early"
	}
	// Anything else: keep the message but drop what it quotes.
	return quoted.ReplaceAllString(strings.TrimPrefix(err.Error(), "json: "), "…")
}

var (
	quotedChar = regexp.MustCompile(`invalid character '(?:[^'\\]|\\.)*'`)
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// describeType names the JSON a Go type of the document expects.
func describeType(t reflect.Type) string {
	if t == nil {
		return "another JSON type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return "another JSON type"
}

// article prefixes a JSON kind ("number", "object") with a or an.
func article(kind string) string {
	switch kind {
	case "":
		return "something else"
	case "array", "object":
		return "an " + kind
	case "bool":
		return "true or false"
	}
	return "a " + kind
}

// JSONKind names the kind of a JSON value ("an object", "a string", ...),
// never the value: for errors about files that must not be quoted. Text
// that is not JSON at all is "not JSON".
func JSONKind(v []byte) string {
	b := bytes.TrimLeft(v, " \t\r\n")
	if len(b) == 0 {
		return "empty"
	}
	if !json.Valid(b) {
		return "not JSON"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = max(1, int(off)-bytes.LastIndexByte(before, '\n')-1)
	return line, col
}

// MaxDocumentSize bounds a compiled document (64 MiB).
const MaxDocumentSize = 64 << 20

// Marshal writes the canonical form of p: indented, stable, ending in a
// newline, with &, < and > left as they are (shell commands and Oozie
// properties stay readable).
func (p *Project) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("marshal project %s: %w", p.Project, err)
	}
	return buf.Bytes(), nil
}

// describeStart names what a document that is not a JSON object starts
// with, by kind only: the bytes themselves may be anybody's secret.
func describeStart(b []byte) string {
	switch {
	case len(b) == 0:
		return "it is empty"
	case b[0] == '[':
		return "it is an array"
	case b[0] == '"':
		return "it is a string"
	case bytes.HasPrefix(b, []byte("null")):
		return "it is null"
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		return "it starts with a digit"
	case b[0] >= 'a' && b[0] <= 'z' || b[0] >= 'A' && b[0] <= 'Z':
		return "it starts with a letter"
	case b[0] < 0x20 || b[0] >= 0x7f:
		return "it starts with a control character or binary data"
	}
	return "it starts with punctuation"
}
