// Package testenv holds what tests need to run against real services
// started on this machine: a Hadoop mini cluster (package hdfstest), an
// Apache Oozie over it (package oozietest) and an OpenSSH sftp server
// (package sshtest). It also finds the repository root, which they use to
// locate their fixtures. See docs/testing.md.
package testenv

import (
	"errors"
	"os"
	"path/filepath"
)

// RepoRoot returns the directory holding the celos go.mod, found by walking
// up from the working directory (go test runs in the package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isCelosModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no celos go.mod above the working directory")
		}
		dir = parent
	}
}

func isCelosModule(gomod []byte) bool {
	const want = "module github.com/celos-go/celos\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}
