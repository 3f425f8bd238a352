// Package hadoopconf reads Hadoop's XML configuration (core-site.xml,
// hdfs-site.xml) and builds an HDFS client from it, resolving HA name
// services itself: the one place celos turns Hadoop configuration into an
// *hdfs.Client (github.com/colinmarc/hdfs/v2), used by the deployer and by
// the scheduler's hdfsCheck trigger alike.
package hadoopconf

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/colinmarc/hdfs/v2"
	colinconf "github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// Conf is a flat view of Hadoop configuration properties (name → value).
// Later files override earlier ones, as in Hadoop.
type Conf map[string]string

// DefaultNamenodePort is the NameNode RPC port assumed when an hdfs URI or
// an rpc-address names a host without a port (Hadoop's default).
const DefaultNamenodePort = "8020"

// Files are the configuration files Load reads, in order.
var Files = []string{"core-site.xml", "hdfs-site.xml"}

type property struct {
	Name  string `xml:"name"`
	Value string `xml:"value"`
}

type configuration struct {
	XMLName    xml.Name   `xml:"configuration"`
	Properties []property `xml:"property"`
}

// Parse reads one Hadoop XML configuration file. name is used in errors
// only (a path or URL). Values are trimmed, as Hadoop does.
func Parse(name string, data []byte) (Conf, error) {
	var c configuration
	dec := xml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: not a Hadoop configuration file: %v", name, err)
	}
	conf := make(Conf, len(c.Properties))
	for i, p := range c.Properties {
		n := strings.TrimSpace(p.Name)
		if n == "" {
			return nil, fmt.Errorf("%s: property %d has no <name>", name, i+1)
		}
		conf[n] = strings.TrimSpace(p.Value)
	}
	return conf, nil
}

// Merge returns a new Conf holding every property of confs, later ones
// winning.
func Merge(confs ...Conf) Conf {
	out := make(Conf)
	for _, c := range confs {
		for k, v := range c {
			out[k] = v
		}
	}
	return out
}

// Load reads core-site.xml and hdfs-site.xml from dir (either may be
// missing, not both).
func Load(dir string) (Conf, error) {
	var confs []Conf
	for _, f := range Files {
		path := filepath.Join(dir, f)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := Parse(path, data)
		if err != nil {
			return nil, err
		}
		confs = append(confs, c)
	}
	if len(confs) == 0 {
		return nil, fmt.Errorf("hadoop configuration: neither %s exists in %s", strings.Join(Files, " nor "), dir)
	}
	return Merge(confs...), nil
}

// Dir returns the Hadoop configuration directory named by the environment:
// $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop (Hadoop 2+), else
// $HADOOP_HOME/conf. It returns "" when none is set or exists.
func Dir() string {
	if d := os.Getenv("HADOOP_CONF_DIR"); d != "" {
		return d
	}
	if h := os.Getenv("HADOOP_HOME"); h != "" {
		for _, d := range []string{filepath.Join(h, "etc", "hadoop"), filepath.Join(h, "conf")} {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d
			}
		}
	}
	return ""
}

// Get returns a property with ${name} and ${env.NAME} references expanded
// (Hadoop's variable substitution; unknown references are left as they
// are, and expansion stops after a bounded number of rounds).
func (c Conf) Get(name string) string {
	v := c[name]
	for round := 0; round < 20 && strings.Contains(v, "${"); round++ {
		changed := false
		var b strings.Builder
		rest := v
		for {
			i := strings.Index(rest, "${")
			if i < 0 {
				b.WriteString(rest)
				break
			}
			j := strings.IndexByte(rest[i:], '}')
			if j < 0 {
				b.WriteString(rest)
				break
			}
			ref := rest[i+2 : i+j]
			b.WriteString(rest[:i])
			if val, ok := c.lookup(ref); ok {
				b.WriteString(val)
				changed = true
			} else {
				b.WriteString(rest[i : i+j+1])
			}
			rest = rest[i+j+1:]
		}
		v = b.String()
		if !changed {
			break
		}
	}
	return v
}

