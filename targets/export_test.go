package targets

import "github.com/pkg/sftp"

// NewSFTPClient wraps an existing SFTP client: the tests' in-process
// servers (sshtest.InProcess).
func NewSFTPClient(name string, c *sftp.Client) (*SFTP, error) { return newSFTP(name, c) }
