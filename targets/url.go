package targets

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Location is a parsed file:, sftp: or hdfs: URL: where a file or
// directory lives.
type Location struct {
	// Scheme is "file", "sftp" or "hdfs".
	Scheme string
	// User is the SSH user (sftp; "" means the default user).
	User string
	// Host and Port name the server (sftp, hdfs). Port "" means the
	// scheme's default.
	Host, Port string
	// Path is absolute and clean ("/etc/celos/workflows").
	Path string
}

// DefaultSSHPort is used when an sftp URL names no port.
const DefaultSSHPort = "22"

// String returns the URL of l (never with a password: celos refuses those).
func (l Location) String() string {
	switch l.Scheme {
	case "file":
		return (&url.URL{Scheme: "file", Path: l.Path}).String()
	default:
		u := &url.URL{Scheme: l.Scheme, Host: l.Host, Path: l.Path}
		if l.Port != "" {
			u.Host = net.JoinHostPort(l.Host, l.Port)
		}
		if l.User != "" {
			u.User = url.User(l.User)
		}
		return u.String()
	}
}

// Join returns l with elem appended to its path.
func (l Location) Join(elem ...string) Location {
	l.Path = path.Join(append([]string{l.Path}, elem...)...)
	return l
}

// Dir returns l's parent directory.
func (l Location) Dir() Location {
	l.Path = path.Dir(l.Path)
	return l
}

// Server returns the part of l that names a file system: scheme, user,
// host and port (the key connections are shared by).
func (l Location) Server() string {
	if l.Scheme == "file" {
		return "file://"
	}
	l.Path = ""
	return l.String()
}

// ParseURL parses a file:, sftp: or hdfs: URL. A relative file: URL
// ("file:conf/core-site.xml") is resolved against baseDir, a local
// directory; it is an error when baseDir is "". Paths must be absolute
// for sftp and hdfs, may not contain NUL bytes, and are cleaned. A URL
// with a password, a query or a fragment is refused.
func ParseURL(raw, baseDir string) (Location, error) {
	if strings.ContainsRune(raw, 0) {
		return Location{}, fmt.Errorf("URL %q contains a NUL byte", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("invalid URL: %v", err)
	}
	shown := redact(u)
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Location{}, fmt.Errorf("URL %q: a query or fragment is not allowed", shown)
	}
	l := Location{Scheme: strings.ToLower(u.Scheme)}
	switch l.Scheme {
	case "file":
		if u.User != nil {
			return Location{}, fmt.Errorf("URL %q: a file: URL has no user", shown)
		}
		if h := u.Hostname(); h != "" && h != "localhost" {
			return Location{}, fmt.Errorf("URL %q: a file: URL names no host (use file:///path)", shown)
		}
		p := u.Path
		if u.Opaque != "" {
			p, err = url.PathUnescape(u.Opaque)
			if err != nil {
				return Location{}, fmt.Errorf("URL %q: %v", shown, err)
			}
		}
		if p == "" {
			return Location{}, fmt.Errorf("URL %q names no path", shown)
		}
		if !strings.HasPrefix(p, "/") {
			if baseDir == "" {
				return Location{}, fmt.Errorf("URL %q: a relative file: URL is only allowed inside a local target file", shown)
			}
			abs, err := filepath.Abs(filepath.Join(baseDir, filepath.FromSlash(p)))
			if err != nil {
				return Location{}, fmt.Errorf("URL %q: %v", shown, err)
			}
			p = filepath.ToSlash(abs)
		}
		l.Path = path.Clean(p)
		return l, nil
	case "sftp", "hdfs":
		if u.Opaque != "" {
			return Location{}, fmt.Errorf("URL %q: want %s://host/absolute/path", shown, l.Scheme)
		}
		if u.User != nil {
			if _, has := u.User.Password(); has {
				return Location{}, fmt.Errorf("URL %q: passwords in URLs are not supported (use an SSH key or ssh-agent)", shown)
			}
			l.User = u.User.Username()
			if l.Scheme == "hdfs" {
				return Location{}, fmt.Errorf("URL %q: an hdfs: URL has no user (set HADOOP_USER_NAME)", shown)
			}
		}
		l.Host, l.Port = u.Hostname(), u.Port()
		if l.Host == "" {
			return Location{}, fmt.Errorf("URL %q names no host", shown)
		}
		if !validHost(l.Host) {
			return Location{}, fmt.Errorf("URL %q: bad host name %q", shown, l.Host)
		}
		if u.Port() == "" && strings.HasSuffix(u.Host, ":") {
			return Location{}, fmt.Errorf("URL %q: empty port", shown)
		}
		if l.Port != "" {
			if n, err := strconv.Atoi(l.Port); err != nil || n < 1 || n > 65535 {
				return Location{}, fmt.Errorf("URL %q: port %s out of range 1-65535", shown, l.Port)
			}
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		if !strings.HasPrefix(p, "/") {
			return Location{}, fmt.Errorf("URL %q: the path must be absolute", shown)
		}
		l.Path = path.Clean(p)
		return l, nil
	case "":
		return Location{}, fmt.Errorf("URL %q has no scheme (want file: or sftp:)", shown)
	default:
		return Location{}, fmt.Errorf("URL %q: unsupported scheme %q (want file: or sftp:)", shown, u.Scheme)
	}
}

// validHost accepts an IP address or a DNS name.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// redact is u for messages: a password is replaced by xxxxx; a URL
// without one is shown as written (user@host, not user:xxxxx@host).
func redact(u *url.URL) string {
	c := *u
	if _, has := c.User.Password(); has {
		c.User = url.UserPassword(c.User.Username(), "xxxxx")
	}
	return c.String()
}