func (c Conf) lookup(ref string) (string, bool) {
	if e, ok := strings.CutPrefix(ref, "env."); ok {
		return os.LookupEnv(e)
	}
	v, ok := c[ref]
	return v, ok
}

// DefaultFS returns fs.defaultFS (or the deprecated fs.default.name), or
// Hadoop's default "file:///" when neither is set.
func (c Conf) DefaultFS() string {
	if v := c.Get("fs.defaultFS"); v != "" {
		return v
	}
	if v := c.Get("fs.default.name"); v != "" {
		return v
	}
	return "file:///"
}

// IsLocal reports whether fs is a local file system URI (file:, or empty
// meaning the configuration's default which is file:).
func (c Conf) IsLocal(fs string) bool {
	if fs == "" {
		fs = c.DefaultFS()
	}
	u, err := url.Parse(fs)
	return err == nil && (u.Scheme == "file" || u.Scheme == "")
}

func (c Conf) list(key string) []string {
	var out []string
	for _, s := range strings.Split(c.Get(key), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Namenodes returns the NameNode RPC addresses (host:port) of the HDFS
// file system fs, an hdfs:// URI; "" means the configuration's
// fs.defaultFS. A logical HA name service (hdfs://mycluster) is resolved
// through dfs.nameservices, dfs.ha.namenodes.<ns> and
// dfs.namenode.rpc-address.<ns>.<nn>, so the addresses of other name
// services in the same file are never mixed in.
func (c Conf) Namenodes(fs string) ([]string, error) {
	if fs == "" {
		fs = c.DefaultFS()
	}
	u, err := url.Parse(fs)
	if err != nil {
		return nil, fmt.Errorf("file system URI %q: %v", fs, err)
	}
	if u.Scheme != "hdfs" {
		return nil, fmt.Errorf("file system URI %q is not an hdfs:// URI", fs)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, fmt.Errorf("file system URI %q names no NameNode host", fs)
	}
	if port == "" {
		if nns := c.list("dfs.ha.namenodes." + host); len(nns) > 0 {
			var addrs []string
			for _, nn := range nns {
				key := "dfs.namenode.rpc-address." + host + "." + nn
				a := c.Get(key)
				if a == "" {
					return nil, fmt.Errorf("name service %s: NameNode %s has no %s", host, nn, key)
				}
				addrs = append(addrs, withPort(a))
			}
			return addrs, nil
		}
		if a := c.Get("dfs.namenode.rpc-address." + host); a != "" {
			return []string{withPort(a)}, nil
		}
		for _, ns := range c.list("dfs.nameservices") {
			if ns == host {
				return nil, fmt.Errorf("name service %s is listed in dfs.nameservices but has no dfs.ha.namenodes.%s or dfs.namenode.rpc-address.%s", host, host, host)
			}
		}
		port = DefaultNamenodePort
	}
	return []string{net.JoinHostPort(host, port)}, nil
}

func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, DefaultNamenodePort)
}

// Options tune NewClient.
type Options struct {
	// FS is the hdfs:// URI to connect to; "" means fs.defaultFS.
	FS string
	// User is the HDFS user under simple authentication; "" means
	// $HADOOP_USER_NAME, else the OS user. Ignored under Kerberos, where
	// the principal is the user.
	User string
	// DialTimeout bounds each connection to a NameNode or DataNode
	// (default 10 s).
	DialTimeout time.Duration
	// Keytab and Principal, when both set, log in to Kerberos with a
	// keytab instead of the credential cache ($KRB5CCNAME or
	// /tmp/krb5cc_<uid>).
	Keytab, Principal string
}

