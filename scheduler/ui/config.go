package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
)

// Config is the --ui-config file, in Celos's format:
//
//	{"groups": [{"name": "Group 1", "workflows": ["workflow-1", "workflow-2"]}]}
//
// Groups are shown in file order. Workflows that are listed but not loaded
// appear as "(missing)"; loaded workflows listed nowhere go into a final
// group "Unlisted workflows". Without a config (no groups) the grid is one
// group, "All workflows".
type Config struct {
	Groups []Group `json:"groups"`
}

// Group is a named list of workflow ids.
type Group struct {
	Name      string   `json:"name"`
	Workflows []string `json:"workflows"`
}

// maxConfigSize bounds the bytes read from a --ui-config file.
const maxConfigSize = 16 << 20

// LoadConfig reads a --ui-config file. A file that does not exist is an
// error (as in Celos); so are an empty file, unknown fields, a group without
// a name, two groups with the same name and a workflow listed twice in one
// group.
func LoadConfig(path string) (Config, error) {
	data, err := regfile.ReadFile(path, maxConfigSize)
	if err != nil {
		return Config{}, fmt.Errorf("ui config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("ui config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads a config document (see Config).
func ParseConfig(data []byte) (Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, fmt.Errorf("the file is empty; want {\"groups\": [{\"name\": ..., \"workflows\": [...]}]}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("want {\"groups\": [{\"name\": ..., \"workflows\": [...]}]}: %w", err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("trailing data after the JSON document")
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c Config) validate() error {
	names := make(map[string]int, len(c.Groups))
	for i, g := range c.Groups {
		if strings.TrimSpace(g.Name) == "" {
			return fmt.Errorf("groups[%d]: name is empty", i)
		}
		// The page keys a group (its folding, its section) by name.
		if j, ok := names[g.Name]; ok {
			return fmt.Errorf("groups[%d]: name %q is also the name of groups[%d]", i, g.Name, j)
		}
		names[g.Name] = i
		seen := make(map[string]bool, len(g.Workflows))
		for _, id := range g.Workflows {
			if id == "" {
				return fmt.Errorf("group %q: empty workflow id", g.Name)
			}
			if seen[id] {
				return fmt.Errorf("group %q: workflow %q listed twice", g.Name, id)
			}
			seen[id] = true
		}
	}
	return nil
}
