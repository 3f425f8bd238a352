package trigger

// Status explains a trigger's readiness for one slot as a tree, in Celos's
// /trigger-status shape: {"type","ready","description","subStatuses"}.
type Status struct {
	// Type is Celos's class name: AndTrigger, HDFSCheckTrigger, ...
	Type        string   `json:"type"`
	Ready       bool     `json:"ready"`
	Description string   `json:"description"`
	SubStatuses []Status `json:"subStatuses"`
	// Error is set when the trigger could not be evaluated (an unreachable
	// NameNode, say); Ready is then false.
	Error string `json:"error,omitempty"`
	// Files and Bytes (dataVolume) are how many files matched the glob
	// and their total size, when it could be listed.
	Files *int64 `json:"files,omitempty"`
	Bytes *int64 `json:"bytes,omitempty"`
}
