// Package hadoopconf reads Hadoop's XML configuration (core-site.xml,
// hdfs-site.xml) and builds an HDFS client from it, resolving HA name
// services itself: the one place celos turns Hadoop configuration into an
// *hdfs.Client (github.com/colinmarc/hdfs/v2), used by the deployer and by
// the scheduler's hdfsCheck trigger alike.
package hadoopconf

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/celos-go/celos/internal/regfile"
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

// Bounds on a Hadoop XML file: Parse refuses a file that exceeds one.
const (
	// MaxFileSize bounds the bytes of one file.
	MaxFileSize = 4 << 20
	// MaxDepth bounds the nesting of elements (a configuration file
	// needs 3: configuration, property, name).
	MaxDepth = 32
	// MaxProperties bounds the properties of one file.
	MaxProperties = 10000
)

// Parse reads one Hadoop XML configuration file. name is used in errors
// only (a path or URL). Values are trimmed, as Hadoop does. The file is
// bounded (MaxFileSize, MaxDepth, MaxProperties), and entities declared
// in a DTD are never expanded (encoding/xml knows only XML's five).
func Parse(name string, data []byte) (Conf, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, MaxFileSize>>20)
	}
	notHadoop := func(err error) error {
		return fmt.Errorf("%s: not a Hadoop configuration file: %s", name, abbreviate(err.Error()))
	}
	// A first pass bounds the depth and the number of properties before
	// anything is kept.
	dec := xml.NewDecoder(bytes.NewReader(data))
	depth, props := 0, 0
	for {
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, notHadoop(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth > MaxDepth {
				return nil, fmt.Errorf("%s: not a Hadoop configuration file: elements nested deeper than %d", name, MaxDepth)
			}
			if depth == 2 && t.Name.Local == "property" {
				if props++; props > MaxProperties {
					return nil, fmt.Errorf("%s: more than %d properties", name, MaxProperties)
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	var c configuration
	if err := xml.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return nil, notHadoop(err)
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

// abbreviate keeps a message short (an XML error may quote a long name).
func abbreviate(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
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
// missing, not both). Each must be a regular file (or a symbolic link to
// one): a FIFO or a device is refused without blocking.
func Load(dir string) (Conf, error) {
	var confs []Conf
	for _, f := range Files {
		path := filepath.Join(dir, f)
		data, err := regfile.ReadFile(path, MaxFileSize)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err // names the file and what is wrong
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

// Bounds on variable expansion, as in Hadoop's Configuration.get.
const (
	// MaxSubst is the number of ${…} substitutions one value may need;
	// Hadoop's MAX_SUBST.
	MaxSubst = 20
	// MaxExpandedLen bounds the length of an expanded value (Hadoop has
	// none, but its 20 substitutions of values of any length are not a
	// bound worth the name).
	MaxExpandedLen = 1 << 20
	// maxExpandWork bounds the bytes all expansions of one ClientOptions
	// call may build.
	maxExpandWork = 64 << 20
)

// ErrExpansion is wrapped by the error of a value whose ${…} references
// need more than MaxSubst substitutions or expand to more than
// MaxExpandedLen bytes.
var ErrExpansion = errors.New("variable expansion too large")

// Get returns a property with ${name} and ${env.NAME} references expanded
// as Hadoop's Configuration.get does: one reference at a time, leftmost
// first; ${env.NAME:-default} and ${env.NAME-default} as in a shell; an
// unbound reference stops the expansion there, leaving the rest as it is;
// a value that refers to itself is returned unexpanded. Where Hadoop
// throws (more than MaxSubst substitutions) and where the value would grow
// beyond MaxExpandedLen, Get returns the property unexpanded; Expand
// returns the error.
func (c Conf) Get(name string) string {
	v, err := c.Expand(name)
	if err != nil {
		return c[name]
	}
	return v
}

// Expand is Get with the error for a value that cannot be expanded within
// the bounds (it wraps ErrExpansion and names the property). A missing
// property is "".
func (c Conf) Expand(name string) (string, error) {
	work := int64(maxExpandWork)
	return c.expand(name, &work)
}

func (c Conf) expand(name string, work *int64) (string, error) {
	expr := c[name]
	if !strings.Contains(expr, "${") {
		return expr, nil
	}
	eval := expr
	for s := 0; s < MaxSubst; s++ {
		start, end := findVar(eval)
		if start < 0 {
			return eval, nil
		}
		ref := eval[start:end]
		val, ok := c.lookup(ref)
		if !ok {
			return eval, nil // an unbound reference stays as it is
		}
		refVar := eval[start-2 : end+1]
		if strings.Contains(val, refVar) {
			return expr, nil // a loop: the original expression
		}
		n := len(eval) - len(refVar) + len(val)
		if n > MaxExpandedLen {
			return "", fmt.Errorf("hadoop configuration: %s: %w: expands to more than %d MiB", name, ErrExpansion, MaxExpandedLen>>20)
		}
		if *work -= int64(n); *work < 0 {
			return "", fmt.Errorf("hadoop configuration: %s: %w: the expansions build more than %d MiB", name, ErrExpansion, maxExpandWork>>20)
		}
		eval = eval[:start-2] + val + eval[end+1:]
	}
	return "", fmt.Errorf("hadoop configuration: %s: %w: more than %d substitutions", name, ErrExpansion, MaxSubst)
}

// findVar returns the bounds of the name in the leftmost ${name} of s
// (a name is not empty and holds no '}', '$' or space: Hadoop's
// \$\{[^\}\$\u0020]+\}), or -1, -1.
func findVar(s string) (int, int) {
	for i := 0; i+1 < len(s); {
		j := strings.Index(s[i:], "${")
		if j < 0 {
			return -1, -1
		}
		start := i + j + 2
		k := start
		for k < len(s) && s[k] != '}' && s[k] != '$' && s[k] != ' ' {
			k++
		}
		if k < len(s) && s[k] == '}' && k > start {
			return start, k
		}
		// No name here: go on after the character that ended it.
		i = k
		if k < len(s) && s[k] != '$' {
			i = k + 1
		}
	}
	return -1, -1
}

func (c Conf) lookup(ref string) (string, bool) {
	if e, ok := strings.CutPrefix(ref, "env."); ok && e != "" {
		name, def, val, set := e, "", "", false
		hasDef, emptyToo := false, false
		for i := 0; i < len(e); i++ {
			if e[i] == ':' && i+1 < len(e) && e[i+1] == '-' {
				name, def, hasDef, emptyToo = e[:i], e[i+2:], true, true
				break
			}
			if e[i] == '-' {
				name, def, hasDef = e[:i], e[i+1:], true
				break
			}
		}
		val, set = os.LookupEnv(name)
		switch {
		case hasDef && (!set || emptyToo && val == ""):
			return def, true
		case set:
			return val, true
		}
	}
	v, ok := c[ref]
	return v, ok
}

// DefaultFS returns fs.defaultFS (or the deprecated fs.default.name),
// expanded, or Hadoop's default "file:///" when neither is set. A value
// that cannot be expanded is an error naming the property (ErrExpansion),
// not a file system URI full of ${...}. The value is read as Hadoop's
// FileSystem.getDefaultUri reads it: trimmed, "local" is file:///, a
// name without a '/' (namenode, namenode:8020) is hdfs://name, and one
// with a '/' but no scheme is an error (Hadoop: "No scheme in default
// FS"), not the local disk.
func (c Conf) DefaultFS() (string, error) {
	for _, k := range []string{"fs.defaultFS", "fs.default.name"} {
		v, err := c.Expand(k)
		if err != nil {
			return "", err
		}
		if v = strings.TrimSpace(v); v != "" {
			return fixFSName(k, v)
		}
	}
	return "file:///", nil
}

// fixFSName is Hadoop's FileSystem.fixName, and its check for a scheme.
func fixFSName(key, v string) (string, error) {
	switch {
	case v == "local":
		return "file:///", nil
	case !strings.Contains(v, "/"):
		return "hdfs://" + v, nil
	}
	if u, err := url.Parse(v); err != nil || u.Scheme == "" {
		if len(v) > 200 {
			v = v[:200] + "..."
		}
		return "", fmt.Errorf("%s %q names no file system: want a URI such as hdfs://namenode:8020, or file:///", key, v)
	}
	return v, nil
}

// IsLocal reports whether fs is a local file system URI (file:, or empty
// meaning the configuration's default when that is file:).
func (c Conf) IsLocal(fs string) bool {
	if fs == "" {
		var err error
		if fs, err = c.DefaultFS(); err != nil {
			return false // not a file: URI; opening it reports the error
		}
		u, err := url.Parse(fs)
		return err == nil && u.Scheme == "file"
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
		var err error
		if fs, err = c.DefaultFS(); err != nil {
			return nil, err
		}
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
	all, err := c.expanded()
	if err != nil {
		return hdfs.ClientOptions{}, err
	}
	co := hdfs.ClientOptionsFromConf(colinconf.HadoopConf(all))
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

// expanded returns every property expanded, or the error of the first
// that cannot be (within a bound on the work of all expansions together).
func (c Conf) expanded() (map[string]string, error) {
	out := make(map[string]string, len(c))
	work := int64(maxExpandWork)
	for k := range c {
		v, err := c.expand(k, &work)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
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

// maxKerberosFile bounds krb5.conf, a keytab and a credential cache.
const maxKerberosFile = 16 << 20

// Kerberos reports whether hadoop.security.authentication is kerberos.
func (c Conf) Kerberos() bool {
	return strings.EqualFold(strings.TrimSpace(c.Get("hadoop.security.authentication")), "kerberos")
}

// KerberosClient logs in to Kerberos as the HDFS client does, for other
// Hadoop services (Oozie's SPNEGO): krb5.conf from $KRB5_CONFIG (default
// /etc/krb5.conf); with o.Keytab and o.Principal a keytab login, else the
// credential cache ($KRB5CCNAME or /tmp/krb5cc_<uid>). Every file is read
// bounded, and a file that is not a regular one is refused.
func KerberosClient(o Options) (*krbclient.Client, error) { return kerberosClient(o) }

func kerberosClient(o Options) (*krbclient.Client, error) {
	cfgPath := os.Getenv("KRB5_CONFIG")
	if cfgPath == "" {
		cfgPath = "/etc/krb5.conf"
	}
	// Each file is read as a regular file, bounded (a FIFO would hang the
	// libraries' own os.Open), and parsed from memory.
	data, err := regfile.ReadFile(cfgPath, maxKerberosFile)
	if err != nil {
		return nil, fmt.Errorf("kerberos: read %s (set KRB5_CONFIG): %v", cfgPath, err)
	}
	cfg, err := krbconfig.NewFromString(string(data))
	if err != nil {
		return nil, fmt.Errorf("kerberos: %s: %v", cfgPath, err)
	}
	if o.Keytab != "" && o.Principal != "" {
		data, err := regfile.ReadFile(o.Keytab, maxKerberosFile)
		if err != nil {
			return nil, fmt.Errorf("kerberos: keytab %s: %v", o.Keytab, err)
		}
		kt := new(keytab.Keytab) // as keytab.Load
		if err := unmarshalSafely(func() error { return kt.Unmarshal(data) }); err != nil {
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
	data, err = regfile.ReadFile(ccache, maxKerberosFile)
	if err == nil {
		cc := new(credentials.CCache)
		if err = unmarshalSafely(func() error { return cc.Unmarshal(data) }); err == nil {
			cl, err := krbclient.NewFromCCache(cc, cfg, krbclient.DisablePAFXFAST(true))
			if err != nil {
				return nil, fmt.Errorf("kerberos: %v", err)
			}
			return cl, nil
		}
	}
	return nil, fmt.Errorf("kerberos: credential cache %s (run kinit, or set KRB5CCNAME): %v", ccache, err)
}

// unmarshalSafely runs a gokrb5 Unmarshal, which indexes its input
// without checking its length: a short or empty file is an error, not a
// panic.
func unmarshalSafely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed (%v)", r)
		}
	}()
	return f()
}
