package oozietest

// TouchApp is an Oozie workflow application that runs inside Oozie alone
// (control nodes and an fs action, no YARN): it creates
// ${nameNode}${outputDir}/_SUCCESS. Its jobs are named
// ${celosWorkflowName}, which celos's oozie service sets to the slot
// (docs/oozie.md). Deploy it as <app path>/workflow.xml.
const TouchApp = `<workflow-app xmlns="uri:oozie:workflow:0.5" name="${celosWorkflowName}">
  <start to="touch"/>
  <action name="touch">
    <fs>
      <name-node>${nameNode}</name-node>
      <mkdir path="${nameNode}${outputDir}"/>
      <touchz path="${nameNode}${outputDir}/_SUCCESS"/>
    </fs>
    <ok to="end"/>
    <error to="fail"/>
  </action>
  <kill name="fail"><message>touch failed: ${wf:errorMessage(wf:lastErrorNode())}</message></kill>
  <end name="end"/>
</workflow-app>
`

// WaitApp is an Oozie workflow application whose one action, the test
// server's wait action (standing in for a long job on YARN), keeps the job
// RUNNING until the local file ${releaseDir}/${hour} exists. Its jobs are
// named ${celosWorkflowName}.
const WaitApp = `<workflow-app xmlns="uri:oozie:workflow:0.5" name="${celosWorkflowName}">
  <start to="work"/>
  <action name="work">
    <wait xmlns="uri:celos:wait:0.1"><until>${releaseDir}/${hour}</until></wait>
    <ok to="end"/>
    <error to="fail"/>
  </action>
  <kill name="fail"><message>work failed</message></kill>
  <end name="end"/>
</workflow-app>
`
