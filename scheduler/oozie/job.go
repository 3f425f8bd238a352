package oozie

import (
	"encoding/json"
	"fmt"
	"time"
)

// Job is a workflow job as Oozie describes it (WorkflowJobBean.toJSONObject;
// the keys of JsonTags).
type Job struct {
	ID          string   `json:"id"`
	AppName     string   `json:"appName"`
	AppPath     string   `json:"appPath"`
	ExternalID  string   `json:"externalId"`
	ParentID    string   `json:"parentId"`
	Status      string   `json:"status"`
	User        string   `json:"user"`
	Group       string   `json:"group"`
	ACL         string   `json:"acl"`
	Run         int      `json:"run"`
	ConsoleURL  string   `json:"consoleUrl"`
	Conf        string   `json:"conf"` // a <configuration> XML document
	CreatedTime Time     `json:"createdTime"`
	StartTime   Time     `json:"startTime"`
	EndTime     Time     `json:"endTime"`
	LastModTime Time     `json:"lastModTime"`
	Actions     []Action `json:"actions"`
	JobType     string   `json:"jobType,omitempty"` // v2
}

// Action is one action of a workflow job.
type Action struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Type           string `json:"type"`
	Status         string `json:"status"`
	Transition     string `json:"transition"`
	ExternalID     string `json:"externalId"`
	ExternalStatus string `json:"externalStatus"`
	ConsoleURL     string `json:"consoleUrl"`
	ErrorCode      string `json:"errorCode"`
	ErrorMessage   string `json:"errorMessage"`
	StartTime      Time   `json:"startTime"`
	EndTime        Time   `json:"endTime"`
}

// ConfMap parses the job's conf.
func (j *Job) ConfMap() (map[string]string, error) {
	if j.Conf == "" {
		return map[string]string{}, nil
	}
	return ParseConfiguration([]byte(j.Conf))
}

// TimeLayout is how Oozie writes dates (RFC 822, in the requested zone).
const TimeLayout = "Mon, 02 Jan 2006 15:04:05 MST"

// Time is an Oozie date; the zero Time is JSON null.
type Time struct{ time.Time }

// UnmarshalJSON reads an RFC 822 date or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "" {
		t.Time = time.Time{}
		return nil
	}
	v, err := time.Parse(TimeLayout, s)
	if err != nil {
		return fmt.Errorf("oozie date %q: %w", s, err)
	}
	t.Time = v.UTC()
	return nil
}

// MarshalJSON writes an RFC 822 date in GMT or null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT"))
}
