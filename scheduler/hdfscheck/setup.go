package hdfscheck

import (
	"fmt"

	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// Setup builds the file systems of an installation's hdfsCheck triggers,
// as `celos server` needs them: file: URIs on the local disk, hdfs: URIs
// through an FS over the Hadoop configuration in confDir (--hadoop-conf;
// "" means $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop; when none is
// set, hdfs URIs must name host:port). A trigger that names no file system
// uses d.HDFS (CELOS_DEFAULT_HDFS), else the configuration's fs.defaultFS.
// d may be nil. Close the FS at shutdown.
func Setup(d *defaults.Defaults, confDir string, opts Options) (*trigger.Mux, *FS, error) {
	if confDir == "" {
		confDir = hadoopconf.Dir()
	}
	var conf hadoopconf.Conf
	if confDir != "" {
		var err error
		if conf, err = hadoopconf.Load(confDir); err != nil {
			return nil, nil, fmt.Errorf("hadoop configuration: %w", err)
		}
	}
	def := ""
	if d != nil {
		def = d.HDFS
	}
	if def == "" && conf != nil {
		var err error
		if def, err = conf.DefaultFS(); err != nil {
			return nil, nil, err
		}
	}
	fs := New(conf, opts)
	mux := trigger.NewMux(def)
	mux.Handle("hdfs", fs)
	return mux, fs, nil
}
