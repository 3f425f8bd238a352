package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/celos-go/celos/targets"
)

// sshFlags are the SSH flags of every command that reads or writes a
// target over SFTP (deploy, undeploy, plan, deployments, test): one
// definition, so that they mean the same everywhere.
type sshFlags struct {
	knownHosts, identities []string
	insecure               bool
}

func (f *sshFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.knownHosts, "known-hosts", nil, "known_hosts file to verify SSH host keys with (repeatable; default $CELOS_KNOWN_HOSTS, else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts)")
	fs.StringArrayVar(&f.identities, "identity", nil, "SSH private key file (repeatable; default $CELOS_SSH_IDENTITY, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa); ssh-agent is tried first")
	fs.BoolVar(&f.insecure, "insecure-ignore-host-key", false, "DANGEROUS: do not verify SSH host keys (anyone on the network path can impersonate the server)")
}

// options are the SSH options of the flags, the environment
// (CELOS_KNOWN_HOSTS, CELOS_SSH_IDENTITY) filling what they leave empty.
// With --insecure-ignore-host-key it warns on stderr, saying what an
// impostor could do (risk: "receive your workflows").
func (f *sshFlags) options(stderr io.Writer, risk string) targets.SSHOptions {
	if f.insecure {
		fmt.Fprintf(stderr, "celos: WARNING: --insecure-ignore-host-key: SSH host keys are NOT verified; anyone on the network path can impersonate the server and %s\n", risk)
	}
	return targets.SSHOptionsFromEnv(targets.SSHOptions{
		KnownHosts:            f.knownHosts,
		Identities:            f.identities,
		InsecureIgnoreHostKey: f.insecure,
	})
}
