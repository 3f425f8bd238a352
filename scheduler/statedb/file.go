package statedb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/celos-go/celos/scheduler/slot"
)

// Layouts of the path components of a slot file:
// state/<workflow>/<yyyy-MM-dd>/<HH:mm:ss.SSS>Z.
const (
	dayLayout  = "2006-01-02"
	fileLayout = "15:04:05.000Z"
)

// slotPath returns the day directory and file name of a slot time.
func slotPath(t time.Time) (day, file string) {
	t = t.UTC()
	return t.Format(dayLayout), t.Format(fileLayout)
}

// parseSlotPath reads a slot time back from its day directory and file
// name; the slot's identity comes from its path, never from the file.
func parseSlotPath(day, file string) (time.Time, error) {
	t, err := time.Parse(dayLayout+"T"+fileLayout, day+"T"+file)
	if err != nil {
		return time.Time{}, fmt.Errorf("not a slot file name %s/%s", day, file)
	}
	// time.Parse accepts some non-canonical forms (single-digit fields are
	// not among them, but be strict anyway): the name must round-trip.
	if d, f := slotPath(t); d != day || f != file {
		return time.Time{}, fmt.Errorf("not a canonical slot file name %s/%s", day, file)
	}
	return t, nil
}

// EncodeState writes a slot state as Celos does, compact JSON in this key
// order: {"time":"2013-12-04T19:18:00.000Z","status":"RUNNING","externalID":"x","retryCount":0}.
// An empty external ID is written as null.
func EncodeState(st slot.State) []byte {
	var b bytes.Buffer
	b.WriteString(`{"time":"`)
	b.WriteString(slot.FormatTime(st.ID.Time))
	b.WriteString(`","status":`)
	writeJSONString(&b, string(st.Status))
	b.WriteString(`,"externalID":`)
	if st.ExternalID == "" {
		b.WriteString("null")
	} else {
		writeJSONString(&b, st.ExternalID)
	}
	b.WriteString(`,"retryCount":`)
	b.WriteString(strconv.Itoa(st.RetryCount))
	b.WriteByte('}')
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always marshals
	b.Write(enc)
}

// maxStateFile bounds a slot file: Celos's are under 200 bytes.
const maxStateFile = 64 << 10

// ParseState reads the content of a slot file. The "time" field, if any, is
// ignored (the identity comes from the path; Celos's older files have none);
// unknown fields are ignored as Celos does. It returns an error for
// anything that is not one JSON object with a known "status", an
// "externalID" that is a string or null, and a "retryCount" that is a
// non-negative integer.
func ParseState(data []byte) (status slot.Status, externalID string, retryCount int, err error) {
	if len(data) > maxStateFile {
		return "", "", 0, fmt.Errorf("%d bytes is too large for a slot state", len(data))
	}
	var raw struct {
		Status     *string          `json:"status"`
		ExternalID *string          `json:"externalID"`
		RetryCount *json.RawMessage `json:"retryCount"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return "", "", 0, fmt.Errorf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", 0, errors.New("trailing data after the JSON object")
	}
	if raw.Status == nil {
		return "", "", 0, errors.New(`no "status"`)
	}
	status = slot.Status(*raw.Status)
	if !status.Valid() {
		return "", "", 0, fmt.Errorf("unknown status %s", quoteName(*raw.Status))
	}
	if raw.ExternalID != nil {
		externalID = *raw.ExternalID
	}
	if raw.RetryCount != nil && string(*raw.RetryCount) != "null" {
		n, err := strconv.Atoi(string(*raw.RetryCount))
		if err != nil || n < 0 {
			return "", "", 0, fmt.Errorf("retryCount is not a non-negative integer (%s)", jsonKind(*raw.RetryCount))
		}
		retryCount = n
	}
	return status, externalID, retryCount, nil
}

// quoteName quotes a status read from a file when it looks like one (a
// short upper-case name: a typo is worth seeing) and otherwise says only
// how long it is: errors never echo a file's content.
func quoteName(s string) string {
	if len(s) > 0 && len(s) <= 32 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "" {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("(a string of %d bytes)", len(s))
}

// jsonKind names the kind of a JSON value for errors, without its content.
func jsonKind(v json.RawMessage) string {
	switch b := bytes.TrimSpace(v); {
	case len(b) == 0:
		return "empty"
	case b[0] == '"':
		return "a string"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	default:
		return "a number out of range or with a fraction"
	}
}

// badTime is the error of a marker's field that is not a time; it says how
// long the value is, never what it holds (slot.ParseTime's error quotes it).
func badTime(field, value string) error {
	return fmt.Errorf("%s is not an ISO 8601 time (a string of %d bytes)", field, len(value))
}

// encodeRerun writes a rerun marker: {"rerunTime":"<wall clock>"}.
func encodeRerun(at time.Time) []byte {
	return []byte(`{"rerunTime":"` + slot.FormatTime(at) + `"}`)
}

func parseRerun(data []byte) (time.Time, error) {
	var raw struct {
		RerunTime string `json:"rerunTime"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return time.Time{}, fmt.Errorf("bad JSON: %v", err)
	}
	t, err := slot.ParseTime(raw.RerunTime)
	if err != nil {
		return time.Time{}, badTime("rerunTime", raw.RerunTime)
	}
	return t, nil
}

func encodeIntent(in store.Intent) []byte {
	return []byte(`{"attempt":` + strconv.Itoa(in.Attempt) + `,"time":"` + slot.FormatTime(in.Time) + `"}`)
}

func parseIntent(data []byte) (store.Intent, error) {
	var raw struct {
		Attempt int    `json:"attempt"`
		Time    string `json:"time"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return store.Intent{}, fmt.Errorf("bad JSON: %v", err)
	}
	t, err := slot.ParseTime(raw.Time)
	if err != nil {
		return store.Intent{}, badTime("time", raw.Time)
	}
	return store.Intent{Attempt: raw.Attempt, Time: t}, nil
}
