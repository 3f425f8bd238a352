package celos.oozie;

import java.io.File;

import org.apache.oozie.action.ActionExecutor;
import org.apache.oozie.action.ActionExecutorException;
import org.apache.oozie.client.WorkflowAction;
import org.apache.oozie.util.XmlUtils;
import org.jdom.Element;
import org.jdom.Namespace;

/**
 * A test-only asynchronous workflow action that stays RUNNING until a local
 * file exists, as a long MapReduce job would without needing YARN: the job
 * is RUNNING with no lock held, so it can be suspended, resumed and killed
 * through the REST API as a real one. Oozie's ActionCheckerService polls it.
 *
 * <pre>
 * &lt;action name="work"&gt;
 *   &lt;wait xmlns="uri:celos:wait:0.1"&gt;&lt;until&gt;/tmp/release&lt;/until&gt;&lt;/wait&gt;
 *   &lt;ok to="end"/&gt;&lt;error to="fail"/&gt;
 * &lt;/action&gt;
 * </pre>
 */
public final class WaitActionExecutor extends ActionExecutor {
  private static final Namespace NS = Namespace.getNamespace("uri:celos:wait:0.1");

  public WaitActionExecutor() {
    super("wait");
  }

  private static File until(WorkflowAction action) throws ActionExecutorException {
    try {
      Element e = XmlUtils.parseXml(action.getConf());
      return new File(e.getChildTextTrim("until", NS));
    } catch (Exception ex) {
      throw new ActionExecutorException(ActionExecutorException.ErrorType.ERROR, "WAIT001",
          "bad wait action: " + ex);
    }
  }

  @Override
  public void start(Context context, WorkflowAction action) throws ActionExecutorException {
    File f = until(action);
    context.setStartData("wait:" + f, "local", "file://" + f);
    check(context, action);
  }

  @Override
  public void check(Context context, WorkflowAction action) throws ActionExecutorException {
    if (until(action).exists()) {
      context.setExecutionData("OK", null);
    } else {
      context.setExternalStatus("RUNNING");
    }
  }

  @Override
  public void end(Context context, WorkflowAction action) throws ActionExecutorException {
    if ("OK".equals(action.getExternalStatus())) {
      context.setEndData(WorkflowAction.Status.OK, WorkflowAction.Status.OK.toString());
    } else {
      context.setEndData(WorkflowAction.Status.ERROR, WorkflowAction.Status.ERROR.toString());
    }
  }

  @Override
  public void kill(Context context, WorkflowAction action) throws ActionExecutorException {
    context.setExternalStatus("KILLED");
    context.setExecutionData("KILLED", null);
    context.setEndData(WorkflowAction.Status.KILLED, "ERROR");
  }

  @Override
  public boolean isCompleted(String externalStatus) {
    return "OK".equals(externalStatus) || "KILLED".equals(externalStatus);
  }
}
