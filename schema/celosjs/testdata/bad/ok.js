// The one good file among bad ones: it still converts.
celos.defineWorkflow({
    "id": "still-converted",
    "schedule": celos.hourlySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.alwaysTrigger(),
    "externalService": celos.oozieExternalService({"oozie.wf.application.path": "/ok/workflow.xml"})
});
