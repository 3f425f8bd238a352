// Property functions whose values are the slot time's fields convert.
celos.importDefaults("common");

function pad(n) { return n < 10 ? "0" + n : "" + n; }

celos.defineWorkflow({
    "id": "props-joda",
    "schedule": celos.hourlySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.alwaysTrigger(),
    "externalService": celos.oozieExternalService(function (slotID) {
        var t = slotID.getScheduledTime();
        return {
            "oozie.wf.application.path": appPath("props"),
            "day": t.toString("yyyy-MM-dd"),
            "hourPath": "/data/" + t.toString("yyyy/MM/dd/HH") + "00",
            "stamp": t.toString("yyyyMMdd'T'HHmmss"),
            "name": slotID.getWorkflowId() + "-run",
            "static": "/static/${year}",
            "replaced": celos.replaceTimeVariables("/r/${year}/${month}/${day}", t)
        };
    })
});

celos.defineWorkflow({
    "id": "props-getters",
    "schedule": celos.minutelySchedule(),
    "schedulingStrategy": celos.serialSchedulingStrategy(),
    "trigger": celos.alwaysTrigger(),
    "externalService": celos.oozieExternalService(function (slotID) {
        var t = slotID.getSlotTime();
        return {
            "oozie.wf.application.path": appPath("getters"),
            "minutePath": "/m/" + t.getYear() + "/" + pad(t.getMonthValue()) + "/" + pad(t.getDayOfMonth()) +
                "/" + pad(t.getHour()) + pad(t.getMinute()) + pad(t.getSecond())
        };
    })
});
