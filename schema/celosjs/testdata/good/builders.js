// Every builder of the manual and the API reference, once.
importDefaults("nooozie");

var hdfsCheck = celos.hdfsCheckTrigger("/logs/${year}-${month}-${day}/${hour}00/_READY", "hdfs://nn1:8020");

celos.defineWorkflow({
    "id": "every-trigger",
    "schedule": celos.cronSchedule("0 15 10 * * ?"),
    "schedulingStrategy": celos.serialSchedulingStrategy(3),
    "trigger": celos.andTrigger(
        hdfsCheck,
        celos.offsetTrigger(60 * 60 * 1, hdfsCheck),
        celos.offsetTrigger(-60 * 60 * 2, hdfsCheck),
        celos.orTrigger(celos.successTrigger("wordcount"), celos.alwaysTrigger()),
        celos.notTrigger(celos.successTrigger("workflow-bar")),
        celos.delayTrigger(0),
        celos.andTrigger(),
        celos.orTrigger()),
    "externalService": celos.oozieExternalService({
        "oozie.wf.application.path": celos.hdfsPath("/every-trigger/workflow.xml"),
        "prop1": "Hello. It is the year ${year}!",
        "prop2": "Just another property.",
        "database": celos.databaseName("warehouse"),
        "quote\"and\\backslash": "a \"quoted\" \\(not interpolated) value"
    }, "http://oozie2.example.com:11000/oozie"),
    "startTime": "2015-09-01T00:00Z",
    "maxRetryCount": 2,
    "waitTimeoutSeconds": 86400,
    "url": "https://wiki.example.com/every-trigger",
    "contacts": [{"name": "Data team", "email": "data@example.com"}, {"name": "On call"}]
});

// An alert: a dependent schedule with a delayed not-success trigger.
celos.defineWorkflow({
    "id": "workflow-bar-alert",
    "schedule": celos.dependentSchedule("workflow-bar"),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.andTrigger(celos.delayTrigger(60 * 60), celos.notTrigger(celos.successTrigger("workflow-bar"))),
    "externalService": celos.oozieExternalService({"oozie.wf.application.path": "/alert/workflow.xml"}),
    "maxRetryCount": 0
});

var props = {"oozie.wf.application.path": "/minutely/workflow.xml"};
celos.mergeProperties({"input": "/in/" + HOURLY_INPUT}, props);
celos.addWorkflow({
    "id": "minutely",
    "schedule": celos.minutelySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(1),
    "trigger": celos.isRunningInTestMode() ? celos.alwaysTrigger() : celos.hdfsCheckTrigger(celos.hdfsPath("/in/" + HOURLY_INPUT), "file:///"),
    "externalService": celos.oozieExternalService(props),
    "startTime": "2016-01-01T12:30:00.000+01:00"
});
// Celos read the properties object at submit time: this change counts.
props["late"] = "added after defineWorkflow";