// ClientOptions turns the configuration into hdfs.ClientOptions: the
// NameNode addresses (HA resolved), datanode hostname use, data transfer
// protection, the user, dial timeouts and, when
// hadoop.security.authentication is kerberos, a logged-in Kerberos client.
func (c Conf) ClientOptions(o Options) (hdfs.ClientOptions, error) {
	addrs, err := c.Namenodes(o.FS)
	if err != nil {
		return hdfs.ClientOptions{}, err
	}
	co := hdfs.ClientOptionsFromConf(colinconf.HadoopConf(c.expanded()))
	co.Addresses = addrs
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	co.NamenodeDialFunc = d.DialContext
	co.DatanodeDialFunc = d.DialContext
	if co.KerberosClient != nil {
		kc, err := kerberosClient(o)
		if err != nil {
			return hdfs.ClientOptions{}, err
		}
		co.KerberosClient = kc
		if co.KerberosServicePrincipleName == "" {
			return hdfs.ClientOptions{}, errors.New("hadoop.security.authentication is kerberos but dfs.namenode.kerberos.principal is not set")
		}
	} else {
		co.User = o.User
		if co.User == "" {
			co.User = os.Getenv("HADOOP_USER_NAME")
		}
		if co.User == "" {
			u, err := user.Current()
			if err != nil {
				return hdfs.ClientOptions{}, fmt.Errorf("HDFS user: set HADOOP_USER_NAME (%v)", err)
			}
			co.User = u.Username
		}
	}
	return co, nil
}

func (c Conf) expanded() map[string]string {
	out := make(map[string]string, len(c))
	for k := range c {
		out[k] = c.Get(k)
	}
	return out
}

// NewClient connects to the HDFS named by o.FS (default fs.defaultFS). It
// fails for a local (file:) file system: check IsLocal first.
func (c Conf) NewClient(o Options) (*hdfs.Client, error) {
	co, err := c.ClientOptions(o)
	if err != nil {
		return nil, err
	}
	cl, err := hdfs.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("connect to HDFS %s: %w", strings.Join(co.Addresses, ","), err)
	}
	return cl, nil
}

// Ping checks that the NameNode answers (a Stat of "/"), bounded by ctx.
func Ping(ctx context.Context, cl *hdfs.Client) error {
	done := make(chan error, 1)
	go func() { _, err := cl.Stat("/"); done <- err }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func kerberosClient(o Options) (*krbclient.Client, error) {
	cfgPath := os.Getenv("KRB5_CONFIG")
	if cfgPath == "" {
		cfgPath = "/etc/krb5.conf"
	}
	cfg, err := krbconfig.Load(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: read %s (set KRB5_CONFIG): %v", cfgPath, err)
	}
	if o.Keytab != "" && o.Principal != "" {
		kt, err := keytab.Load(o.Keytab)
		if err != nil {
			return nil, fmt.Errorf("kerberos: keytab %s: %v", o.Keytab, err)
		}
		name, realm, _ := strings.Cut(o.Principal, "@")
		if realm == "" {
			realm = cfg.LibDefaults.DefaultRealm
		}
		cl := krbclient.NewWithKeytab(name, realm, kt, cfg, krbclient.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return nil, fmt.Errorf("kerberos: login as %s with %s: %v", o.Principal, o.Keytab, err)
		}
		return cl, nil
	}
	ccache := os.Getenv("KRB5CCNAME")
	if p, ok := strings.CutPrefix(ccache, "FILE:"); ok {
		ccache = p
	}
	if ccache == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("kerberos: %v", err)
		}
		ccache = "/tmp/krb5cc_" + u.Uid
	}
	cc, err := credentials.LoadCCache(ccache)
	if err != nil {
		return nil, fmt.Errorf("kerberos: credential cache %s (run kinit, or set KRB5CCNAME): %v", ccache, err)
	}
	cl, err := krbclient.NewFromCCache(cc, cfg, krbclient.DisablePAFXFAST(true))
	if err != nil {
		return nil, fmt.Errorf("kerberos: %v", err)
	}
	return cl, nil
}
