celos.defineWorkflow({
    "id": "uses-command-trigger",
    "schedule": celos.hourlySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.commandTrigger("test", "-e", "/tmp/ready"),
    "externalService": celos.oozieExternalService({"oozie.wf.application.path": "/x/workflow.xml"})
});
