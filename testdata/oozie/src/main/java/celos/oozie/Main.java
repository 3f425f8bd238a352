package celos.oozie;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;

import javax.servlet.DispatcherType;

import org.apache.oozie.service.Services;
import org.apache.oozie.servlet.AuthFilter;
import org.apache.oozie.servlet.CallbackServlet;
import org.apache.oozie.servlet.HostnameFilter;
import org.apache.oozie.servlet.V1AdminServlet;
import org.apache.oozie.servlet.V1JobServlet;
import org.apache.oozie.servlet.V1JobsServlet;
import org.apache.oozie.servlet.V2AdminServlet;
import org.apache.oozie.servlet.V2JobServlet;
import org.apache.oozie.servlet.VersionServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;

/**
 * Runs a real Apache Oozie server for the Go tests: Oozie's services
 * (what its ServicesLoader starts in the web application) and its REST
 * servlets and filters, mapped as in Oozie's web.xml, in an embedded Jetty
 * on 127.0.0.1, with Derby as the database and the Hadoop mini cluster's
 * configuration (-hadoop-conf) for HDFS. No web UI, no JSP, no YARN:
 * workflows of control nodes and fs actions run inside the server, and so
 * does the test-only wait action (WaitActionExecutor), which stays RUNNING
 * until a local file exists.
 *
 * <pre>
 * java @jvm.options -cp 'target/oozie.jar:target/dependency/*' celos.oozie.Main \
 *     -dir DIR -hadoop-conf HADOOP_CONF_DIR [-port P] [-D key=value]... [-exit-when-ready]
 * </pre>
 *
 * Writes DIR/conf/oozie-site.xml (a restart on the same DIR and -port keeps
 * the Derby database in DIR/data, hence every job), logs to
 * DIR/logs/oozie.log, writes DIR/oozie.json ({"url":..., "pid":...}) and
 * prints "READY http://127.0.0.1:P/oozie" once the REST API answers. End of
 * standard input, or the line "shutdown", stops the server and exits.
 */
