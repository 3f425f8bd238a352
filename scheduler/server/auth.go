package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/api"
)

// InsecureFlag is the command-line flag that lets a server without a token
// listen on an address other than loopback.
const InsecureFlag = "--insecure-no-auth-on-public-address"

// authOptions are what the token policy reads: the token file
// (--auth-token-file, empty: none), the listen address, and InsecureFlag.
type authOptions struct {
	TokenFile      string
	Listen         string
	InsecureNoAuth bool
}

// authToken loads o.TokenFile, or checks that going without a token is
// safe: the listen address is loopback, or the operator said otherwise
// with InsecureFlag (then it is logged as an error at every start).
func authToken(o authOptions, log *slog.Logger) (string, error) {
	if o.TokenFile != "" {
		token, warn, err := api.LoadToken(o.TokenFile)
		if err != nil {
			return "", err
		}
		if warn != "" {
			log.Warn(warn)
		}
		return token, nil
	}
	if IsLoopback(o.Listen) {
		return "", nil
	}
	if o.InsecureNoAuth {
		log.Error("INSECURE: listening on a non-loopback address without --auth-token-file: anyone who can reach " +
			o.Listen + " can rerun, kill and pause workflows and step the scheduler (" + InsecureFlag + ")")
		return "", nil
	}
	return "", fmt.Errorf("refusing to listen on %q without --auth-token-file: anyone who can reach it could rerun, kill and pause workflows; "+
		"give --auth-token-file FILE (a random token, e.g. from openssl rand -hex 32), listen on 127.0.0.1, "+
		"or accept the risk with %s", o.Listen, InsecureFlag)
}

// IsLoopback reports whether a listen address (a host name or IP, no
// port) only accepts connections from this machine: localhost, 127.0.0.0/8,
// ::1, or a name that resolves to loopback addresses only. The unspecified
// addresses (0.0.0.0, ::, "") are every interface, so not loopback.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// hostPolicy returns the check of the Host header of a server without a
// token, or nil for a server with one (its changes need the token, and it
// is meant to be reached by its names). Without a token, the server is
// reached by anything that can open a connection to it, including a
// browser whose page on another site made its own name resolve to
// 127.0.0.1 (DNS rebinding): for that browser the page, the API and the
// UI are then the same origin, so the cross-origin check does not stop
// it. Such a request carries the attacker's name in Host, so only these
// are answered: localhost, a loopback address (127.0.0.0/8, [::1]), and
// the --listen name itself (listenAddr, the operator's choice), with or without a
// port; on a public address (InsecureFlag), also any IP address literal,
// as a rebinding needs a name the attacker controls. A request without
// Host (HTTP/1.0) is answered: browsers always send one.
func hostPolicy(listenAddr, token string) func(host string) bool {
	if token != "" {
		return nil
	}
	listen := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(listenAddr, "["), "]"))
	public := !IsLoopback(listenAddr)
	return func(hostport string) bool {
		if hostport == "" {
			return true
		}
		host := hostport
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
			host = hostport[1 : len(hostport)-1]
		} else if strings.Contains(hostport, "[") || strings.Contains(hostport, "]") {
			return false
		}
		if host == "" {
			return false
		}
		if strings.EqualFold(host, "localhost") {
			return true
		}
		if ip := net.ParseIP(host); ip != nil {
			return ip.IsLoopback() || public
		}
		return strings.EqualFold(host, listen)
	}
}
