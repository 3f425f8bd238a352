// Defines the id dup1.js defines.
celos.defineWorkflow({
    "id": "shared-id",
    "schedule": celos.hourlySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.alwaysTrigger(),
    "externalService": celos.oozieExternalService({"oozie.wf.application.path": "/two/workflow.xml"})
});
