package celos.minicluster;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * Starts a Hadoop MiniDFSCluster (one NameNode, N DataNodes) on loopback for
 * the Go tests, writes the client configuration into a directory, and then
 * obeys one-line commands on standard input so fault tests can take parts of
 * the cluster down and bring them back. End of standard input (the Go test
 * process went away) shuts the cluster down, so no JVM is left behind.
 *
 * <pre>
 * java -cp 'target/minicluster.jar:target/dependency/*' celos.minicluster.Main \
 *     -dir DIR [-datanodes N] [-nnport P] [-httpport P] [-format] [-D key=value]...
 *     [-exit-when-ready]
 * </pre>
 *
 * Writes DIR/conf/core-site.xml, DIR/conf/hdfs-site.xml and DIR/cluster.json
 * ({"namenode":"127.0.0.1:P","http":"127.0.0.1:H","datanodes":N,"pid":PID}),
 * keeps its data under DIR/dfs and prints "READY host:port" when the cluster
 * accepts writes. Commands (each answered "OK cmd" or "ERR cmd: reason"):
 * stop-namenode, start-namenode, restart-namenode, stop-datanode I,
 * start-datanode, shutdown.
 */
public final class Main {
  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable e) {
      // Hadoop's threads would keep the JVM alive after a failed start.
      e.printStackTrace();
      System.out.println("ERR start: " + e.toString().replace('\n', ' '));
      System.out.flush();
      System.exit(1);
    }
    System.exit(0);
  }

  private static void run(String[] args) throws Exception {
    File dir = null;
    int dataNodes = 1, nnPort = 0, httpPort = 0;
    boolean format = false, exitWhenReady = false;
    List<String[]> extra = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "-dir": dir = new File(args[++i]); break;
        case "-datanodes": dataNodes = Integer.parseInt(args[++i]); break;
        case "-nnport": nnPort = Integer.parseInt(args[++i]); break;
        case "-httpport": httpPort = Integer.parseInt(args[++i]); break;
        case "-format": format = true; break;
        case "-exit-when-ready": exitWhenReady = true; break;
        case "-D": {
          String kv = args[++i];
          int eq = kv.indexOf('=');
          if (eq < 0) usage("-D wants key=value, got " + kv);
          extra.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
          break;
        }
        default: usage("unknown argument " + args[i]);
      }
    }
    if (dir == null) usage("-dir is required");

    Configuration conf = new HdfsConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dir, "dfs").getAbsolutePath());
    conf.setBoolean("dfs.webhdfs.enabled", true);
    // Small blocks so tests can make multi-block files cheaply; callers may override.
    conf.setLong("dfs.blocksize", 1 << 20);
    conf.setInt("dfs.namenode.fs-limits.min-block-size", 1024);
    // Quick reaction when a DataNode is stopped and started again.
    conf.setInt("dfs.heartbeat.interval", 1);
    for (String[] kv : extra) conf.set(kv[0], kv[1]);

    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .numDataNodes(dataNodes)
        .nameNodePort(nnPort)
        .nameNodeHttpPort(httpPort)
        .format(format)
        .manageNameDfsDirs(true)
        .manageDataDfsDirs(true)
        .build();
    cluster.waitActive();
    cluster.waitClusterUp();

    int port = cluster.getNameNodePort();
    int http = cluster.getNameNode().getHttpAddress().getPort();
    String nn = "127.0.0.1:" + port;
    File confDir = new File(dir, "conf");
    confDir.mkdirs();

    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", "hdfs://" + nn);
    writeXml(core, new File(confDir, "core-site.xml"));
    Configuration hdfs = new Configuration(false);
    hdfs.set("dfs.namenode.rpc-address", nn);
    hdfs.set("dfs.namenode.http-address", "127.0.0.1:" + http);
    hdfs.set("dfs.webhdfs.enabled", "true");
    hdfs.set("dfs.replication", conf.get("dfs.replication"));
    hdfs.set("dfs.blocksize", conf.get("dfs.blocksize"));
    writeXml(hdfs, new File(confDir, "hdfs-site.xml"));
    String json = String.format(
        "{\"namenode\":\"%s\",\"http\":\"127.0.0.1:%d\",\"datanodes\":%d,\"pid\":%d}%n",
        nn, http, dataNodes, ProcessHandle.current().pid());
    writeAtomic(new File(dir, "cluster.json"), json.getBytes(StandardCharsets.UTF_8));

    System.out.println("READY " + nn);
    System.out.flush();
    if (exitWhenReady) { // used once to record a class-data-sharing archive
      cluster.shutdown();
      return;
    }

    List<MiniDFSCluster.DataNodeProperties> stopped = new ArrayList<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] f = line.trim().split("\\s+");
      if (f.length == 0 || f[0].isEmpty()) continue;
      if (f[0].equals("shutdown")) break;
      try {
        switch (f[0]) {
          case "stop-namenode":
            cluster.shutdownNameNode(0);
            break;
          case "start-namenode":
            cluster.restartNameNode(0, true);
            cluster.waitActive();
            break;
          case "restart-namenode":
            cluster.restartNameNode(0, true);
            cluster.waitActive();
            break;
          case "stop-datanode": {
            int i = f.length > 1 ? Integer.parseInt(f[1]) : 0;
            MiniDFSCluster.DataNodeProperties p = cluster.stopDataNode(i);
            if (p == null) throw new IllegalArgumentException("no datanode " + i);
            stopped.add(p);
            break;
          }
          case "start-datanode": {
            if (stopped.isEmpty()) throw new IllegalStateException("no stopped datanode");
            MiniDFSCluster.DataNodeProperties p = stopped.remove(stopped.size() - 1);
            if (!cluster.restartDataNode(p, true)) throw new IOException("datanode did not restart");
            cluster.waitActive();
            break;
          }
          default:
            throw new IllegalArgumentException("unknown command");
        }
        System.out.println("OK " + f[0]);
      } catch (Exception e) {
        System.out.println("ERR " + f[0] + ": " + e.toString().replace('\n', ' '));
        e.printStackTrace();
      }
      System.out.flush();
    }
    cluster.shutdown();
  }

  private static void writeXml(Configuration c, File f) throws IOException {
    File tmp = new File(f.getPath() + ".tmp");
    try (OutputStream out = new FileOutputStream(tmp)) {
      c.writeXml(out);
    }
    Files.move(tmp.toPath(), f.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  private static void writeAtomic(File f, byte[] b) throws IOException {
    File tmp = new File(f.getPath() + ".tmp");
    Files.write(tmp.toPath(), b);
    Files.move(tmp.toPath(), f.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  private static void usage(String why) {
    System.err.println("minicluster: " + why);
    System.err.println("usage: celos.minicluster.Main -dir DIR [-datanodes N] [-nnport P] [-httpport P] [-format] [-D key=value]... [-exit-when-ready]");
    System.exit(2);
  }
}
