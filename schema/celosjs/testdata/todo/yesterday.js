// A property function that computes the previous day: no slot-time token
// says that, so the property is left as a TODO.
celos.importDefaults("common");

celos.defineWorkflow({
    "id": "daily-rollup",
    "schedule": celos.cronSchedule("0 0 1 * * ?"),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.hdfsCheckTrigger("/daily/${year}-${month}-${day}/_READY"),
    "externalService": celos.oozieExternalService(function (slotID) {
        var t = slotID.getScheduledTime();
        return {
            "oozie.wf.application.path": appPath("rollup"),
            "today": "/daily/" + t.toString("yyyy-MM-dd"),
            "yesterday": "/daily/" + t.minusDays(1).toString("yyyy-MM-dd")
        };
    })
});
