// Workflows defined in loops.
celos.importDefaults("common");

var feeds = ["clicks", "views", "bids"];
for (var i = 0; i < feeds.length; i++) {
    celos.defineWorkflow({
        "id": "ingest-" + feeds[i] + "-hourly",
        "schedule": celos.hourlySchedule(),
        "schedulingStrategy": celos.serialSchedulingStrategy(2),
        "trigger": celos.hdfsCheckTrigger("/raw/" + feeds[i] + "/${year}/${month}/${day}/${hour}/_SUCCESS"),
        "externalService": celos.oozieExternalService({
            "oozie.wf.application.path": appPath("ingest"),
            "feed": feeds[i],
            "output": "/clean/" + feeds[i] + "/${year}/${month}/${day}/${hour}"
        }),
        "maxRetryCount": 3
    });
}

// These differ in more than a name (the concurrency): a comprehension over a
// list of structs. They override a default property, so their properties are
// written in full.
[["small", 1], ["large", 4]].forEach(function (c) {
    celos.defineWorkflow({
        "id": "report-" + c[0],
        "schedule": celos.cronSchedule("0 0 3 * * ?"),
        "schedulingStrategy": celos.serialSchedulingStrategy(c[1]),
        "trigger": celos.andTrigger.apply(null, feeds.map(function (f) { return celos.successTrigger("ingest-" + f + "-hourly"); })),
        "externalService": celos.oozieExternalService({"oozie.wf.application.path": appPath("report"), "user.name": "reports-" + c[0]})
    });
});

// These differ in four values besides the name: written out one by one.
[[1, "0 0 4 * * ?", 60, 2], [2, "0 0 5 * * ?", 120, 3]].forEach(function (c) {
    celos.defineWorkflow({
        "id": "cleanup-" + c[0],
        "schedule": celos.cronSchedule(c[1]),
        "schedulingStrategy": celos.serialSchedulingStrategy(c[3]),
        "trigger": celos.delayTrigger(c[2]),
        "externalService": celos.oozieExternalService({"oozie.wf.application.path": appPath("cleanup")}),
        "maxRetryCount": c[3]
    });
});
