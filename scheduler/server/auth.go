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

// authToken loads cfg.AuthTokenFile, or checks that going without a token
// is safe: the listen address is loopback, or the operator said otherwise
// with InsecureFlag (then it is logged as an error at every start).
func authToken(cfg Config, log *slog.Logger) (string, error) {
	if cfg.AuthTokenFile != "" {
		token, warn, err := api.LoadToken(cfg.AuthTokenFile)
		if err != nil {
			return "", err
		}
		if warn != "" {
			log.Warn(warn)
		}
		return token, nil
	}
	if IsLoopback(cfg.Listen) {
		return "", nil
	}
	if cfg.InsecureNoAuthOnPublicAddress {
		log.Error("INSECURE: listening on a non-loopback address without --auth-token-file: anyone who can reach " +
			cfg.Listen + " can rerun, kill and pause workflows and step the scheduler (" + InsecureFlag + ")")
		return "", nil
	}
	return "", fmt.Errorf("refusing to listen on %q without --auth-token-file: anyone who can reach it could rerun, kill and pause workflows; "+
		"give --auth-token-file FILE (a random token, e.g. from openssl rand -hex 32), listen on 127.0.0.1, "+
		"or accept the risk with %s", cfg.Listen, InsecureFlag)
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