public final class Main {
  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable e) {
      // Oozie's threads would keep the JVM alive after a failed start.
      e.printStackTrace();
      System.out.println("ERR start: " + e.toString().replace('\n', ' '));
      System.out.flush();
      System.exit(1);
    }
    System.exit(0);
  }

  private static void usage(String why) {
    throw new IllegalArgumentException(why
        + " (usage: -dir DIR -hadoop-conf DIR [-port P] [-D key=value]... [-exit-when-ready])");
  }

  private static void run(String[] args) throws Exception {
    File dir = null, hadoopConf = null;
    int port = 0;
    boolean exitWhenReady = false;
    Map<String, String> extra = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "-dir": dir = new File(args[++i]).getAbsoluteFile(); break;
        case "-hadoop-conf": hadoopConf = new File(args[++i]).getAbsoluteFile(); break;
        case "-port": port = Integer.parseInt(args[++i]); break;
        case "-exit-when-ready": exitWhenReady = true; break;
        case "-D": {
          String kv = args[++i];
          int eq = kv.indexOf('=');
          if (eq < 0) usage("-D wants key=value, got " + kv);
          extra.put(kv.substring(0, eq), kv.substring(eq + 1));
          break;
        }
        default: usage("unknown argument " + args[i]);
      }
    }
    if (dir == null) usage("-dir is required");
    if (hadoopConf == null) usage("-hadoop-conf is required");

    File conf = new File(dir, "conf"), data = new File(dir, "data"), logs = new File(dir, "logs");
    for (File d : new File[] {conf, data, logs, new File(conf, "hadoop-conf")}) {
      if (!d.isDirectory() && !d.mkdirs()) throw new IOException("cannot create " + d);
    }
    // Oozie reads the cluster's client configuration from its own conf dir.
    for (String f : new String[] {"core-site.xml", "hdfs-site.xml"}) {
      File src = new File(hadoopConf, f);
      if (src.exists()) {
        Files.copy(src.toPath(), new File(conf, "hadoop-conf/" + f).toPath(),
            StandardCopyOption.REPLACE_EXISTING);
      }
    }

    // Bind first: Oozie's callback and base URLs need the port.
    Server server = new Server();
    ServerConnector http = new ServerConnector(server, 1, 1);
    http.setHost("127.0.0.1");
    http.setPort(port);
    server.addConnector(http);
    http.open();
    port = http.getLocalPort();
    String base = "http://127.0.0.1:" + port + "/oozie";

    System.setProperty("oozie.home.dir", dir.getPath());
    System.setProperty("oozie.config.dir", conf.getPath());
    System.setProperty("oozie.data.dir", data.getPath());
    System.setProperty("oozie.log.dir", logs.getPath());
    System.setProperty("oozie.log4j.reload", "3600");
    System.setProperty("oozie.http.hostname", "127.0.0.1");
    System.setProperty("oozie.http.port", Integer.toString(port));
    System.setProperty("derby.stream.error.file", new File(logs, "derby.log").getPath());
    // OpenJPA warns on every start about classes Oozie's persistence.xml
    // lists and its jars do not have; only its errors are worth reading.
    System.setProperty("openjpa.Log", "DefaultLevel=ERROR");

    writeSite(new File(conf, "oozie-site.xml"), base, extra);
    File log4j = new File(conf, "oozie-log4j.properties");
    if (!log4j.exists()) writeLog4j(log4j);

    Services services = new Services();
    services.init();
    checkActionsEarly();

    ServletContextHandler ctx = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    ctx.setContextPath("/oozie");
    EnumSet<DispatcherType> req = EnumSet.of(DispatcherType.REQUEST);
    ctx.addFilter(HostnameFilter.class, "/*", req);
    FilterHolder auth = new FilterHolder(AuthFilter.class);
    for (String p : new String[] {"/versions/*", "/v0/*", "/v1/*", "/v2/*"}) {
      ctx.addFilter(auth, p, req);
    }
    ctx.addServlet(VersionServlet.class, "/versions");
    ctx.addServlet(V1AdminServlet.class, "/v1/admin/*");
    ctx.addServlet(V2AdminServlet.class, "/v2/admin/*");
    ctx.addServlet(CallbackServlet.class, "/callback/*");
    ctx.addServlet(V1JobsServlet.class, "/v1/jobs");
    ctx.addServlet(V1JobsServlet.class, "/v2/jobs");
    ctx.addServlet(V1JobServlet.class, "/v1/job/*");
    ctx.addServlet(V2JobServlet.class, "/v2/job/*");
    server.setHandler(ctx);
    server.setStopAtShutdown(false);
    server.start();

    try (Writer w = Files.newBufferedWriter(new File(dir, "oozie.json.tmp").toPath(), StandardCharsets.UTF_8)) {
      w.write("{\"url\":\"" + base + "\",\"port\":" + port + ",\"pid\":" + ProcessHandle.current().pid() + "}\n");
    }
    Files.move(new File(dir, "oozie.json.tmp").toPath(), new File(dir, "oozie.json").toPath(),
        StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    System.out.println("READY " + base);
    System.out.flush();

    if (!exitWhenReady) {
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        line = line.trim();
        if (line.equals("shutdown")) break;
        if (!line.isEmpty()) {
          System.out.println("ERR " + line + ": unknown command");
          System.out.flush();
        }
      }
    }
    server.stop();
    services.destroy();
    System.out.println("OK shutdown");
    System.out.flush();
  }

  /**
   * Oozie's ActionCheckerService first runs 10 s after start (a constant),
   * so after a restart a running asynchronous action (the wait action)
   * would not be looked at for 10 s. Until then, this runs the same check
   * every second.
   */
  private static void checkActionsEarly() throws Exception {
    Class<?> k = Class.forName("org.apache.oozie.service.ActionCheckerService$ActionCheckRunnable");
    java.lang.reflect.Constructor<?> c = k.getDeclaredConstructor(int.class);
    c.setAccessible(true);
    Runnable check = (Runnable) c.newInstance(1);
    Thread t = new Thread(() -> {
      try {
        for (int i = 0; i < 11; i++) {
          Thread.sleep(1000);
          check.run();
        }
      } catch (Exception e) {
        System.err.println("early action check: " + e);
      }
    }, "celos-early-action-check");
    t.setDaemon(true);
    t.start();
  }

  /**
   * The test server's oozie-site.xml: Derby, simple authentication with
   * anonymous requests allowed (Oozie's defaults), the services a server
   * running control nodes and fs actions needs, quick status transitions.
   */
  private static void writeSite(File site, String base, Map<String, String> extra) throws IOException {
    Map<String, String> p = new LinkedHashMap<>();
    p.put("oozie.base.url", base);
    p.put("oozie.system.id", "oozie-" + System.getProperty("user.name"));
    p.put("oozie.service.JPAService.create.db.schema", "true");
    p.put("oozie.service.JPAService.validate.db.connection", "false");
    p.put("oozie.service.JPAService.jdbc.driver", "org.apache.derby.jdbc.EmbeddedDriver");
    p.put("oozie.service.JPAService.jdbc.url", "jdbc:derby:${oozie.data.dir}/oozie-db;create=true");
    p.put("oozie.service.JPAService.jdbc.username", "sa");
    p.put("oozie.service.JPAService.jdbc.password", "");
    p.put("oozie.service.JPAService.pool.max.active.conn", "5");
    p.put("oozie.service.HadoopAccessorService.hadoop.configurations", "*=hadoop-conf");
    p.put("oozie.service.HadoopAccessorService.action.configurations", "*=hadoop-conf");
    p.put("oozie.service.ShareLibService.fail.fast.on.startup", "false");
    p.put("oozie.service.ProxyUserService.proxyuser.*.hosts", "*");
    p.put("oozie.service.ProxyUserService.proxyuser.*.groups", "*");
    p.put("oozie.service.CallableQueueService.threads", "4");
    p.put("oozie.service.CallableQueueService.callable.concurrency", "4");
    p.put("oozie.service.SchedulerService.threads", "2");
    p.put("oozie.service.CoordMaterializeTriggerService.lookup.interval", "3600");
    p.put("oozie.service.StatusTransitService.statusTransit.interval", "3600");
    p.put("oozie.service.PauseTransitService.PauseTransit.interval", "3600");
    p.put("oozie.service.PurgeService.purge.interval", "86400");
    // The test-only wait action (WaitActionExecutor), polled every second.
    p.put("oozie.service.ActionService.executor.ext.classes", WaitActionExecutor.class.getName());
    p.put("oozie.service.SchemaService.wf.ext.schemas", "celos-wait-0.1.xsd");
    p.put("oozie.service.ActionCheckerService.action.check.interval", "1");
    p.put("oozie.service.ActionCheckerService.action.check.delay", "1");
    // Commands lost with a killed JVM (the in-memory queue) are queued
    // again by the recovery service; in seconds, not minutes, here.
    p.put("oozie.service.RecoveryService.interval", "5");
    p.put("oozie.service.RecoveryService.wf.actions.older.than", "5");
    p.put("oozie.authentication.type", "simple");
    p.put("oozie.authentication.simple.anonymous.allowed", "true");
    p.putAll(extra);
    StringBuilder b = new StringBuilder("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (Map.Entry<String, String> e : p.entrySet()) {
      b.append("  <property><name>").append(xml(e.getKey())).append("</name><value>")
          .append(xml(e.getValue())).append("</value></property>\n");
    }
    b.append("</configuration>\n");
    Files.write(site.toPath(), b.toString().getBytes(StandardCharsets.UTF_8));
  }

  private static void writeLog4j(File f) throws IOException {
    String s = String.join("\n",
        "log4j.rootLogger=WARN, oozie",
        "log4j.appender.oozie=org.apache.log4j.FileAppender",
        "log4j.appender.oozie.File=${oozie.log.dir}/oozie.log",
        "log4j.appender.oozie.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.oozie.layout.ConversionPattern=%d{ISO8601} %5p %c{1}:%L - SERVER[${oozie.instance.id}] %m%n",
        "log4j.logger.org.apache.oozie=INFO, oozie",
        "log4j.additivity.org.apache.oozie=false",
        "");
    Files.write(f.toPath(), s.getBytes(StandardCharsets.UTF_8));
  }

  private static String xml(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }
}
